"""PodDisruptionBudgets as preemption reads them, and the nominated pods of each node.

Why here: DefaultPreemption honours PDBs "where possible" (kube-scheduler's
``FilterVictimsWithPDBViolation``: victims whose eviction would take a budget below zero are
reprieved first, and a node needing fewer violations wins), so the cache keeps the few fields of
each PDB it reads (``policy/v1``: namespace, selector, ``status.disruptionsAllowed``,
``status.disruptedPods``). A pod that preempted is *nominated* to a node until it is bound there:
kube-scheduler's nominator, which makes pods of lower or equal priority leave that room alone
(the two-pass filter in :mod:`shoal.core.framework.whatif`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import LabelSelector, SelectorError, parse_selector


@dataclass(frozen=True, slots=True)
class PDBInfo:
    namespace: str
    name: str
    #: None: absent, empty or invalid, which matches no pod (as upstream)
    selector: LabelSelector | None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matches(self, pod: PodInfo) -> bool:
        sel = self.selector
        return sel is not None and pod.namespace == self.namespace and sel.matches(pod.labels)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PDBInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        try:
            selector = parse_selector(spec.get("selector"))
        except SelectorError:
            selector = None
        if selector is not None and selector.everything:
            selector = None  # an empty selector matches nothing in policy/v1 (as upstream reads it)
        allowed = status.get("disruptionsAllowed")
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            selector=selector,
            disruptions_allowed=int(allowed) if isinstance(allowed, int) else 0,
            disrupted_pods=frozenset(str(k) for k in (status.get("disruptedPods") or {})),
        )


@dataclass
class Nominator:
    """Pending pods nominated to a node (``status.nominatedNodeName``, or set in memory by a
    preemption before the API echoes it), until they are bound, deleted or nominated elsewhere."""

    _node_of: dict[str, str] = field(default_factory=dict)
    _pods: dict[str, dict[str, PodInfo]] = field(default_factory=dict)
    #: bumped when the set of nodes with nominations changes (what per-cycle caches key on)
    version: int = 0

    def nominate(self, pod: PodInfo, node: str) -> None:
        self.remove(pod.uid)
        if node:
            self._node_of[pod.uid] = node
            pods = self._pods.setdefault(node, {})
            if not pods:
                self.version += 1
            pods[pod.uid] = pod

    def remove(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._pods[node]
            pods.pop(uid, None)
            if not pods:
                del self._pods[node]
                self.version += 1

    def node_names(self) -> Iterator[str]:
        """The nodes that have nominated pods."""
        return iter(self._pods)

    def update(self, old: PodInfo | None, pod: PodInfo) -> None:
        """The API's view of a pod changed. As kube-scheduler's ``UpdateNominatedPod``: a
        nomination the pod carries wins; one it dropped is dropped; an update that touches
        neither keeps the in-memory nomination (the status patch may still be on its way)."""
        if pod.bound or pod.terminating or pod.terminated:
            self.remove(pod.uid)
        elif pod.nominated_node:
            self.nominate(pod, pod.nominated_node)
        elif old is not None and old.nominated_node:
            self.remove(pod.uid)
        elif (node := self._node_of.get(pod.uid)) is not None:
            self.nominate(pod, node)  # keep it, with the pod's new fields

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def pods_on(self, node: str) -> list[PodInfo]:
        return list(self._pods.get(node, {}).values())

    def __len__(self) -> int:
        return len(self._node_of)
