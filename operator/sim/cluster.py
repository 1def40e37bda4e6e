"""An in-memory cluster: the same framework and cycles as the operator, with no API server.

Why: unit tests, ``shoal simulate`` (what-if: "where would these pods go with this profile?")
and ``make bench-core`` need the real scheduler without Kubernetes. Objects come from YAML — a
``kubectl get ... -A -o yaml`` dump (a ``List``), multi-document files, or plain lists; kinds no
placement reads are counted and skipped (:meth:`InMemoryCluster.skipped_line`) — and the binder
writes ``spec.nodeName`` into the stored pod and feeds it back, as a watch would.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from shoal.core.framework.outcomes import ScoreOutcome
from shoal.core.framework.profile import PluginEntry
from shoal.core.scheduling.schedule_one import Placement
from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.hierarchy import composite_pod_group
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NATIVE_GROUP_API, NodeSpec, PodInfo
from shoal.core.state.spreadselectors import OWNER_KINDS, SelectorOwner
from shoal.core.state.status import Status
from shoal.core.state.workloads import decode_pod_group
from shoal.plugins.defaultpreemption.ports import PREEMPTION_EXECUTOR
from shoal.plugins.dynamicresources.binding import now
from shoal.plugins.dynamicresources.objects import DRA_DECODERS, ResourceClaimInfo
from shoal.plugins.dynamicresources.ports import CLAIM_WRITER
from shoal.plugins.nodevolumelimits.attachments import VolumeAttachmentInfo
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry
from shoal.plugins.volumebinding.objects import (
    BIND_COMPLETED,
    SELECTED_NODE,
    STORAGE_DECODERS,
    ClaimRef,
    PVCInfo,
    PVInfo,
)
from shoal.plugins.volumebinding.ports import VOLUME_WRITER
from shoal.sim.preemption import MemoryPreemptionExecutor

JSON = dict[str, Any]


def load_objects(source: str | Path | Iterable[Mapping[str, Any]]) -> list[JSON]:
    """Kubernetes objects from a YAML/JSON file or text: List kinds are flattened."""
    if isinstance(source, Path):
        docs: Iterable[Any] = list(yaml.safe_load_all(source.read_text()))
    elif isinstance(source, str):
        docs = list(yaml.safe_load_all(source))
    else:
        docs = list(source)
    out: list[JSON] = []

    def walk(doc: Any) -> None:
        if doc is None:
            return
        if isinstance(doc, list):
            for item in doc:
                walk(item)
            return
        if not isinstance(doc, dict):
            raise ValueError(f"not a Kubernetes object: {str(doc)[:80]!r}")
        if str(doc.get("kind", "")).endswith("List") and "items" in doc:
            for item in doc.get("items") or ():
                walk(item)
            return
        out.append(dict(doc))

    for doc in docs:
        walk(doc)
    return out


def profile_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A SchedulingProfile object (or its bare spec) → the spec."""
    if obj.get("kind") == "SchedulingProfile":
        return dict(obj.get("spec") or {})
    return dict(obj)


@dataclass
class Outcome:
    pod: str
    node: str | None = None
    message: str = ""
    attempts: int = 0
    #: where the pod's gang went and why (TopologyPlacement), from the Scheduled event
    note: str = ""
    top: list[tuple[str, int, dict[str, int]]] = field(default_factory=list)


class RecordingReporter:
    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self.events: list[tuple[str, str, str]] = []  # (pod key, reason, message)

    def _get(self, pod: PodInfo) -> Outcome:
        return self.outcomes.setdefault(pod.uid, Outcome(pod.key))

    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None:
        out = self._get(pod)
        out.node, out.attempts = node, out.attempts + 1
        out.message = f"Successfully assigned {pod.key} to {node}"
        out.note = note
        if note:
            out.message += f" ({note})"
        if pod.problems:
            out.message += " (ignored: " + "; ".join(pod.problems.values()) + ")"
        self.events.append((pod.key, "Scheduled", out.message))

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None:
        out = self._get(pod)
        out.node, out.attempts = None, out.attempts + 1
        out.message = message
        if pod.problems:
            out.message += " (ignored: " + "; ".join(pod.problems.values()) + ")"
        self.events.append((pod.key, "FailedScheduling", out.message))

    def held(self, pod: PodInfo, reason: str, message: str, profile: str) -> None:
        pass  # the outcome of a pod never tried says it ("held before the queue"): Simulation.run

    def released(self, pod: PodInfo) -> None:
        pass


class MemoryBinder:
    """Binds by writing spec.nodeName into the stored pod, then echoes it like a watch event."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster
        self.scheduler: Scheduler | None = None
        self.fail: dict[str, Status] = {}  # pod uid -> status to return (tests)

    async def bind(self, pod: PodInfo, node: str) -> Status:
        if pod.uid in self.fail:
            return self.fail.pop(pod.uid)
        stored = self.cluster.pods.get(pod.uid)
        if stored is None:
            return Status.error(f"pod {pod.key} not found")
        if (stored.get("spec") or {}).get("nodeName"):
            return Status.error(f"pod {pod.key} is already assigned", requeue=False)
        if node not in self.cluster.nodes:
            return Status.error(f"node {node} not found")
        stored.setdefault("spec", {})["nodeName"] = node
        if self.scheduler is not None:
            self.scheduler.on_pod(PodInfo.from_dict(stored))
        return Status()


class MemoryClaimWriter:
    """DynamicResources' writes, applied to the cache at once: the claim comes back allocated and
    reserved for the pod, as the watch would bring it."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._made = 0
        #: pod uid -> its ``status.extendedResourceClaimStatus`` as written
        self.extended: dict[str, dict[str, Any]] = {}

    async def reserve_claim(
        self, claim: ResourceClaimInfo, allocation: ResourceClaimInfo | None, consumer: Mapping[str, str]
    ) -> Status:
        done = replace(allocation or claim, consumers=(*claim.consumers, dict(consumer)))
        if allocation is not None:  # as the API server keeps what PreBind wrote
            done = replace(done, allocated_at=now())
        self.scheduler.on_object(done)
        return Status()

    async def deallocate(self, claim: ResourceClaimInfo) -> Status:
        free = replace(claim, allocated=None, allocated_node="", allocated_terms=(), consumers=())
        self.scheduler.on_object(free)
        return Status()

    async def create_claim(self, body: Mapping[str, Any]) -> tuple[ResourceClaimInfo | None, Status]:
        self._made += 1
        meta = dict(body.get("metadata") or {})
        name = f"{meta.pop('generateName', '')}{self._made:05d}"  # the API server's: 5 random characters
        obj = {**body, "metadata": {**meta, "name": name, "uid": f"uid-{name}", "resourceVersion": "1"}}
        made = ResourceClaimInfo.from_dict(obj)
        self.scheduler.on_object(made)
        return made, Status()

    async def delete_claim(self, claim: ResourceClaimInfo) -> Status:
        self.scheduler.on_object(claim, deleted=True)
        return Status()

    async def record_extended_claim(self, pod: PodInfo, status: Mapping[str, Any]) -> Status:
        self.extended[pod.uid] = dict(status)
        return Status()


class MemoryVolumeWriter:
    """VolumeBinding's writes, with the PV controller's answer at once: a static match binds the
    claim to its PV; a claim to provision gets a PV (``pvc-<claim uid or name>``, no node
    affinity) of its class and size, bound to it."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
        self._bind(
            replace(pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid or claim.key)), claim
        )
        return Status()

    async def select_node(self, claim: PVCInfo, node: str) -> Status:
        annotations = {**claim.annotations, SELECTED_NODE: node}
        name = f"pvc-{claim.uid or claim.key.replace('/', '-')}"
        pv = PVInfo(
            name, storage_class=claim.storage_class, capacity=claim.request, access_modes=claim.access_modes
        )
        self._bind(
            replace(pv, claim_ref=ClaimRef(claim.namespace, claim.name, claim.uid)),
            replace(claim, annotations=annotations),
        )
        return Status()

    def _bind(self, pv: PVInfo, claim: PVCInfo) -> None:
        ref = ClaimRef(claim.namespace, claim.name, claim.uid)
        self.scheduler.on_object(replace(pv, claim_ref=ref, phase="Bound"))
        annotations = {**claim.annotations, BIND_COMPLETED: "yes"}
        self.scheduler.on_object(replace(claim, volume_name=pv.name, phase="Bound", annotations=annotations))


#: the kinds a plugin package's store takes, and how each is parsed
STORE_DECODERS: dict[str, Callable[[JSON], object]] = {
    **STORAGE_DECODERS,
    "VolumeAttachment": VolumeAttachmentInfo.from_dict,
    **DRA_DECODERS,
}


def decode(decoders: Mapping[str, Callable[[JSON], object]], obj: JSON) -> object:
    """A store's object from an API dict; ValueError naming the object when it is malformed."""
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} without metadata.name")
    if isinstance(meta, Mapping) and meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    try:
        return decoders[kind](obj)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"{kind} {name}: malformed ({exc})") from None


#: the PriorityClasses every API server has (``system-cluster-critical``, ``system-node-critical``)
BUILTIN_PRIORITY_CLASSES: dict[str, JSON] = {
    "system-cluster-critical": {"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000},
    "system-node-critical": {"metadata": {"name": "system-node-critical"}, "value": 2_000_001_000},
}

#: how the scheduler parses each kind: tried when an object is loaded, so a malformed one is named
_PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "Node": NodeSpec.from_dict,
    "Pod": PodInfo.from_dict,
    "PodGroup": decode_pod_group,  # scheduler-plugins' or native, by apiVersion
    "CompositePodGroup": composite_pod_group,
}


class InMemoryCluster:
    """Nodes, pods and PodGroups held as API dicts."""

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self.nodes: dict[str, JSON] = {}
        self.pods: dict[str, JSON] = {}
        self.pod_groups: dict[str, JSON] = {}
        #: CompositePodGroups (1.38) by ``namespace/name``
        self.composites: dict[str, JSON] = {}
        self.namespaces: dict[str, JSON] = {}
        #: what a plugin package's store takes (PersistentVolumes, claims, StorageClasses, CSINodes,
        #: VolumeAttachments, CSIDrivers, DeviceClasses, ResourceSlices, ResourceClaims), parsed
        #: when added
        self.stored: list[object] = []
        self.profiles: list[JSON] = []
        #: Services, ReplicationControllers, ReplicaSets, StatefulSets (default topology spreading)
        self.selector_owners: list[SelectorOwner] = []
        #: PriorityClasses by name: the priority of pods created without one (resolve_priority)
        self.priority_classes: dict[str, JSON] = {}
        #: PodDisruptionBudgets, which DefaultPreemption honours where it can
        self.pdbs: list[PDBInfo] = []
        #: kind -> how many objects of it were skipped (no placement reads them)
        self.skipped: Counter[str] = Counter()
        for obj in objects:
            self.add(obj)

    @classmethod
    def from_yaml(cls, *sources: str | Path) -> InMemoryCluster:
        cluster = cls()
        for source in sources:
            for obj in load_objects(source):
                cluster.add(obj)
        return cluster

    def add(self, obj: Mapping[str, Any]) -> JSON:
        """Keep one object; a malformed one (which no API server would hold) is a ValueError of one
        line naming it, never a traceback later in a cycle."""
        stored: JSON = _deepcopy(obj)
        kind = stored.get("kind")
        meta = stored.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ValueError(f"{kind} {meta!r}: malformed: metadata must be a mapping")
        where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
        parse = _PARSERS.get(str(kind))
        if parse is not None:
            try:
                if not isinstance(stored.get("spec", {}), dict):
                    raise TypeError("spec must be a mapping")
                parse(stored)
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                raise ValueError(f"{kind} {where}: malformed: {type(exc).__name__}: {exc}") from None
        if kind == "Node":
            self.nodes[meta["name"]] = stored
        elif kind == "Pod":
            meta.setdefault("namespace", "default")
            meta.setdefault("uid", str(uuid.uuid4()))
            self.pods[meta["uid"]] = stored
        elif kind == "PodGroup":
            meta.setdefault("namespace", "default")
            self.pod_groups[decode_pod_group(stored).key] = stored
        elif kind == "CompositePodGroup":
            meta.setdefault("namespace", "default")
            self.composites[composite_pod_group(stored).key] = stored
        elif kind == "SchedulingProfile":
            self.profiles.append(stored)
        elif kind == "Namespace":
            self.namespaces[meta["name"]] = stored
        elif kind in STORE_DECODERS:
            if kind in DRA_DECODERS or kind == "PersistentVolumeClaim":
                meta.setdefault("namespace", "default")
            self.stored.append(decode(STORE_DECODERS, stored))
        elif kind in OWNER_KINDS:
            meta.setdefault("namespace", "default")
            self.selector_owners.append(SelectorOwner.decode(kind, stored))
        elif kind == "PriorityClass":
            self.priority_classes[meta["name"]] = stored
        elif kind == "PodDisruptionBudget":
            meta.setdefault("namespace", "default")
            self.pdbs.append(PDBInfo.from_dict(stored))
        else:  # a dump holds kinds no placement reads (ConfigMaps, Events, Deployments...)
            self.skipped[str(kind or "(no kind)")] += 1
        return stored

    def skipped_line(self) -> str:
        """One line naming the objects skipped, by kind ("" when none were)."""
        if not self.skipped:
            return ""
        total = sum(self.skipped.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.skipped.items()))
        return f"skipped {total} object{'s' if total != 1 else ''} of kinds no placement reads: {kinds}"

    def resolve_priority(self, pod: JSON) -> None:
        """What the API server's Priority admission does to a pod created without ``spec.priority``:
        its ``priorityClassName`` (or the ``globalDefault`` class) gives the priority and, unless the
        pod sets one, the preemption policy. A pod naming a class the snapshot lacks is refused, as
        the API server refuses it. A pod with ``spec.priority`` (any pod of a dump) is kept as is.
        A native PodGroup or CompositePodGroup (``scheduling.k8s.io``) is admitted the same way
        (its members must have its priority); other objects are left alone."""
        if pod.get("kind") in ("PodGroup", "CompositePodGroup") and not str(
            pod.get("apiVersion", "")
        ).startswith(NATIVE_GROUP_API):
            return
        spec = pod.setdefault("spec", {})
        if spec.get("priority") is not None:
            return
        name = spec.get("priorityClassName")
        if name:
            cls = self.priority_classes.get(name) or BUILTIN_PRIORITY_CLASSES.get(name)
            if cls is None:
                meta = pod.get("metadata") or {}
                raise ValueError(
                    f"{pod.get('kind', 'Pod')} {meta.get('namespace', 'default')}/{meta.get('name')}: no "
                    f"PriorityClass {name!r} in the snapshot (the API server refuses such an object)"
                )
        else:
            defaults = [c for c in self.priority_classes.values() if c.get("globalDefault")]
            cls = min(defaults, key=lambda c: int(c.get("value") or 0), default=None)
            if cls is None:
                return
            spec["priorityClassName"] = cls["metadata"]["name"]
        spec["priority"] = int(cls.get("value") or 0)
        if not spec.get("preemptionPolicy"):
            spec["preemptionPolicy"] = cls.get("preemptionPolicy") or "PreemptLowerPriority"

    def pending(self) -> list[JSON]:
        return [p for p in self.pods.values() if not (p.get("spec") or {}).get("nodeName")]


class Simulation:
    """A Scheduler wired to an InMemoryCluster."""

    def __init__(
        self,
        cluster: InMemoryCluster,
        profiles: Iterable[Mapping[str, Any]] = (),
        *,
        registry: Mapping[str, PluginEntry] | None = None,
        seed: int | None = 0,
        record_scores: bool = True,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
    ) -> None:
        self.cluster = cluster
        self.binder = MemoryBinder(cluster)
        self.reporter = RecordingReporter()
        self.scheduler = Scheduler(
            registry if registry is not None else load_registry(),
            self.binder,
            reporter=self.reporter,
            defaults=DEFAULT_PLUGINS,
            rng=random.Random(seed),
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
        )
        #: pod uid -> the chosen node first, then the other best-scoring ones, with per-plugin scores
        self.last_scores: dict[str, list[tuple[str, int, dict[str, int]]]] = {}
        if record_scores:
            self.scheduler.cycles.placement_observer = self._record_top
        self.binder.scheduler = self.scheduler
        self.scheduler.handle.extras[VOLUME_WRITER] = MemoryVolumeWriter(self.scheduler)
        self.scheduler.handle.extras[CLAIM_WRITER] = MemoryClaimWriter(self.scheduler)
        self.preemption = MemoryPreemptionExecutor(cluster.pods, self.scheduler.on_pod, self.delete_pod)
        self.scheduler.handle.extras[PREEMPTION_EXECUTOR] = self.preemption
        specs = [profile_spec(p) for p in profiles] or [profile_spec(p) for p in cluster.profiles]
        for spec in specs or [DEFAULT_PROFILE_SPEC]:
            self.scheduler.set_profile(spec)
        for name, ns in cluster.namespaces.items():
            self.scheduler.on_namespace(name, (ns.get("metadata") or {}).get("labels"))
        for node in cluster.nodes.values():
            self.scheduler.on_node(NodeSpec.from_dict(node))
        for obj in cluster.stored:
            self.scheduler.on_object(obj)
        for owner in cluster.selector_owners:
            self.scheduler.cache.spread_selectors.upsert(owner)
        for pdb in cluster.pdbs:
            self.scheduler.cache.pdbs[pdb.key] = pdb
        for composite in cluster.composites.values():
            cluster.resolve_priority(composite)
            self.scheduler.on_composite(composite_pod_group(composite))
        for group in cluster.pod_groups.values():
            cluster.resolve_priority(group)
            self.scheduler.on_pod_group(decode_pod_group(group))
        for pod in cluster.pods.values():
            cluster.resolve_priority(pod)
        for pod in cluster.pods.values():
            self.scheduler.on_pod(PodInfo.from_dict(pod))

    def submit(self, obj: Mapping[str, Any]) -> JSON:
        stored = self.cluster.add(obj)
        kind = stored["kind"]
        if kind == "Pod":
            self.cluster.resolve_priority(stored)
            self.scheduler.on_pod(PodInfo.from_dict(stored))
        elif kind == "PodDisruptionBudget":
            pdb = self.cluster.pdbs[-1]
            self.scheduler.cache.pdbs[pdb.key] = pdb
        elif kind == "Node":
            self.scheduler.on_node(NodeSpec.from_dict(stored))
        elif kind == "PodGroup":
            self.cluster.resolve_priority(stored)
            self.scheduler.on_pod_group(decode_pod_group(stored))
        elif kind == "CompositePodGroup":
            self.cluster.resolve_priority(stored)
            self.scheduler.on_composite(composite_pod_group(stored))
        elif kind == "Namespace":
            self.scheduler.on_namespace(stored["metadata"]["name"], stored["metadata"].get("labels"))
        elif kind in STORE_DECODERS:
            self.scheduler.on_object(self.cluster.stored[-1])
        elif kind in OWNER_KINDS:
            self.scheduler.cache.spread_selectors.upsert(self.cluster.selector_owners[-1])
        return stored

    def delete_pod(self, uid: str) -> None:
        stored = self.cluster.pods.pop(uid, None)
        if stored is not None:
            self.scheduler.on_pod(PodInfo.from_dict(stored), deleted=True)

    async def run(self, settle: float = 0.0) -> dict[str, Outcome]:
        """Schedule until idle; every pending pod gets an outcome, held ones included."""
        await self.scheduler.run_until_idle(settle)
        for uid, outcome in self.reporter.outcomes.items():
            outcome.top = self.last_scores.get(uid, [])
        for uid, stored in self.cluster.pods.items():
            if (stored.get("spec") or {}).get("nodeName"):
                continue
            known = self.reporter.outcomes.get(uid)
            if known is None or known.attempts == 0:  # still never tried: why now, not why then
                self.reporter.outcomes[uid] = self._never_tried(uid, stored)
        return self.reporter.outcomes

    def _record_top(self, pod: PodInfo, placement: Placement) -> None:
        if placement.scores is not None and placement.row is not None:
            self.last_scores[pod.uid] = top_scores(
                self.scheduler.cache.table, placement.scores, placement.row
            )

    def _never_tried(self, uid: str, stored: Mapping[str, Any]) -> Outcome:
        """Why a pending pod never reached a scheduling cycle."""
        meta = stored.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        scheduler_name = (stored.get("spec") or {}).get("schedulerName") or "default-scheduler"
        qpi = self.scheduler.queue.get(uid)
        if scheduler_name not in self.scheduler.profiles:
            message = f"not for shoal: schedulerName {scheduler_name!r} has no profile here"
        elif qpi is not None and qpi.gate is not None:
            plugin = f" ({qpi.gate.plugin})" if qpi.gate.plugin else ""
            message = f"held before the queue{plugin}: {qpi.gate.message}"
        else:
            message = "not attempted"
        return Outcome(key, None, message, 0)

    def run_sync(self) -> dict[str, Outcome]:
        return asyncio.run(self.run())

    def placements(self) -> dict[str, str | None]:
        """pod key -> node name (None: pending) for every pod in the cluster."""
        out: dict[str, str | None] = {}
        for pod in self.cluster.pods.values():
            meta = pod["metadata"]
            out[f"{meta['namespace']}/{meta['name']}"] = (pod.get("spec") or {}).get("nodeName")
        return out


def top_scores(
    table: NodeTable, scores: ScoreOutcome, chosen: int, top: int = 3
) -> list[tuple[str, int, dict[str, int]]]:
    """The chosen node first, then the other best-scoring ones (for the ``shoal simulate`` table)."""
    order = [int(i) for i in np.argsort(-scores.total, kind="stable")]
    first = int(np.flatnonzero(scores.rows == chosen)[0])
    order = [first, *(i for i in order if i != first)][:top]
    return [
        (
            table.name(int(scores.rows[i])),
            int(scores.total[i]),
            {p: int(v[i]) for p, v in scores.by_plugin.items()},
        )
        for i in order
    ]


def _deepcopy(obj: Mapping[str, Any]) -> JSON:
    out: JSON = _copy(obj)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def format_table(outcomes: Iterable[Outcome], *, show_scores: bool = True) -> str:
    """The ``shoal simulate`` table: pod → node, best nodes' per-plugin scores, or why not; then
    where each placed gang went (its topology domain and worst pairwise network cost)."""
    outcomes = list(outcomes)
    rows = [("POD", "NODE", "DETAILS")]
    for out in sorted(outcomes, key=lambda o: o.pod):
        if out.node is not None:
            details = ""
            if show_scores and out.top:
                parts = []
                for name, total, by_plugin in out.top:
                    plugins = " ".join(f"{p}={v}" for p, v in by_plugin.items())
                    parts.append(f"{name}:{total} [{plugins}]")
                details = "; ".join(parts)
            note = out.message.find(" (ignored: ")
            if note >= 0:  # a malformed annotation the placement ignored: say so here too
                details = f"{details} {out.message[note + 1 :]}".strip()
            rows.append((out.pod, out.node, details))
        else:
            rows.append((out.pod, "<pending>", out.message))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    table = "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip() for r in rows)
    gangs = sorted({o.note for o in outcomes if o.node is not None and o.note})
    return table + "".join(f"\n{n}" for n in (["", "gangs:"] + [f"  {g}" for g in gangs] if gangs else []))
