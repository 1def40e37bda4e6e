"""GPUMemory (PreFilter, Filter, PreScore, Score, Reserve): place pods by free GPU memory.

The plugin users look for first (it grew from the seed example's GPUMemoryScore):

* a node's GPU memory is its ``gpu-memory-free-gb`` label (key configurable), or, when that is
  absent and ``gfdFallback`` is on, NVIDIA GPU Feature Discovery's ``nvidia.com/gpu.memory``
  (MiB per GPU) x ``nvidia.com/gpu.count``, or, when neither is there and ``draFallback`` is on,
  the sum of the ``memory`` capacity of the node's own DRA devices of driver ``draDriver``
  (``gpu.nvidia.com``: NVIDIA's DRA driver publishes each GPU with its memory in bytes; GiB
  counted as GB, as GFD's MiB are) less the devices ResourceClaims hold. ``shoal explain`` names
  the source per node (:meth:`GPUMemory.explain_nodes`). A *malformed* label is not papered over with GFD's
  total: the node has no GPU information and says why (a budget someone meant to set is unknown);
* where GFD says how big one GPU is, a pod asking for more GPU memory than its GPUs hold
  (``nvidia.com/gpu`` requested, at least 1, x memory per GPU) does not fit that node;
* a pod asks for GPU memory with the annotation ``shoal.dev/gpu-memory-gb: "10"``;
* **Filter**: the node's GPU memory minus what the pods already on it asked for (bound *and*
  assumed — the cache's reservations) must cover the request. No information or a malformed label
  (``40Gi``, ``-5``, ``abc``) means "no GPU information" for that node, reported, never a crash;
* **Score** (the seed's formula): ``min(100, free_gb * 5)``, normalised by the best node, with no
  division by zero when every node scores 0. Only pods that use GPUs are scored;
* **Reserve**: re-checks the node is not over its memory once the pod is counted on it. The
  reservation itself is the cache's assume, shared by every profile, so a burst of pods (or two
  profiles) never piles onto one node past its label.

A malformed pod annotation makes the pod "no GPU-memory request"; the reporter says so in the
pod's events.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np
from pydantic import Field

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    MAX_NODE_SCORE,
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.framework.scoring import default_normalize
from shoal.core.state import fidelity
from shoal.core.state.nodetable import FloatArray, NodeTable
from shoal.core.state.objects import GPU_MEMORY_ANNOTATION, GPU_RESOURCE, PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status
from shoal.plugins.dynamicresources.objects import DeviceId
from shoal.plugins.dynamicresources.store import DraStore

log = logging.getLogger("shoal.plugins.gpumemory")

NAME = "GPUMemory"
DRA_DRIVER = "gpu.nvidia.com"
DEFAULT_LABEL = "gpu-memory-free-gb"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
INSUFFICIENT = "Insufficient GPU memory"
NO_INFO = "node(s) had no GPU memory information"
TOO_SMALL = "node(s) had GPUs too small for the pod's GPU memory request"


class Args(ArgsModel):
    label_key: str = Field(
        default=DEFAULT_LABEL,
        min_length=1,
        max_length=317,
        pattern=r"^([a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$",
        description="Node label holding free GPU memory in GB.",
    )
    gfd_fallback: bool = Field(
        default=True, description="Use GFD labels when the label is missing (not when it is malformed)."
    )
    score_per_gb: float = Field(default=5.0, gt=0, le=100, description="Score per free GB, capped at 100.")
    dra_fallback: bool = Field(
        default=True,
        description="Use the memory capacity of the node's DRA devices when neither label nor GFD is there.",
    )
    dra_driver: str = Field(
        default=DRA_DRIVER, min_length=1, description="The DRA driver whose devices are GPUs."
    )


def gpu_size_gb(table: NodeTable) -> FloatArray:
    """Memory of one GPU (GB) per row from GFD's ``nvidia.com/gpu.memory``; NaN where unknown."""
    per_gpu_mib, _ = table.numeric_label(GFD_MEMORY)
    out: FloatArray = per_gpu_mib / 1024.0
    return out


#: where a node's GPU memory comes from, per row (``budgets``' third array)
NO_SOURCE, FROM_LABEL, FROM_GFD, FROM_DRA = 0, 1, 2, 3
SOURCE_NAMES = {
    NO_SOURCE: "none",
    FROM_LABEL: "label",
    FROM_GFD: f"GFD labels {GFD_MEMORY} x {GFD_COUNT}",
    FROM_DRA: "DRA devices' memory capacity",
}


def dra_gpu_memory(
    table: NodeTable, store: DraStore, driver: str
) -> tuple[FloatArray, dict[DeviceId, tuple[int, float]]]:
    """GPU memory (GB) per row from the node's own devices of ``driver`` (node-local slices, the
    pools it may allocate from); NaN where the node has none. However a GPU is described, its
    memory counts once: a whole device by its ``memory`` capacity; partitions (MIG: devices
    consuming their GPU's counters) by the ``memory`` counter of the counter set they share, not
    each partition's. And what each device takes of it when allocated (a partition: its ``memory``
    counter; a whole device: all of it), to count what claims hold (:func:`claimed_gb`)."""
    out: FloatArray = np.full(table.n, np.nan)
    devices: dict[DeviceId, tuple[int, float]] = {}
    key = f"{driver}/memory"
    for node in store.node_slice_names():
        row = table.index.get(node)
        if row is None:
            continue
        total, seen = 0.0, False
        for pool in store.pools_for(node, {}):
            if not pool.usable or pool.driver != driver:
                continue
            sets: set[str] = set()
            for d in pool.devices:
                taken = sum((c.get("memory", 0) for c in d.consumes.values()), start=Decimal(0))
                if taken:
                    sets.update(name for name, c in d.consumes.items() if "memory" in c)
                    devices[d.id] = (row, float(taken) / 2**30)
                elif key in d.capacity:
                    total, seen = total + d.capacity[key] / 2**30, True
                    devices[d.id] = (row, d.capacity[key] / 2**30)
            for name in sets:
                memory = pool.counters.get(name, {}).get("memory")
                if memory is not None:
                    total, seen = total + float(memory) / 2**30, True
        if seen:
            out[row] = total
    return out, devices


def claimed_gb(n: int, store: DraStore, devices: Mapping[DeviceId, tuple[int, float]]) -> FloatArray:
    """Per row, the GPU memory claims hold (allocated by anyone, or assumed by shoal): a device
    given to a claim (a partition: its share of the GPU's memory), and what the shares of a
    shared device take of its ``memory``, are not free for the budget either."""
    out: FloatArray = np.zeros(n)
    for device in store.taken:
        hit = devices.get(device)
        if hit is not None and hit[0] < n:
            out[hit[0]] += hit[1]
    for device, amounts in store.shared():
        hit = devices.get(device)
        if hit is not None and hit[0] < n:
            out[hit[0]] += float(amounts.get("memory", 0)) / 2**30
    return out


def node_gpu_memory(
    table: NodeTable, args: Args, dra_gb: FloatArray | None = None
) -> tuple[FloatArray, BoolArray]:
    """GPU memory (GB) per row, NaN where unknown; and which rows have a malformed label."""
    total, malformed, _ = budgets(table, args, dra_gb)
    return total, malformed


def budgets(
    table: NodeTable, args: Args, dra_gb: FloatArray | None = None
) -> tuple[FloatArray, BoolArray, IntArray]:
    """:func:`node_gpu_memory`, and per row where the figure comes from (``FROM_*``)."""
    label, bad = table.numeric_label(args.label_key)
    malformed = np.zeros(table.n, dtype=bool)
    if bad:
        malformed[list(bad)] = True
    count, _ = table.numeric_label(GFD_COUNT)
    with np.errstate(over="ignore", invalid="ignore"):
        gfd = gpu_size_gb(table) * count
    gfd = np.where(np.isfinite(gfd), gfd, np.nan)  # absurd GFD values: no information
    # a budget above what the node's GPUs hold (where GFD says) is no one's real budget either
    with np.errstate(invalid="ignore"):
        above = above_gpus(label, gfd)
    if above.any():
        malformed |= above
        label = np.where(above, np.nan, label)
    source = np.where(np.isnan(label), NO_SOURCE, FROM_LABEL).astype(np.int64)
    total: FloatArray = label
    if args.gfd_fallback:
        use = np.isnan(total) & ~malformed & ~np.isnan(gfd)
        total, source = np.where(use, gfd, total), np.where(use, FROM_GFD, source)
    if args.dra_fallback and dra_gb is not None:
        use = np.isnan(total) & ~malformed & ~np.isnan(dra_gb)
        total, source = np.where(use, dra_gb, total), np.where(use, FROM_DRA, source)
    return total, malformed, source


def above_gpus(label_gb: FloatArray, gfd_gb: FloatArray) -> BoolArray:
    """Rows whose label promises more GPU memory than GFD says their GPUs hold."""
    with np.errstate(invalid="ignore"):
        out: BoolArray = ~np.isnan(label_gb) & ~np.isnan(gfd_gb) & (label_gb > gfd_gb + 1e-9)
    return out


def fits(free_gb: FloatArray, request_gb: float) -> BoolArray:
    """The pure check: free GPU memory covers the request (unknown never fits)."""
    with np.errstate(invalid="ignore"):
        out: BoolArray = free_gb >= request_gb - 1e-9
    return out


def seed_score(free_gb: FloatArray, score_per_gb: float = 5.0) -> IntArray:
    """The seed's ``min(100, free_gb * 5)``; unknown or negative free memory scores 0."""
    with np.errstate(over="ignore"):  # an absurd label (1e308 GB) overflows to inf: scores 100
        raw = np.nan_to_num(free_gb, nan=0.0) * score_per_gb
    return np.clip(raw, 0, MAX_NODE_SCORE).astype(np.int64)


def uses_gpu(pod: PodInfo) -> bool:
    return bool(pod.gpu_memory_gb) or pod.requests.get(GPU_RESOURCE, 0) > 0


class GPUMemory:
    name = NAME

    def __init__(self, args: Args, table: NodeTable, dra: DraStore | None = None) -> None:
        self.args = args
        self.table = table
        self.dra = dra
        self.invalid_label = f"node(s) had an invalid {args.label_key} label"
        #: (node, reason) pairs already logged, so a bad label is reported once, not every cycle
        self._warned: set[tuple[str, str]] = set()
        self._budgets: tuple[tuple[int, ...], FloatArray, BoolArray, IntArray] | None = None
        self._dra_devices: dict[DeviceId, tuple[int, float]] = {}
        self._claimed_cache: tuple[tuple[int, int], FloatArray] | None = None

    def free(self, table: NodeTable) -> tuple[FloatArray, BoolArray]:
        """Per row: GPU memory minus what pods on the node asked for, and, where the figure comes
        from DRA devices, minus the memory of the devices claims hold; which rows are malformed."""
        _, total, malformed, source = self._budget(table)
        free: FloatArray = total - table.gpu_memory_used[: table.n]
        if self.dra is not None and (source == FROM_DRA).any():
            free = free - np.where(source == FROM_DRA, self._claimed(table.n), 0.0)
        return free, malformed

    def budget(self, table: NodeTable) -> tuple[FloatArray, FloatArray, list[str]]:
        """Per row: the GPU memory (GB, NaN where unknown), what is free of it (:meth:`free`), and
        where the figure comes from (the fleet view shows all three)."""
        _, total, _, source = self._budget(table)
        free, _ = self.free(table)
        names = [
            f"label {self.args.label_key}" if int(s) == FROM_LABEL else SOURCE_NAMES[int(s)]
            for s in source[: table.n]
        ]
        return total, free, names

    def _budget(self, table: NodeTable) -> tuple[tuple[int, ...], FloatArray, BoolArray, IntArray]:
        # the budgets depend on node labels only: computed again when a node is added, removed or
        # relabelled (table.version), not at each of Filter, Score and Reserve of every pod
        # (and when a ResourceSlice changes, for the DRA fallback)
        dra_version = self.dra.devices_version if self.dra is not None and self.args.dra_fallback else -1
        key = (id(table), table.version, table.n, dra_version)
        if self._budgets is None or self._budgets[0] != key:
            dra_gb = None
            if self.dra is not None and dra_version >= 0:
                dra_gb, self._dra_devices = dra_gpu_memory(table, self.dra, self.args.dra_driver)
                self._claimed_cache = None
            self._budgets = (key, *budgets(table, self.args, dra_gb))
        return self._budgets

    def _claimed(self, n: int) -> FloatArray:
        assert self.dra is not None
        key = (self.dra.taken_version, n)
        if self._claimed_cache is None or self._claimed_cache[0] != key:
            self._claimed_cache = (key, claimed_gb(n, self.dra, self._dra_devices))
        return self._claimed_cache[1]

    def explain_nodes(self, pod: PodInfo, rows: Sequence[int]) -> dict[int, str]:
        """For ``shoal explain``: per node, where its GPU memory figure comes from and what is free."""
        if not uses_gpu(pod):
            return {}
        free, malformed = self.free(self.table)
        source = self._budget(self.table)[3]
        out = {}
        for row in rows:
            if malformed[row]:
                out[row] = f"GPU memory: invalid {self.args.label_key} label"
                continue
            where = SOURCE_NAMES[int(source[row])]
            if int(source[row]) == FROM_LABEL:
                where = f"label {self.args.label_key}"
            out[row] = f"GPU memory from {where}" + (
                "" if np.isnan(free[row]) else f": {free[row]:g} GB free"
            )
        return out

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS if pod.gpu_memory_gb else SKIP

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        request = pod.gpu_memory_gb
        if not request:
            return ()
        free, malformed = self.free(table)
        unknown = np.isnan(free)
        out = [Rejection(~unknown & ~fits(free, request), INSUFFICIENT)]
        size = gpu_size_gb(table)
        gpus = max(1, pod.requests.get(GPU_RESOURCE, 0))
        with np.errstate(invalid="ignore"):
            too_small = ~np.isnan(size) & (size * gpus < request - 1e-9)
        if too_small.any():
            out.append(Rejection(too_small, TOO_SMALL, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if malformed.any():
            self._warn_malformed(table, malformed)
        if unknown.any():
            out.append(Rejection(unknown & ~malformed, NO_INFO, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
            out.append(Rejection(malformed, self.invalid_label, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return out

    def _warn_malformed(self, table: NodeTable, malformed: BoolArray) -> None:
        _, why = table.numeric_label(self.args.label_key)
        for row in np.flatnonzero(malformed):
            above = "a budget above the memory its GPUs hold (GPU Feature Discovery's labels)"
            name, reason = table.name(int(row)), why.get(int(row), above)
            if (name, reason) in self._warned:
                continue
            self._warned.add((name, reason))
            log.warning(
                "node %s: label %s: %s; the node has no GPU memory information until it is fixed",
                name,
                self.args.label_key,
                reason,
            )

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        return SUCCESS if uses_gpu(pod) else SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        free, _ = self.free(table)
        return seed_score(free[rows], self.args.score_per_gb)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not pod.gpu_memory_gb:
            return SUCCESS
        # The cache has counted the pod on the node already (assume); check nothing overflowed.
        table = self.table
        row = table.index.get(node)
        if row is None:
            return Status.unschedulable(f"node {node} disappeared", plugin=NAME)
        free, _ = self.free(table)
        if np.isnan(free[row]) or free[row] < -1e-9:
            return Status.unschedulable(f"{INSUFFICIENT} on {node}", plugin=NAME)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Nothing to undo here: the cache's forget releases the pod's GPU memory."""

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(
                EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.POD_DELETE | EventKind.DRA_CHANGE
            ),
        )


def new(args: Args, handle: Handle) -> GPUMemory:
    return GPUMemory(args, handle.cache.table, handle.cache.store(DraStore))


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(Evaluates(fidelity.annotation(GPU_MEMORY_ANNOTATION)),),
    pod_only_pre_filter=True,
    # blind for a pod that asks for no GPU memory (the what-ifs check)
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, GPUMemory, contract=CONTRACT, stores=(DraStore,))
