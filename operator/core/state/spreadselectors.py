"""The selectors of Services, ReplicationControllers, ReplicaSets and StatefulSets, as default
topology spreading reads them.

Why: kube-scheduler gives a pod without ``topologySpreadConstraints`` of its own the profile's
default constraints (``PodTopologySpreadArgs``: by default soft spreading over hostnames, maxSkew
3, and zones, maxSkew 5), with one selector made from the objects that select the pod
(pkg/scheduler/framework/plugins/helper/spread.go ``DefaultSelector``, release 1.37):

* every Service in the pod's namespace whose ``spec.selector`` (a map; absent or empty selects
  nothing) matches the pod's labels: the maps merged;
* the pod's controller (its ``ownerReferences`` entry with ``controller: true``), looked up by name
  in the pod's namespace: a ReplicationController (``v1``) adds its selector map to the merged
  one; a ReplicaSet or StatefulSet (``apps/v1``) adds the requirements of its ``spec.selector``
  (a label selector; absent or invalid adds none). Any other controller adds nothing.

No requirement at all: the pod gets no default constraints. Only the selectors are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.core.state.selectors import LabelRequirement, LabelSelector, SelectorError, parse_selector

SERVICE = "Service"
REPLICATION_CONTROLLER = "ReplicationController"
REPLICA_SET = "ReplicaSet"
STATEFUL_SET = "StatefulSet"
#: every kind kept, by its ``kind``
OWNER_KINDS: frozenset[str] = frozenset({SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET})
#: the controllers whose selector a pod's default constraints use: (apiVersion, kind)
CONTROLLER_KINDS: frozenset[tuple[str, str]] = frozenset(
    {("v1", REPLICATION_CONTROLLER), ("apps/v1", REPLICA_SET), ("apps/v1", STATEFUL_SET)}
)


def controller_ref(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, name)`` of the pod's controller when it is one whose selector default spreading
    reads (``CONTROLLER_KINDS``), else None. The first owner reference with ``controller: true``
    is the controller, as apimachinery's ``GetControllerOf``."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            kind, version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
            return (kind, str(ref.get("name") or "")) if (version, kind) in CONTROLLER_KINDS else None
    return None


@dataclass(frozen=True, slots=True)
class SelectorOwner:
    """One Service / ReplicationController / ReplicaSet / StatefulSet: its selector only."""

    kind: str
    namespace: str
    name: str
    #: Services and ReplicationControllers: ``spec.selector`` as key=value pairs (empty: none)
    match: tuple[tuple[str, str], ...] = ()
    #: ReplicaSets and StatefulSets: the requirements of ``spec.selector`` (empty when absent,
    #: empty or invalid: it adds none)
    requirements: tuple[LabelRequirement, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, labels: Mapping[str, str]) -> bool:
        """A Service's selector matches these labels (an empty one matches no pod)."""
        return bool(self.match) and all(labels.get(k) == v for k, v in self.match)

    @classmethod
    def decode(cls, kind: str, obj: Mapping[str, Any]) -> SelectorOwner:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        selector = spec.get("selector")
        if kind in (SERVICE, REPLICATION_CONTROLLER):
            pairs = selector.items() if isinstance(selector, Mapping) else ()
            return cls(kind, namespace, name, match=tuple(sorted((str(k), str(v)) for k, v in pairs)))
        try:
            parsed = parse_selector(selector)
        except SelectorError:
            parsed = None  # LabelSelectorAsSelector fails: upstream adds no requirement
        return cls(kind, namespace, name, requirements=parsed.requirements if parsed is not None else ())


@dataclass
class SpreadSelectors:
    """The selector owners of each kind, by namespace and name."""

    _by_kind: dict[str, dict[str, dict[str, SelectorOwner]]] = field(default_factory=dict)

    def upsert(self, owner: SelectorOwner) -> None:
        self._by_kind.setdefault(owner.kind, {}).setdefault(owner.namespace, {})[owner.name] = owner

    def remove(self, kind: str, key: str) -> None:
        namespace, _, name = key.rpartition("/")
        spaces = self._by_kind.get(kind, {})
        names = spaces.get(namespace)
        if names is not None:
            names.pop(name, None)
            if not names:
                del spaces[namespace]

    def get(self, kind: str, namespace: str, name: str) -> SelectorOwner | None:
        return self._by_kind.get(kind, {}).get(namespace, {}).get(name)

    def __len__(self) -> int:
        return sum(len(names) for spaces in self._by_kind.values() for names in spaces.values())

    def default_selector(
        self, namespace: str, labels: Mapping[str, str], controller: tuple[str, str] | None
    ) -> LabelSelector | None:
        """The selector of a pod's default constraints; None when nothing selects it."""
        merged: dict[str, str] = {}
        for service in self._by_kind.get(SERVICE, {}).get(namespace, {}).values():
            if service.selects(labels):
                merged.update(service.match)
        extra: tuple[LabelRequirement, ...] = ()
        if controller is not None:
            owner = self.get(controller[0], namespace, controller[1])
            if owner is not None:
                merged.update(owner.match)
                extra = owner.requirements
        reqs = tuple(LabelRequirement(k, "In", frozenset({v})) for k, v in sorted(merged.items())) + extra
        return LabelSelector(reqs) if reqs else None
