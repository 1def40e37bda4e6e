"""NodeResourcesFit (PreFilter, Filter, PreScore, Score): requests against allocatable, and how full to pack.

Filter: a node fits when, for every resource the pod requests (``nvidia.com/gpu`` and any other
extended resource included), allocatable minus what its pods already request covers the request,
and it has room for one more pod. Reasons, in kube-scheduler's words: ``Too many pods``,
``Insufficient <resource>``. A request larger than the node's whole allocatable is
``UnschedulableAndUnresolvable`` for that node (freeing the node would not help); a plain shortage
is ``Unschedulable``. ``ignoredResources`` / ``ignoredResourceGroups`` apply to extended resources
only, as upstream.

An extended resource that a node does not offer in its allocatable (absent, or 0) but a DeviceClass
provides (``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class>``)
is, as for kube-scheduler 1.37, DynamicResources' to allocate on that node (a claim it makes for the
pod: plugins/dynamicresources/extended.py): this Filter leaves it out there. A profile without
DynamicResources (at filter, reserve and preBind) refuses such a node instead, naming the class
(unresolvable), where kube-scheduler would leave it to a plugin that is not there.

Score strategies (kube-scheduler's formulas):

* ``LeastAllocated`` — prefer emptier nodes (spreads);
* ``MostAllocated`` — prefer fuller nodes (packs; with ``nvidia.com/gpu`` weighted high, keeps
  whole 8-GPU nodes free for 8-GPU pods);
* ``BalancedAllocation`` — prefer nodes whose resource fractions the pod evens out (1.37 scores
  the change in balance the pod makes, 75 for none). This is kube-scheduler's separate
  ``NodeResourcesBalancedAllocation`` plugin, offered here as a strategy.

Least/MostAllocated count cpu and memory with kube-scheduler's non-zero defaults (100m, 200Mi) for
a container that leaves the key out (an explicit ``"0"`` stays 0); BalancedAllocation counts
requests as they are, and is skipped (PreScore Skip) for a pod that requests none of its resources,
as upstream. An extended resource the pod does not request is left out of the score, and ``pods``
is never scored, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from shoal.core.framework.contract import Contract
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    MAX_NODE_SCORE,
    BoolArray,
    ClusterEvent,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.framework.runtime import Framework
from shoal.core.framework.scoring import ShapePoint, broken_linear, check_increasing, shape_points
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import CPU, MEMORY, PODS, NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status
from shoal.plugins.dynamicresources.extended import is_dra_extended
from shoal.plugins.dynamicresources.objects import DeviceClassInfo
from shoal.plugins.dynamicresources.plugin import NAME as DRA
from shoal.plugins.dynamicresources.store import IMPLICIT_EXTENDED_PREFIX, DraStore

NAME = "NodeResourcesFit"
STATE_KEY = f"PreFilter{NAME}"
TOO_MANY_PODS = "Too many pods"

Strategy = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio", "BalancedAllocation"]


class RequestedToCapacityRatioArgs(ArgsModel):
    shape: list[ShapePoint] = Field(min_length=1, max_length=101)

    @field_validator("shape")
    @classmethod
    def _increasing(cls, value: list[ShapePoint]) -> list[ShapePoint]:
        check_increasing(value)
        return value


class ResourceWeight(ArgsModel):
    name: str = Field(min_length=1, max_length=253)
    #: 0 (or absent) reads as 1, as kube-scheduler's v1 defaulting has it
    weight: int = Field(default=1, ge=0, le=100)

    @field_validator("weight")
    @classmethod
    def _zero_is_one(cls, value: int) -> int:
        return value or 1


def _default_resources() -> list[ResourceWeight]:
    return [ResourceWeight(name="cpu", weight=1), ResourceWeight(name="memory", weight=1)]


class ScoringStrategy(ArgsModel):
    type: Strategy = "LeastAllocated"
    #: an empty list reads as cpu and memory at weight 1, as kube-scheduler's v1 defaulting has it
    resources: list[ResourceWeight] = Field(default_factory=_default_resources, max_length=32)
    requested_to_capacity_ratio: RequestedToCapacityRatioArgs | None = None

    @model_validator(mode="after")
    def _shape_for_ratio(self) -> ScoringStrategy:
        if self.type == "RequestedToCapacityRatio" and self.requested_to_capacity_ratio is None:
            raise ValueError("type RequestedToCapacityRatio needs requestedToCapacityRatio.shape")
        if self.type != "RequestedToCapacityRatio" and self.requested_to_capacity_ratio is not None:
            raise ValueError(f"requestedToCapacityRatio must be left out when type is {self.type}")
        return self

    @field_validator("resources")
    @classmethod
    def _unique(cls, value: list[ResourceWeight]) -> list[ResourceWeight]:
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError("resource names must be unique")
        return value or _default_resources()


class Args(ArgsModel):
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    #: extended resources the filter ignores (e.g. ones an external admission controller manages)
    ignored_resources: list[str] = Field(default_factory=list, max_length=64)
    #: extended-resource groups (the part before ``/``) the filter ignores
    ignored_resource_groups: list[str] = Field(default_factory=list, max_length=64)


def is_extended(resource: str) -> bool:
    """An extended resource: a domain-prefixed name outside ``kubernetes.io`` (upstream's rule)."""
    if "/" not in resource or resource.startswith("requests."):
        return False
    domain = resource.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


#: resources kube-scheduler checks first, in this order; the rest follow by name
_FIRST = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def insufficient(free: IntArray, request: int) -> BoolArray:
    """The pure check: which nodes cannot give ``request`` more of a resource."""
    out: BoolArray = free < request
    return out


def resource_scores(
    strategy: Strategy, requested: IntArray, allocatable: IntArray
) -> tuple[IntArray, BoolArray | None]:
    """Per-resource scores for one resource over nodes, and where the resource counts (alloc > 0):
    None when it counts on every node (cpu and memory nearly always), which spares the masks."""
    everywhere = not allocatable.size or allocatable.min() > 0
    counts = None if everywhere else allocatable > 0
    safe = allocatable if counts is None else np.where(counts, allocatable, 1)
    score: IntArray
    if strategy == "LeastAllocated":
        score = np.where(requested > allocatable, 0, ((allocatable - requested) * MAX_NODE_SCORE) // safe)
    else:  # MostAllocated
        score = (np.minimum(requested, allocatable) * MAX_NODE_SCORE) // safe
    if counts is None:
        return score, None
    return np.where(counts, score, 0).astype(np.int64), counts


def _at(column: IntArray, rows: IntArray, n: int) -> IntArray:
    """One resource's column of the table at the feasible ``rows`` (ascending, distinct, as the
    framework passes them): every node is feasible when there are ``n``, and a view then serves."""
    picked: IntArray = column[:n] if len(rows) == n else column[rows]
    return picked


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: Args, cache: ClusterCache | None = None) -> None:
        self.args = args
        self.cache = cache
        self.ignored = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        self.strategy = args.scoring_strategy

        #: this profile allocates DRA-backed extended resources (see the module docstring)
        self.dra_allocates = False

    def attach_framework(self, fw: Framework) -> None:
        """Learn whether DynamicResources runs in this profile at filter, reserve and preBind."""
        self.dra_allocates = all(
            any(p.name == DRA for p in plugins) for plugins in (fw.filter, fw.reserve, fw.pre_bind)
        )

    def counts_every_resource(self) -> bool:
        """The core's resource arithmetic (core/state/room.py) counts every resource a pod asks
        for: it stands for this Filter only while the args ignore none."""
        return not self.ignored and not self.ignored_groups

    def counts_all_of(self, pod: PodInfo) -> bool:
        """The arithmetic stands for this Filter on every node for ``pod``: none of its requests
        is one a DeviceClass provides (which a node may take from DRA instead)."""
        return not pod.containers or not any(self._dra_class(r) for r in pod.requests)

    def _ignored(self, resource: str) -> bool:
        if not is_extended(resource):
            return False  # upstream ignores extended resources only
        return resource in self.ignored or resource.split("/", 1)[0] in self.ignored_groups

    def _requests(self, pod: PodInfo) -> list[tuple[str, int]]:
        out = [(r, a) for r, a in pod.requests.items() if a > 0 and not self._ignored(r)]
        out.sort(key=lambda ra: (_FIRST.get(ra[0], len(_FIRST)), ra[0]))
        return out

    # -- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        state.write(STATE_KEY, self._requests(pod))
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        requests: list[tuple[str, int]] | None = state.read(STATE_KEY)
        if requests is None:
            requests = self._requests(pod)
        n = table.n
        out = [
            Rejection(insufficient(table.allocatable[PODS, :n] - table.requested[PODS, :n], 1), TOO_MANY_PODS)
        ]
        for resource, amount in requests:
            r = table.resource_row(resource)
            allocatable = table.allocatable[r, :n]
            short = insufficient(allocatable - table.requested[r, :n], amount)
            # more than the whole node offers: no eviction there can make room
            too_big = short & insufficient(allocatable, amount)
            reason = f"Insufficient {resource}"
            dra_class = self._dra_class(resource)
            if dra_class is not None and self.dra_allocates:  # DRA's to allocate where not offered
                short, too_big = short & (allocatable > 0), too_big & (allocatable > 0)
            elif (
                dra_class is not None
                and (dra_only := self._with_slices(table, short & (allocatable <= 0))).any()
            ):
                out.append(
                    Rejection(dra_only, dra_reason(resource, dra_class), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                )
                short, too_big = short & ~dra_only, too_big & ~dra_only
            out.append(Rejection(short & ~too_big, reason))
            if too_big.any():
                out.append(Rejection(too_big, reason, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return out

    def _with_slices(self, table: NodeTable, rows: BoolArray) -> BoolArray:
        """Those of ``rows`` whose node reaches a ResourceSlice (one without any: a plain shortage)."""
        assert self.cache is not None
        out = np.zeros_like(rows)
        for row in np.flatnonzero(rows):
            spec = table.specs[row]
            found = self.cache.store(DraStore).slices_for(
                table.name(int(row)), spec.labels if spec is not None else {}
            )
            out[row] = next(found, None) is not None
        return out

    def _dra_class(self, resource: str) -> str | None:
        """The DeviceClass that provides ``resource`` through DRA, or None."""
        if self.cache is None or not is_dra_extended(resource):
            return None
        cls = self.cache.store(DraStore).extended_class(resource)
        return cls.name if cls is not None else None

    # -- PreScore ------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        """BalancedAllocation skips a pod that requests none of its resources (upstream's
        best-effort rule: scoring it would pile such pods onto the same node)."""
        if self.strategy.type == "BalancedAllocation" and not any(
            pod.requests.get(rw.name, 0) > 0 for rw in self.strategy.resources
        ):
            return SKIP
        return SUCCESS

    # -- Score ---------------------------------------------------------------------------------
    def _usage(
        self, table: NodeTable, pod: PodInfo, resource: str, rows: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """(requested including the pod, allocatable) on ``rows``; None to leave the resource out.

        cpu and memory count non-zero requests, except for BalancedAllocation (requests as they are).
        """
        nonzero = self.strategy.type != "BalancedAllocation"
        n = table.n
        if resource == "cpu":
            if nonzero:
                req = _at(table.nonzero_requested[0], rows, n) + pod.nonzero_cpu
            else:
                req = _at(table.requested[CPU], rows, n) + pod.requests.get("cpu", 0)
            alloc = _at(table.allocatable[CPU], rows, n)
        elif resource == "memory":
            if nonzero:
                req = _at(table.nonzero_requested[1], rows, n) + pod.nonzero_memory
            else:
                req = _at(table.requested[MEMORY], rows, n) + pod.requests.get("memory", 0)
            alloc = _at(table.allocatable[MEMORY], rows, n)
        elif resource == "pods":
            return None  # upstream never scores the pod count
        else:
            amount = pod.requests.get(resource, 0)
            if amount <= 0 and resource != "ephemeral-storage":
                return None  # an extended resource the pod does not ask for is not scored
            r = table.resource_row(resource)
            req = _at(table.requested[r], rows, n) + amount
            alloc = _at(table.allocatable[r], rows, n)
        return req, alloc

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        m = len(rows)
        if self.strategy.type == "BalancedAllocation":
            return self._balanced(table, pod, rows)
        total = np.zeros(m, dtype=np.int64)
        weights = np.zeros(m, dtype=np.int64)
        everywhere = 0  # the weights of resources that count on every node, summed apart
        ratio = (
            self.strategy.requested_to_capacity_ratio
            if self.strategy.type == "RequestedToCapacityRatio"
            else None
        )
        for rw in self.strategy.resources:
            usage = self._usage(table, pod, rw.name, rows)
            if usage is None:
                continue
            counts: BoolArray | None
            if ratio is not None:
                req, alloc = usage
                full = (alloc == 0) | (req > alloc)
                utilization = np.where(full, 100, (req * 100) // np.where(alloc > 0, alloc, 1))
                score = broken_linear(shape_points(ratio.shape), utilization)
                counts = (alloc > 0) & (score > 0)  # upstream: only resources scoring above 0 weigh
                score = np.where(counts, score, 0)
            else:
                score, counts = resource_scores(self.strategy.type, *usage)
            total += score * rw.weight if rw.weight != 1 else score
            if counts is None:
                everywhere += rw.weight
            else:
                weights += counts * rw.weight
        if ratio is not None:  # Go's math.Round of the weighted mean
            rounded: IntArray = np.floor(total / np.maximum(weights, 1) + 0.5).astype(np.int64)
            return np.where(weights > 0, rounded, 0)
        if everywhere and not weights.any():  # one divisor for every node
            uniform: IntArray = total // everywhere
            return uniform
        weights += everywhere
        out: IntArray = np.where(weights > 0, total // np.maximum(weights, 1), 0)
        return out

    def _balanced(self, table: NodeTable, pod: PodInfo, rows: IntArray) -> IntArray:
        """How much the pod would improve each node's balance, as kube-scheduler 1.37 scores it.

        A node's balance is 100 x (1 - the standard deviation of its resource fractions, each
        capped at 1): a resource the node lacks is left out; with two fractions the deviation is
        half their difference, with more it is the root of the mean squared deviation, with fewer
        0. The score is 50 + (50 + balance with the pod - balance without it) / 2 (integer parts,
        as upstream's int64 arithmetic): 75 when the pod changes nothing, towards 100 when it
        evens the node out, towards 50 when it tips it over.
        """
        with_pod = []
        without_pod = []
        present = []
        for rw in self.strategy.resources:
            usage = self._usage(table, pod, rw.name, rows)
            if usage is None:
                continue
            req, alloc = usage
            before = req - pod.requests.get(rw.name, 0)
            counts = alloc > 0
            divisor = np.where(counts, alloc, 1)
            with_pod.append(np.where(counts, np.minimum(req / divisor, 1.0), 0.0))
            without_pod.append(np.where(counts, np.minimum(before / divisor, 1.0), 0.0))
            present.append(counts)
        if not present:
            return np.full(len(rows), MAX_NODE_SCORE // 2 + MAX_NODE_SCORE // 4, dtype=np.int64)
        p = np.vstack(present)
        after = _balance(np.vstack(with_pod), p)
        before_score = _balance(np.vstack(without_pod), p)
        change = MAX_NODE_SCORE // 2 + after - before_score  # in [0, 100]: both are in [50, 100]
        out: IntArray = MAX_NODE_SCORE // 2 + np.fix(change / 2).astype(np.int64)
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a pod deleted or resized down (UpdatePodScaleDown) frees room, as upstream registers; a
        # DeviceClass that provides a resource the pod asks for (DRA-backed extended resources)
        return (
            EventRegistration(
                EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.POD_DELETE | EventKind.POD_SCALE_DOWN
            ),
            EventRegistration(EventKind.DRA_CHANGE, class_provides_a_request),
        )


def _balance(f: npt.NDArray[np.float64], p: BoolArray) -> IntArray:
    """100 x (1 - std) of the fractions ``f`` (resources x nodes) where ``p`` (truncated)."""
    k = p.sum(axis=0)
    kk = np.maximum(k, 1)
    mean = np.where(p, f, 0.0).sum(axis=0) / kk
    spread = np.sqrt(np.where(p, (f - mean) ** 2, 0.0).sum(axis=0) / kk)
    pair = (np.where(p, f, -np.inf).max(axis=0) - np.where(p, f, np.inf).min(axis=0)) / 2
    std = np.where(k == 2, pair, np.where(k > 2, spread, 0.0))
    out: IntArray = ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
    return out


def class_provides_a_request(pod: PodInfo, event: ClusterEvent) -> bool:
    """The queueing hint for DRA changes (upstream's isSchedulableAfterDeviceClassEvent): a
    DeviceClass that provides, by its name or its ``extendedResourceName``, a resource the pod asks for."""
    cls = event.obj
    if not isinstance(cls, DeviceClassInfo):
        return False
    return pod.requests.get(IMPLICIT_EXTENDED_PREFIX + cls.name, 0) > 0 or (
        bool(cls.extended_resource_name) and pod.requests.get(cls.extended_resource_name, 0) > 0
    )


def dra_reason(resource: str, device_class: str) -> str:
    return (
        f"node(s) offer {resource} only through DRA (DeviceClass {device_class}), which this profile does "
        f"not allocate: {DRA} is not in its filter, reserve and preBind"
    )


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(args, handle.cache)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(filter_blind_to_pods=True)
ENTRY = PluginEntry(NAME, new, Args, NodeResourcesFit, contract=CONTRACT, stores=(DraStore,))
