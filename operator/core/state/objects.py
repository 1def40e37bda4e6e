"""Typed, parsed views of Pods, Nodes and PodGroups, built once from API dicts.

Why: plugins run for every pod against thousands of nodes; parsing quantities, tolerations and
affinity once, when the object arrives, keeps the cycle to array arithmetic. A malformed field
never raises out of here: it is recorded (``PodInfo.problems``) and reported by the plugin that
cares, so one bad object cannot crash a cycle.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from shoal.core.state import grouplinks
from shoal.core.state.declaredfeatures import declared_features, required_features
from shoal.core.state.fidelity import FieldUse, annotation, fields_used
from shoal.core.state.grouplinks import pod_group_link
from shoal.core.state.images import node_images, pod_images
from shoal.core.state.nodeselectors import SelectorTerm, parse_term
from shoal.core.state.podclaims import PodClaim, pod_claims
from shoal.core.state.podrequests import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    ContainerRequests,
    as_mapping,
    container_requests,
    pod_host_ports,
    pod_requests,
)
from shoal.core.state.podvolumes import PodVolume, pod_volumes
from shoal.core.state.quantity import QuantityError, to_int
from shoal.core.state.selectors import (
    NO_AFFINITY,
    PodAffinity,
    SelectorError,
    SpreadConstraint,
    parse_equality_selector,
    parse_pod_affinity,
    parse_spread_constraints,
)
from shoal.core.state.spreadselectors import controller_ref

JSON = Mapping[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_ANNOTATION = "shoal.dev/gpu-memory-gb"
#: the gang APIs and how a pod names its PodGroup: ``shoal.core.state.grouplinks`` (kept here for importers)
POD_GROUP_LABEL, PLUGINS_GROUP_API = grouplinks.POD_GROUP_LABEL, grouplinks.PLUGINS_GROUP_API
NATIVE_GROUP_API, VOLCANO_GROUP_API = grouplinks.NATIVE_GROUP_API, grouplinks.VOLCANO_GROUP_API
#: the pods a pod talks to, as ``key=value,key2=value2`` (NetworkLatency places it close to them)
TALKS_TO_ANNOTATION = "shoal.dev/talks-to"


def pod_group_key(namespace: str, name: str, api: str = PLUGINS_GROUP_API) -> str:
    """How a PodGroup is keyed (cache, queue, gates, status writer) and named in messages.

    ``namespace/name`` for scheduler-plugins' PodGroups (as it always was),
    ``namespace/name@scheduling.k8s.io`` for native ones and ``...@scheduling.volcano.sh`` for
    Volcano's: a PodGroup ``train`` of each API in one namespace are three gangs, and ``@`` is in
    no object name, so the keys never collide.
    """
    return f"{namespace}/{name}" if api == PLUGINS_GROUP_API else f"{namespace}/{name}@{api}"


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER = "PreemptLowerPriority", "Never"
#: the reason of the ``DisruptionTarget`` condition the scheduler puts on the pods it preempts
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def parse_time(value: str | None) -> float:
    """RFC 3339 timestamp → seconds since the epoch (0.0 when absent or malformed)."""
    if not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


#: a GB figure is a plain decimal number: ``1e9``, ``1_000``, ``inf`` or ``0x10`` parse as floats
#: in Python but are no one's GPU budget (a ``1e9`` node would pull every GPU-memory pod to itself)
_DECIMAL = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)")


def parse_gpu_memory(value: str | None) -> tuple[float | None, str | None]:
    """A GB figure from a label or annotation: (value, None), (None, None) if absent, (None, why)."""
    if value is None:
        return None, None
    text = value.strip()
    if not _DECIMAL.fullmatch(text):
        if text.startswith("-") and _DECIMAL.fullmatch(text[1:]):
            return None, f"{value!r} is not a non-negative number of GB"
        return None, f"{value!r} is not a plain decimal number of GB"
    number = float(text)
    if not math.isfinite(number):
        return None, f"{value!r} is not a plain decimal number of GB"
    return number, None


# -- tolerations and taints ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint`` of k8s.io/api 1.37, with its default feature gates.

        An empty effect matches every effect and an empty key every key; ``Equal`` (or no
        operator) compares values, ``Exists`` matches any value. ``Lt``/``Gt`` belong to the alpha
        gate ``TaintTolerationComparisonOperators`` (off by default in 1.37), so, like any other
        operator, they tolerate nothing: an unknown operator is never read as ``Equal``.
        """
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


# -- pods -----------------------------------------------------------------------------------------
@dataclass(slots=True)
class PodInfo:
    """A pod as the scheduler sees it. ``requests`` are in shoal's integer units (cpu: millicores)."""

    uid: str
    namespace: str
    name: str
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    phase: str = "Pending"
    priority: int = 0
    created: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    nonzero_memory: int = DEFAULT_MEMORY_REQUEST
    host_ports: tuple[tuple[str, str, int], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[SelectorTerm, ...] | None = None  # None: no required node affinity
    preferred_terms: tuple[tuple[int, SelectorTerm], ...] = ()
    #: the PodGroup's name: ``spec.schedulingGroup.podGroupName`` (native) or the pod-group label
    pod_group: str | None = None
    #: which API ``pod_group`` names a PodGroup of (``PLUGINS_GROUP_API``, native or Volcano)
    pod_group_api: str = PLUGINS_GROUP_API
    gpu_memory_gb: float | None = None
    terminating: bool = False
    resource_version: str = ""
    problems: dict[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()
    #: pod affinity / anti-affinity terms (InterPodAffinity); an invalid term: ``pod_affinity_error``
    pod_affinity: PodAffinity = NO_AFFINITY
    pod_affinity_error: str = ""
    #: ``spec.topologySpreadConstraints`` (PodTopologySpread); an invalid one: ``spread_error``
    topology_spread: tuple[SpreadConstraint, ...] = ()
    spread_error: str = ""
    #: the images the pod pulls, normalised (ImageLocality)
    images: tuple[str, ...] = ()
    #: ``(kind, name)`` of the pod's ReplicaSet, StatefulSet or ReplicationController controller
    #: (whose selector default topology spreading uses: core/state/spreadselectors.py); None otherwise
    controller: tuple[str, str] | None = None
    #: claims, generic ephemeral volumes and in-tree disks (the volume plugins)
    volumes: tuple[PodVolume, ...] = ()
    #: ``spec.resourceClaims`` with their generated claims' names (DynamicResources)
    resource_claims: tuple[PodClaim, ...] = ()
    #: per container, its requests, when one asks for a domain-prefixed resource (DynamicResources
    #: allocates those a DeviceClass backs per container)
    containers: tuple[ContainerRequests, ...] = ()
    #: scheduling-relevant fields this pod sets that only some plugin evaluates (core/state/fidelity.py)
    fields_used: tuple[FieldUse, ...] = ()
    #: preemption (DefaultPreemption): ``spec.preemptionPolicy``, ``status.nominatedNodeName``,
    #: ``status.startTime`` (None: not started), and whether the scheduler is evicting it
    #: (a ``DisruptionTarget`` condition with reason ``PreemptionByScheduler``)
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    nominated_node: str = ""
    start_time: float | None = None
    preempted: bool = False
    required_features: frozenset[str] = frozenset()  # a node must declare them (NodeDeclaredFeatures)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_key(self) -> str | None:
        return pod_group_key(self.namespace, self.pod_group, self.pod_group_api) if self.pod_group else None

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @classmethod
    def from_dict(cls, obj: JSON) -> PodInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = as_mapping(obj.get("status"))
        problems: dict[str, str] = {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        requests, nonzero_cpu, nonzero_mem = pod_requests(spec, problems, status)
        required_terms, preferred = _node_affinity(spec)
        gpu_mem, why = parse_gpu_memory(annotations.get(GPU_MEMORY_ANNOTATION))
        if why:
            problems[GPU_MEMORY_ANNOTATION] = f"annotation {GPU_MEMORY_ANNOTATION}: {why}"
        namespace = str(meta.get("namespace") or "default")
        pod_affinity, affinity_error = _pod_affinity(spec, namespace)
        spread, spread_error = _spread(spec, labels)
        # the native link wins (kube-scheduler reads only it), then the label, then Volcano's annotation
        group, group_api, link = pod_group_link(spec, labels, annotations)
        used = fields_used(spec, annotations) + _metadata_fields(link, annotations, problems)
        if gpu_mem is not None or why:
            used += (FieldUse(annotation(GPU_MEMORY_ANNOTATION), annotation(GPU_MEMORY_ANNOTATION)),)
        return cls(
            uid=str(meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"),
            namespace=namespace,
            name=str(meta.get("name") or ""),
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or "Pending"),
            priority=int(spec["priority"]) if isinstance(spec.get("priority"), int) else 0,
            created=parse_time(meta.get("creationTimestamp")),
            labels=labels,
            annotations=annotations,
            requests=requests,
            nonzero_cpu=nonzero_cpu,
            nonzero_memory=nonzero_mem,
            host_ports=pod_host_ports(spec),
            tolerations=_tolerations(spec),
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required_terms=required_terms,
            preferred_terms=preferred,
            pod_group=group,
            pod_group_api=group_api,
            gpu_memory_gb=gpu_mem,
            terminating=bool(meta.get("deletionTimestamp")),
            resource_version=str(meta.get("resourceVersion") or ""),
            problems=problems,
            scheduling_gates=tuple(
                str(g.get("name") or "") for g in spec.get("schedulingGates") or () if isinstance(g, Mapping)
            ),
            fields_used=used,
            pod_affinity=pod_affinity,
            pod_affinity_error=affinity_error,
            topology_spread=spread,
            spread_error=spread_error,
            images=pod_images(spec),
            controller=controller_ref(meta),
            volumes=pod_volumes(str(meta.get("name") or ""), spec),
            resource_claims=pod_claims(spec, status),
            containers=container_requests(spec),
            required_features=required_features(spec),
            preemption_policy=str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
            nominated_node=str(status.get("nominatedNodeName") or ""),
            start_time=parse_time(status["startTime"]) if status.get("startTime") else None,
            preempted=_preempted(status),
        )


def _metadata_fields(
    group_link: str | None, annotations: Mapping[str, str], problems: dict[str, str]
) -> tuple[FieldUse, ...]:
    """The placement requests a pod makes in its metadata (the gang label or annotation that links
    it, unless ``spec.schedulingGroup`` does; a talks-to annotation); a malformed talks-to is
    recorded in ``problems`` (ignored, said in the pod's events)."""
    used: tuple[FieldUse, ...] = ()
    if group_link:
        used += (FieldUse(group_link, group_link),)
    if annotations.get(TALKS_TO_ANNOTATION):
        used += (FieldUse(annotation(TALKS_TO_ANNOTATION), annotation(TALKS_TO_ANNOTATION)),)
        try:
            parse_equality_selector(annotations[TALKS_TO_ANNOTATION])
        except SelectorError as exc:
            problems[TALKS_TO_ANNOTATION] = f"annotation {TALKS_TO_ANNOTATION}: {exc}"
    return used


def _preempted(status: JSON) -> bool:
    """Evicted by a scheduler's preemption: a ``DisruptionTarget`` condition it set."""
    return any(
        isinstance(c, Mapping)
        and c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == PREEMPTION_BY_SCHEDULER
        for c in status.get("conditions") or ()
    )


def _node_affinity(
    spec: JSON,
) -> tuple[tuple[SelectorTerm, ...] | None, tuple[tuple[int, SelectorTerm], ...]]:
    """(required terms, None when there is no required node affinity; weighted preferred terms)."""
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_terms = (
        tuple(parse_term(t) for t in required.get("nodeSelectorTerms") or ()) if required else None
    )
    preferred = tuple(
        (int(p.get("weight", 0)), parse_term(p.get("preference")))
        for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    )
    return required_terms, preferred


def _tolerations(spec: JSON) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=str(t.get("key") or ""),
            operator=str(t.get("operator") or "Equal"),
            value=str(t.get("value") or ""),
            effect=str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or ()
    )


def _spread(spec: JSON, labels: Mapping[str, str]) -> tuple[tuple[SpreadConstraint, ...], str]:
    try:
        return parse_spread_constraints(spec.get("topologySpreadConstraints"), labels), ""
    except (SelectorError, TypeError, ValueError) as exc:
        return (), f"spec.topologySpreadConstraints: {exc}"


def _pod_affinity(spec: JSON, namespace: str) -> tuple[PodAffinity, str]:
    try:
        return parse_pod_affinity(spec.get("affinity"), namespace), ""
    except (SelectorError, TypeError, ValueError) as exc:
        return NO_AFFINITY, f"spec.affinity: {exc}"


# -- nodes and pod groups -------------------------------------------------------------------------
@dataclass(slots=True)
class NodeSpec:
    """The scheduling-relevant part of a Node."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    taints: tuple[Taint, ...]
    unschedulable: bool
    problems: dict[str, str] = field(default_factory=dict)
    #: ``status.images``: every name of an image the node holds -> its size in bytes
    images: dict[str, int] = field(default_factory=dict)
    declared_features: frozenset[str] = frozenset()  # ``status.declaredFeatures`` (NodeDeclaredFeatures)

    @classmethod
    def from_dict(cls, obj: JSON) -> NodeSpec:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        problems: dict[str, str] = {}
        allocatable: dict[str, int] = {}
        for name, value in (status.get("allocatable") or status.get("capacity") or {}).items():
            try:
                allocatable[str(name)] = to_int(str(name), value)
            except QuantityError as exc:
                problems[f"allocatable.{name}"] = str(exc)
        taints = tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in spec.get("taints") or ()
        )
        return cls(
            name=str(meta.get("name") or ""),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            allocatable=allocatable,
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            problems=problems,
            images=node_images(status.get("images")),
            declared_features=declared_features(status.get("declaredFeatures")),
        )


#: PodInfo fields read from a pod's status or bookkeeping metadata: an update that changes only
#: these does not make an unschedulable pod worth another attempt (kube-scheduler's isPodUpdated
#: strips the status likewise); its own nominatedNodeName patch must not requeue a preemptor
STATUS_FIELDS = ("phase", "resource_version", "nominated_node", "start_time", "preempted")


def status_only_update(old: PodInfo, new: PodInfo) -> bool:
    """Do ``old`` and ``new`` differ only in :data:`STATUS_FIELDS`?"""
    return replace(old, **{f: getattr(new, f) for f in STATUS_FIELDS}) == new


TOPOLOGY_REQUIRED_ANNOTATION = "shoal.dev/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "shoal.dev/topology-preferred"


def topology_annotations(annotations: JSON) -> tuple[str | None, tuple[str, ...]]:
    """A PodGroup's topology constraint from its ``shoal.dev/topology-*`` annotations: (the
    required level, the preferred ones: a comma-separated list, tightest level first)."""
    required = str(annotations.get(TOPOLOGY_REQUIRED_ANNOTATION) or "").strip() or None
    preferred = str(annotations.get(TOPOLOGY_PREFERRED_ANNOTATION) or "")
    return required, tuple(k.strip() for k in preferred.split(",") if k.strip())


@dataclass(slots=True)
class PodGroupInfo:
    """A PodGroup of either API: ``min_member`` pods are placed together or not at all.

    scheduler-plugins' ``PodGroup`` (:meth:`from_dict`) and Kubernetes' native one
    (``shoal.core.state.workloads.native_pod_group``) map to this one model; ``api`` tells them apart
    (and is part of ``key``). A native ``basic`` PodGroup is not a gang (``gang`` False): its pods
    wait until it exists, then each is scheduled alone.
    """

    namespace: str
    name: str
    min_member: int = 1
    schedule_timeout_seconds: int | None = None
    min_resources: dict[str, int] = field(default_factory=dict)
    created: float = 0.0
    uid: str = ""
    generation: int = 0
    #: a node label key every member must share one value of (the gang fails rather than spread)
    topology_required: str | None = None
    #: node label keys from tightest to loosest: the gang goes in one domain of the first that holds it
    topology_preferred: tuple[str, ...] = ()
    #: the API it comes from: scheduler-plugins' ``scheduling.x-k8s.io`` or native ``scheduling.k8s.io``
    api: str = PLUGINS_GROUP_API
    #: all-or-nothing (scheduler-plugins' PodGroups, native ``gang``); False: native ``basic``
    gang: bool = True
    #: a native PodGroup's ``spec.workloadRef``: ``workload/template`` ("" when none)
    workload: str = ""
    #: fields of the PodGroup that change placement and that shoal does not evaluate (its members
    #: are refused, naming them: ``shoal.core.state.volcano``)
    unevaluated: tuple[str, ...] = ()
    #: a Volcano PodGroup's ``spec.minTaskMember``: task name -> the members of it the quorum needs
    task_quorums: dict[str, int] = field(default_factory=dict)
    #: a native PodGroup's ``spec.resourceClaims`` (DRAWorkloadResourceClaims): claims its members
    #: share, reserved for the PodGroup rather than for each pod
    resource_claims: tuple[PodClaim, ...] = ()
    #: a native PodGroup's ``spec.priority`` (set by admission from its ``priorityClassName``; 0
    #: when neither): kube-scheduler refuses a gang whose members' priority is another; None for
    #: the other APIs, which have no priority of their own
    priority: int | None = None
    #: a native PodGroup's ``spec.parentCompositePodGroupName`` (1.38): the CompositePodGroup it is
    #: placed with, all-or-nothing with its siblings (``shoal.core.state.hierarchy``); None when none
    parent: str | None = None

    @property
    def key(self) -> str:
        return pod_group_key(self.namespace, self.name, self.api)

    @property
    def min_field(self) -> str:
        """The field ``min_member`` comes from, as the user wrote it (for messages)."""
        return "minCount" if self.api == NATIVE_GROUP_API else "minMember"

    @property
    def topology_levels(self) -> tuple[str, ...]:
        """The keys to try, tightest first; a required key is the only (and last) level."""
        if self.topology_required:
            levels = tuple(k for k in self.topology_preferred if k != self.topology_required)
            return (*levels, self.topology_required)
        return self.topology_preferred

    @classmethod
    def from_dict(cls, obj: JSON) -> PodGroupInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        min_resources: dict[str, int] = {}
        for k, v in (spec.get("minResources") or {}).items():
            try:
                min_resources[str(k)] = to_int(str(k), v)
            except QuantityError:
                continue
        timeout = spec.get("scheduleTimeoutSeconds")
        try:
            min_member = max(int(spec.get("minMember") or 1), 1)
        except (TypeError, ValueError):
            min_member = 1
        required, preferred = topology_annotations(meta.get("annotations") or {})
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            min_member=min_member,
            schedule_timeout_seconds=int(timeout) if isinstance(timeout, int) and timeout > 0 else None,
            min_resources=min_resources,
            created=parse_time(meta.get("creationTimestamp")),
            uid=str(meta.get("uid") or ""),
            generation=int(meta.get("generation") or 0),
            topology_required=required,
            topology_preferred=preferred,
        )
