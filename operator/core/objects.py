"""Typed, parsed views of Pods, Nodes and PodGroups, built once from API dicts.

Why: plugins run for every pod against thousands of nodes; parsing quantities, tolerations and
affinity once, when the object arrives, keeps the cycle to array arithmetic. A malformed field
never raises out of here: it is recorded (``PodInfo.problems``) and reported by the plugin that
cares, so one bad object cannot crash a cycle.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shoal.core.fidelity import fields_used
from shoal.core.images import node_images, normalized_image, pod_images  # noqa: F401  (re-exported)
from shoal.core.quantity import QuantityError, to_int
from shoal.core.selectors import (
    NO_AFFINITY,
    PodAffinity,
    SelectorError,
    SpreadConstraint,
    parse_pod_affinity,
    parse_spread_constraints,
)

JSON = Mapping[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_ANNOTATION = "shoal.dev/gpu-memory-gb"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: kube-scheduler scores pods without requests as if they asked for this much (non-zero requests).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


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


# -- node affinity --------------------------------------------------------------------------------
_LABEL_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_INT64 = re.compile(r"[+-]?[0-9]+")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def parse_int64(text: str) -> int | None:
    """A label or selector value as Go's ``strconv.ParseInt(s, 10, 64)`` reads it (None: not one)."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def label_key_error(key: str) -> str:
    """Why ``key`` is not a label key (apimachinery's ``IsLabelKey``); "" if it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"{key!r}: a label key is a name with an optional DNS subdomain prefix and '/'"
    name = parts[-1]
    if len(parts) == 2 and not (0 < len(parts[0]) <= 253 and _DNS_SUBDOMAIN.fullmatch(parts[0])):
        return f"{key!r}: prefix part must be a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return (
            f"{key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start"
            " and end with an alphanumeric character (at most 63)"
        )
    return ""


def label_value_error(value: str) -> str:
    """Why ``value`` is not a label value (``IsValidLabelValue``); "" if it is one."""
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        return (
            f"{value!r}: a label value must be empty or consist of alphanumeric characters, '-', '_' or"
            " '.', and must start and end with an alphanumeric character (at most 63)"
        )
    return ""


def requirement_error(key: str, operator: str, values: Sequence[str], *, field: bool = False) -> str:
    """Why kube-scheduler cannot parse this node selector requirement ("" if it can).

    ``labels.NewRequirement`` for matchExpressions; for matchFields only ``In``/``NotIn`` with
    exactly one value. A term holding such a requirement matches no node.
    """
    if field:
        if operator not in ("In", "NotIn"):
            return f"matchFields operator {operator!r} is not supported (In, NotIn)"
        return "" if len(values) == 1 else f"matchFields {operator} must have exactly one value"
    why = [label_key_error(key)]
    if operator in ("In", "NotIn"):
        if not values:
            why.append(f"{key}: values can't be empty for {operator}")
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            why.append(f"{key}: values must be empty for {operator}")
    elif operator in ("Gt", "Lt"):
        if len(values) != 1 or parse_int64(values[0]) is None:
            why.append(f"{key}: {operator} needs exactly one integer value")
    else:
        why.append(f"{key}: operator {operator!r} is not supported ({', '.join(LABEL_OPERATORS)})")
    why.extend(label_value_error(v) for v in values)
    return "; ".join(w for w in why if w)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In NotIn Exists DoesNotExist Gt Lt
    values: tuple[str, ...] = ()
    #: why kube-scheduler could not parse it ("" if it can); a term holding it matches nothing
    error: str = field(default="", compare=False)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.error:
            return False
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            have, want = parse_int64(labels[self.key]), parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A NodeSelectorTerm: all requirements must hold (an empty term matches nothing)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # matchFields: only metadata.name is defined

    @property
    def empty(self) -> bool:
        return not self.expressions and not self.fields

    @property
    def error(self) -> str:
        """The first requirement kube-scheduler cannot parse ("" if none): the term matches nothing."""
        return next((r.error for r in (*self.expressions, *self.fields) if r.error), "")

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.empty or self.error:
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        # a field selector reads a field the node does not have as "" (only metadata.name exists)
        return all(r.matches({r.key: name if r.key == "metadata.name" else ""}) for r in self.fields)


def _parse_requirements(items: Any, *, fields: bool = False) -> tuple[Requirement, ...]:
    out = []
    for item in items or ():
        key = str(item.get("key", ""))
        operator = str(item.get("operator", ""))
        values = tuple(str(v) for v in item.get("values") or ())
        error = requirement_error(key, operator, values, field=fields)
        out.append(Requirement(key=key, operator=operator, values=values, error=error))
    return tuple(out)


def _parse_term(term: Any) -> SelectorTerm:
    term = term or {}
    return SelectorTerm(
        _parse_requirements(term.get("matchExpressions")),
        _parse_requirements(term.get("matchFields"), fields=True),
    )


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
    pod_group: str | None = None
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
    #: scheduling-relevant fields this pod sets that only some plugin evaluates (core/fidelity.py)
    fields_used: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_key(self) -> str | None:
        return f"{self.namespace}/{self.pod_group}" if self.pod_group else None

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
        status = obj.get("status") or {}
        problems: dict[str, str] = {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        requests, nonzero_cpu, nonzero_mem = _pod_requests(spec, problems)
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity")) or {}
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        required_terms = (
            tuple(_parse_term(t) for t in required.get("nodeSelectorTerms") or ()) if required else None
        )
        preferred = tuple(
            (int(p.get("weight", 0)), _parse_term(p.get("preference")))
            for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        tolerations = tuple(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in spec.get("tolerations") or ()
        )
        gpu_mem, why = parse_gpu_memory(annotations.get(GPU_MEMORY_ANNOTATION))
        if why:
            problems[GPU_MEMORY_ANNOTATION] = f"annotation {GPU_MEMORY_ANNOTATION}: {why}"
        priority = spec.get("priority")
        namespace = str(meta.get("namespace") or "default")
        pod_affinity, affinity_error = _pod_affinity(spec, namespace)
        try:
            spread, spread_error = parse_spread_constraints(spec.get("topologySpreadConstraints"), labels), ""
        except (SelectorError, TypeError, ValueError) as exc:
            spread, spread_error = (), f"spec.topologySpreadConstraints: {exc}"
        used = fields_used(spec)
        if gpu_mem is not None or why:
            used += (f"metadata.annotations[{GPU_MEMORY_ANNOTATION}]",)
        if labels.get(POD_GROUP_LABEL):
            used += (f"metadata.labels[{POD_GROUP_LABEL}]",)
        return cls(
            uid=str(meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"),
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or "Pending"),
            priority=int(priority) if isinstance(priority, int) else 0,
            created=parse_time(meta.get("creationTimestamp")),
            labels=labels,
            annotations=annotations,
            requests=requests,
            nonzero_cpu=nonzero_cpu,
            nonzero_memory=nonzero_mem,
            host_ports=pod_host_ports(spec),
            tolerations=tolerations,
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required_terms=required_terms,
            preferred_terms=preferred,
            pod_group=labels.get(POD_GROUP_LABEL) or None,
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
        )


def _pod_affinity(spec: JSON, namespace: str) -> tuple[PodAffinity, str]:
    try:
        return parse_pod_affinity(spec.get("affinity"), namespace), ""
    except (SelectorError, TypeError, ValueError) as exc:
        return NO_AFFINITY, f"spec.affinity: {exc}"


def _container_requests(container: JSON, problems: dict[str, str]) -> dict[str, int]:
    """A container's requests as the API server stores them, explicit zeros kept.

    A key that is present is the container's own answer, even ``"0"``: kube-scheduler's non-zero
    defaults apply only where the key is absent (``NonMissingContainerRequests``).
    """
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    # As the API server defaults: a limit without a request is the request.
    for name, value in (resources.get("limits") or {}).items():
        requests.setdefault(name, value)
    out: dict[str, int] = {}
    for name, value in requests.items():
        try:
            amount = to_int(str(name), value)
        except QuantityError as exc:
            problems[f"requests.{name}"] = str(exc)
            continue
        if amount >= 0:
            out[str(name)] = amount
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v > into.get(k, 0):
            into[k] = v


#: kube-scheduler's defaults for a container that leaves cpu or memory out (scoring only)
NON_MISSING_DEFAULTS: Mapping[str, int] = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}


def aggregate_requests(
    containers: Sequence[Mapping[str, int]],
    init_containers: Sequence[tuple[Mapping[str, int], bool]],
    overhead: Mapping[str, int],
    defaults: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """A pod's requests as kube-scheduler's ``PodRequests`` adds them up.

    App containers and sidecars (restartable init containers) run together and are summed; a plain
    init container runs alone beside the sidecars started before it, so the pod needs the larger of
    the two; overhead comes on top. ``defaults`` fill a key a container leaves out, per container
    (init containers included), never one it sets, even to zero.
    """

    def own(req: Mapping[str, int]) -> Mapping[str, int]:
        if not defaults:
            return req
        out = dict(req)
        for k, v in defaults.items():
            out.setdefault(k, v)
        return out

    total: dict[str, int] = {}
    for req in containers:
        _add(total, own(req))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for req, restartable in init_containers:
        mine = own(req)
        if restartable:
            _add(total, mine)
            _add(sidecars, mine)
            _max(init_peak, sidecars)
        else:
            alone = dict(sidecars)
            _add(alone, mine)
            _max(init_peak, alone)
    _max(total, init_peak)
    _add(total, overhead)
    return total


def _pod_requests(spec: JSON, problems: dict[str, str]) -> tuple[dict[str, int], int, int]:
    """Effective requests as kube-scheduler computes them (containers, sidecars, init, overhead).

    Returns (requests without zeros, non-zero cpu, non-zero memory). The non-zero
    figures are what scoring and the node table's ``nonzero_requested`` count: the same sum with
    kube-scheduler's defaults for a container that leaves cpu or memory out.
    """
    containers = [_container_requests(c, problems) for c in spec.get("containers") or ()]
    init: list[tuple[dict[str, int], bool]] = []
    for c in spec.get("initContainers") or ():
        # a sidecar (restartPolicy: Always) runs beside the app containers
        init.append((_container_requests(c, problems), c.get("restartPolicy") == "Always"))
    overhead: dict[str, int] = {}
    for k, v in (spec.get("overhead") or {}).items():
        try:
            overhead[str(k)] = to_int(str(k), v)
        except QuantityError as exc:
            problems[f"overhead.{k}"] = str(exc)
    total = aggregate_requests(containers, init, overhead)
    nonzero = aggregate_requests(containers, init, overhead, NON_MISSING_DEFAULTS)
    return (
        {k: v for k, v in total.items() if v > 0},
        nonzero.get("cpu", 0),
        nonzero.get("memory", 0),
    )


def pod_host_ports(spec: JSON) -> tuple[tuple[str, str, int], ...]:
    """The host ports a pod holds on its node: ``(protocol, hostIP, hostPort)``.

    As kube-scheduler's ``util.GetHostPorts``: sidecars (init containers with
    ``restartPolicy: Always``, which run for the pod's whole life) first, then the app containers;
    plain init containers hold no port. ``hostPort`` ≤ 0 (or absent) binds nothing; an empty protocol
    is TCP and an empty host IP is ``0.0.0.0``. The same list is what a pod asks for and what it
    holds once placed (``NodeTable.account``).
    """
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or ())
    ports: list[tuple[str, str, int]] = []
    for c in containers:
        for p in c.get("ports") or ():
            try:
                host_port = int(p.get("hostPort") or 0)
            except (TypeError, ValueError):
                continue
            if host_port > 0:
                ports.append((str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), host_port))
    return tuple(ports)


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
        )


@dataclass(slots=True)
class PodGroupInfo:
    """A scheduler-plugins PodGroup: ``minMember`` pods are placed together or not at all."""

    namespace: str
    name: str
    min_member: int = 1
    schedule_timeout_seconds: int | None = None
    min_resources: dict[str, int] = field(default_factory=dict)
    created: float = 0.0
    uid: str = ""
    generation: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

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
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            min_member=min_member,
            schedule_timeout_seconds=int(timeout) if isinstance(timeout, int) and timeout > 0 else None,
            min_resources=min_resources,
            created=parse_time(meta.get("creationTimestamp")),
            uid=str(meta.get("uid") or ""),
            generation=int(meta.get("generation") or 0),
        )


def format_taints(taints: Sequence[Taint]) -> str:
    return ", ".join(str(t) for t in taints)
