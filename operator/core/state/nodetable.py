"""The columnar node table: one row per node, one numpy column per resource or attribute.

Why: kube-scheduler evaluates only a sample of nodes because per-node work is expensive; shoal
evaluates every node by letting built-in plugins work on whole columns at once (a Filter is a few
vector comparisons over 5,000 nodes, not 5,000 function calls). Rows are reused after a node is
deleted; ``valid`` says which rows hold a node. All arrays have ``capacity`` entries; plugins use
the first ``size`` (``table.n``), which covers every live row.

Units: cpu in millicores, memory and storage in bytes, everything else in its own count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from shoal.core.state.objects import GPU_RESOURCE, NodeSpec, PodInfo, Taint, parse_gpu_memory

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage", GPU_RESOURCE)
CPU, MEMORY, PODS = 0, 1, 2

_G = TypeVar("_G", bound=np.generic)


def _widen(a: npt.NDArray[_G], capacity: int) -> npt.NDArray[_G]:
    """A copy of ``a`` with its last axis zero-padded to ``capacity``."""
    b: npt.NDArray[_G] = np.zeros((*a.shape[:-1], capacity), dtype=a.dtype)
    b[..., : a.shape[-1]] = a
    return b


@dataclass(slots=True)
class NodeInfo:
    """One node, as a per-node (non-vectorised) plugin sees it: a copy, safe to keep."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    requested: dict[str, int]
    taints: tuple[Taint, ...]
    unschedulable: bool
    gpu_memory_used_gb: float
    used_ports: frozenset[tuple[str, str, int]] = field(default_factory=frozenset)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)


#: dead label codes (or taint sets) are freed once they outnumber the live ones and this many
COMPACT_AT = 64


class NodeTable:
    """Columns of node attributes. Mutated only between scheduling cycles (single-threaded)."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = max(capacity, 8)
        self.size = 0
        self.names: list[str | None] = []
        self.index: dict[str, int] = {}
        self.specs: list[NodeSpec | None] = []
        self._free_rows: list[int] = []
        self.resources: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        cap, nres = self.capacity, len(self.resources)
        self.valid: BoolArray = np.zeros(cap, dtype=bool)
        self.allocatable: IntArray = np.zeros((nres, cap), dtype=np.int64)
        self.requested: IntArray = np.zeros((nres, cap), dtype=np.int64)
        self.nonzero_requested: IntArray = np.zeros((2, cap), dtype=np.int64)  # cpu, memory with defaults
        self.unschedulable: BoolArray = np.zeros(cap, dtype=bool)
        self.taint_set: npt.NDArray[np.int32] = np.zeros(cap, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_ids: dict[tuple[Taint, ...], int] = {(): 0}
        #: per taint set, how many rows hold it (the empty set's count is not kept)
        self._taint_users: list[int] = [0]
        self._dead_taints = 0
        self.gpu_memory_used: FloatArray = np.zeros(cap, dtype=np.float64)
        self.has_ports: BoolArray = np.zeros(cap, dtype=bool)
        self.ports: list[dict[tuple[str, str, int], int]] = []
        self._label_codes: dict[str, dict[str, int]] = {}
        self._label_cols: dict[str, npt.NDArray[np.int32]] = {}
        #: per label key with a column, per code, how many rows hold it; and how many codes no
        #: row holds (dead: a value every node carrying it has dropped, such as a deleted node's
        #: hostname), which :meth:`_compact_codes` frees
        self._code_users: dict[str, list[int]] = {}
        self._dead_codes: dict[str, int] = {}
        self._numeric: dict[str, FloatArray] = {}
        self._numeric_bad: dict[str, dict[int, str]] = {}
        #: image name -> rows of the nodes holding it, and its size (as first reported; ImageLocality)
        self.image_rows: dict[str, set[int]] = {}
        self.image_sizes: dict[str, int] = {}
        #: bumps whenever a node is added, removed or relabelled (plugins may key caches on it)
        self.version = 0

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.size

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def rows(self) -> Iterable[int]:
        return self.index.values()

    def valid_rows(self) -> BoolArray:
        return self.valid[: self.size]

    def name(self, row: int) -> str:
        name = self.names[row]
        assert name is not None, f"row {row} holds no node"
        return name

    # -- resources -----------------------------------------------------------------------------
    def resource_row(self, resource: str) -> int:
        """The row of ``resource`` in allocatable/requested, adding one for a new resource."""
        idx = self.resource_index.get(resource)
        if idx is None:
            idx = len(self.resources)
            self.resources.append(resource)
            self.resource_index[resource] = idx
            pad = np.zeros((1, self.capacity), dtype=np.int64)
            self.allocatable = np.vstack([self.allocatable, pad])
            self.requested = np.vstack([self.requested, pad])
        return idx

    def _resource_rows(self, amounts: dict[str, int]) -> list[tuple[int, int]]:
        """``(row, amount)`` for each resource, every new row added *before* any write.

        ``resource_row`` replaces ``allocatable``/``requested`` when it adds a resource, and Python
        evaluates ``a[f(x), i] = v`` by taking ``a`` before calling ``f``: a write in that form
        would land in the discarded array (or raise IndexError). Real kubelets report
        ``hugepages-1Gi``, ``hugepages-2Mi`` and device-plugin resources beyond the base five.
        """
        return [(self.resource_row(resource), amount) for resource, amount in amounts.items()]

    # -- nodes ---------------------------------------------------------------------------------
    def _grow(self) -> None:
        old = self.capacity
        new = old * 2

        self.valid = _widen(self.valid, new)
        self.allocatable = _widen(self.allocatable, new)
        self.requested = _widen(self.requested, new)
        self.nonzero_requested = _widen(self.nonzero_requested, new)
        self.unschedulable = _widen(self.unschedulable, new)
        self.taint_set = _widen(self.taint_set, new)
        self.gpu_memory_used = _widen(self.gpu_memory_used, new)
        self.has_ports = _widen(self.has_ports, new)
        for key, col in self._label_cols.items():
            g = np.full(new, -1, dtype=np.int32)
            g[:old] = col
            self._label_cols[key] = g
        for key, num in self._numeric.items():
            g2 = np.full(new, np.nan, dtype=np.float64)
            g2[:old] = num
            self._numeric[key] = g2
        self.capacity = new

    def set_node(self, spec: NodeSpec) -> int:
        """Add or update a node; its pods' usage (requested) is kept on update."""
        row = self.index.get(spec.name)
        if row is None:
            if self._free_rows:
                row = self._free_rows.pop()
            else:
                if self.size >= self.capacity:
                    self._grow()
                row = self.size
                self.size += 1
                self.names.append(None)
                self.specs.append(None)
                self.ports.append({})
            self.index[spec.name] = row
            self.names[row] = spec.name
            self.valid[row] = True
            self.requested[:, row] = 0
            self.nonzero_requested[:, row] = 0
            self.gpu_memory_used[row] = 0.0
            self.ports[row] = {}
            self.has_ports[row] = False
            old = None
        else:
            old = self.specs[row]
        self.specs[row] = spec
        self.allocatable[:, row] = 0
        for resource_idx, amount in self._resource_rows(spec.allocatable):
            self.allocatable[resource_idx, row] = amount
        self.unschedulable[row] = spec.unschedulable
        self._set_taints(row, spec.taints)
        if old is None or old.labels != spec.labels:
            self._relabel(row, spec.labels)
            self.version += 1
        if old is None or old.images != spec.images:
            self._reimage(row, old.images if old is not None else {}, spec.images)
        return row

    def _reimage(self, row: int, old: dict[str, int], new: dict[str, int]) -> None:
        for name in old.keys() - new.keys():
            rows = self.image_rows.get(name)
            if rows is not None:
                rows.discard(row)
                if not rows:
                    del self.image_rows[name]
                    self.image_sizes.pop(name, None)
        for name, size in new.items():
            self.image_rows.setdefault(name, set()).add(row)
            self.image_sizes.setdefault(name, size)

    def remove_node(self, name: str) -> int | None:
        row = self.index.pop(name, None)
        if row is None:
            return None
        spec = self.specs[row]
        if spec is not None:
            self._reimage(row, spec.images, {})
        self.names[row] = None
        self.specs[row] = None
        self.valid[row] = False
        self.allocatable[:, row] = 0
        self.requested[:, row] = 0
        self.nonzero_requested[:, row] = 0
        self.unschedulable[row] = False
        self._set_taints(row, ())
        self.gpu_memory_used[row] = 0.0
        self.has_ports[row] = False
        self.ports[row] = {}
        self._relabel(row, {})
        self._free_rows.append(row)
        self.version += 1
        return row

    # -- pod usage -----------------------------------------------------------------------------
    def account(self, row: int, pod: PodInfo, sign: int = 1) -> None:
        """Add (sign=+1) or remove (sign=-1) a pod's requests on a node."""
        for resource_idx, amount in self._resource_rows(pod.requests):
            self.requested[resource_idx, row] += sign * amount
        self.requested[PODS, row] += sign
        self.nonzero_requested[0, row] += sign * pod.nonzero_cpu
        self.nonzero_requested[1, row] += sign * pod.nonzero_memory
        if pod.gpu_memory_gb:
            self.gpu_memory_used[row] += sign * pod.gpu_memory_gb
            if abs(self.gpu_memory_used[row]) < 1e-9:
                self.gpu_memory_used[row] = 0.0
        if pod.host_ports:
            used = self.ports[row]
            for port in pod.host_ports:
                count = used.get(port, 0) + sign
                if count > 0:
                    used[port] = count
                else:
                    used.pop(port, None)
            self.has_ports[row] = bool(used)

    # -- labels --------------------------------------------------------------------------------
    def _relabel(self, row: int, labels: dict[str, str]) -> None:
        for key, col in self._label_cols.items():
            value = labels.get(key)
            old, new = int(col[row]), (-1 if value is None else self._code(key, value))
            if old != new:
                self._use_code(key, old, -1)
                self._use_code(key, new, 1)
                col[row] = new
        for key, num in self._numeric.items():
            self._set_numeric(key, num, row, labels.get(key))
        for key, dead in list(self._dead_codes.items()):
            if dead > max(COMPACT_AT, len(self._code_users[key]) - dead):
                self._compact_codes(key)

    def _code(self, key: str, value: str) -> int:
        codes = self._label_codes.setdefault(key, {})
        code = codes.get(value)
        if code is None:
            code = len(codes)
            codes[value] = code
            self._code_users.setdefault(key, []).append(0)
            self._dead_codes[key] = self._dead_codes.get(key, 0) + 1  # no row holds it yet
        return code

    def _use_code(self, key: str, code: int, delta: int) -> None:
        if code < 0:
            return
        users = self._code_users[key]
        users[code] += delta
        if users[code] == 0:
            self._dead_codes[key] += 1
        elif delta > 0 and users[code] == 1:
            self._dead_codes[key] -= 1

    def _compact_codes(self, key: str) -> None:
        """Free the codes of ``key`` no row holds: the live values get dense codes again, in
        their old order (so orderings by code, such as domain tie-breaks, do not change), and the
        column is rewritten. Codes are only ever read fresh from the table or from caches keyed on
        ``version``, which this bumps. Without it every value ever seen stays interned: each
        autoscaled node leaves its hostname behind, and per-cycle arrays sized by the number of
        codes (spreading and affinity counts) grow with the cluster's history, not its size."""
        users = self._code_users[key]
        codes = self._label_codes[key]
        remap = np.full(len(users) + 1, -1, dtype=np.int32)  # the last slot maps -1 to -1
        live: dict[str, int] = {}
        kept: list[int] = []
        for value, code in sorted(codes.items(), key=lambda kv: kv[1]):
            if users[code] > 0:
                remap[code] = len(live)
                live[value] = len(live)
                kept.append(users[code])
        col = self._label_cols[key]
        col[:] = remap[col]
        self._label_codes[key] = live
        self._code_users[key] = kept
        self._dead_codes[key] = 0
        self.version += 1

    def _set_taints(self, row: int, taints: tuple[Taint, ...]) -> None:
        """Intern the node's taints as a taint set; free the sets no node holds any longer once
        they outnumber the live ones (a taint's value may be unique to a node or an incident — a
        ticket, a drain's id — and every pod's cycle walks all of the sets)."""
        tid = self._taint_ids.get(taints)
        if tid is None:
            tid = len(self.taint_sets)
            self.taint_sets.append(taints)
            self._taint_ids[taints] = tid
            self._taint_users.append(0)
            self._dead_taints += 1  # no row holds it yet
        old = int(self.taint_set[row])
        if old == tid:
            return
        if old:
            self._taint_users[old] -= 1
            self._dead_taints += self._taint_users[old] == 0
        if tid:
            self._taint_users[tid] += 1
            self._dead_taints -= self._taint_users[tid] == 1
        self.taint_set[row] = tid
        if self._dead_taints > max(COMPACT_AT, len(self.taint_sets) - 1 - self._dead_taints):
            self._compact_taints()

    def _compact_taints(self) -> None:
        remap = np.zeros(len(self.taint_sets), dtype=np.int32)
        sets: list[tuple[Taint, ...]] = [()]
        users = [0]
        for tid in range(1, len(self.taint_sets)):
            if self._taint_users[tid] > 0:
                remap[tid] = len(sets)
                sets.append(self.taint_sets[tid])
                users.append(self._taint_users[tid])
        self.taint_set[:] = remap[self.taint_set]
        self.taint_sets = sets
        self._taint_users = users
        self._dead_taints = 0
        self._taint_ids = {taints: i for i, taints in enumerate(sets)}
        self.version += 1

    def label_column(self, key: str) -> npt.NDArray[np.int32]:
        """Interned codes of label ``key`` per row (-1: absent); built once, kept up to date."""
        col = self._label_cols.get(key)
        if col is None:
            col = np.full(self.capacity, -1, dtype=np.int32)
            self._code_users.setdefault(key, [])
            self._dead_codes.setdefault(key, 0)
            for row in self.index.values():
                spec = self.specs[row]
                value = spec.labels.get(key) if spec else None
                if value is not None:
                    col[row] = code = self._code(key, value)
                    self._use_code(key, code, 1)
            self._label_cols[key] = col
        return col[: self.size]

    def label_code(self, key: str, value: str) -> int:
        """The code of ``value`` for ``key`` (-2 if no node has it: matches nothing)."""
        return self._label_codes.get(key, {}).get(value, -2)

    def label_values(self, key: str) -> dict[str, int]:
        self.label_column(key)
        return self._label_codes.get(key, {})

    def _set_numeric(self, key: str, num: FloatArray, row: int, value: str | None) -> None:
        bad = self._numeric_bad.setdefault(key, {})
        number, why = parse_gpu_memory(value)
        num[row] = np.nan if number is None else number
        if why:
            bad[row] = why
        else:
            bad.pop(row, None)

    def numeric_label(self, key: str) -> tuple[FloatArray, dict[int, str]]:
        """Label ``key`` as non-negative numbers per row (NaN: absent or malformed), and why bad."""
        num = self._numeric.get(key)
        if num is None:
            num = np.full(self.capacity, np.nan, dtype=np.float64)
            self._numeric[key] = num
            self._numeric_bad[key] = {}
            for row in self.index.values():
                spec = self.specs[row]
                self._set_numeric(key, num, row, spec.labels.get(key) if spec else None)
        return num[: self.size], self._numeric_bad[key]

    # -- views ---------------------------------------------------------------------------------
    def free(self, resource: str) -> IntArray:
        r = self.resource_row(resource)
        return self.allocatable[r, : self.size] - self.requested[r, : self.size]

    def node_info(self, row: int) -> NodeInfo:
        spec = self.specs[row]
        assert spec is not None, f"row {row} holds no node"
        requested = {
            r: int(self.requested[i, row]) for i, r in enumerate(self.resources) if self.requested[i, row]
        }
        return NodeInfo(
            name=spec.name,
            labels=dict(spec.labels),
            allocatable=dict(spec.allocatable),
            requested=requested,
            taints=spec.taints,
            unschedulable=spec.unschedulable,
            gpu_memory_used_gb=float(self.gpu_memory_used[row]),
            used_ports=frozenset(self.ports[row]),
        )
