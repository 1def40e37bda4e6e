"""PodTopologySpread (PreFilter, Filter, PreScore, Score): spread matching pods over domains.

kube-scheduler's semantics (pkg/scheduler/framework/plugins/podtopologyspread, release 1.37):

* A constraint counts the placed, non-terminating pods **in the incoming pod's namespace** that
  its selector matches (an empty selector counts none; ``matchLabelKeys`` are merged into it),
  per domain of ``topologyKey``, over the nodes that carry every constraint's key and pass the
  node inclusion policies (``nodeAffinityPolicy: Honor`` — the default — leaves out nodes the
  pod's nodeSelector / required node affinity rejects; ``nodeTaintsPolicy: Honor`` leaves out
  nodes with a NoSchedule / NoExecute taint the pod does not tolerate; the default is Ignore).
* Filter (``DoNotSchedule``), per node and constraint in order: a node without the key is
  ``node(s) didn't match pod topology spread constraints (missing required label)``
  (UnschedulableAndUnresolvable); otherwise the pod fits when count(domain) + (1 if the pod
  matches the selector) − min count over the domains ≤ ``maxSkew`` (the minimum is 0 while there
  are fewer domains than ``minDomains``), else ``node(s) didn't match pod topology spread
  constraints`` (Unschedulable).
* Score (``ScheduleAnyway``): a node scores Σ count × ln(#domains + 2) + (maxSkew − 1) over the
  constraints (for ``kubernetes.io/hostname`` the count of the node itself), normalised so the
  least crowded node gets 100; nodes missing a key score 0.

Not (yet) as upstream: kube-scheduler's system-default constraints for pods without their own
(soft zone / hostname spreading of pods that a Service, ReplicaSet or StatefulSet selects) need
those objects watched; shoal applies none (docs/architecture.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shoal.core.cache import ClusterCache
from shoal.core.cyclestate import CycleState
from shoal.core.interfaces import (
    MAX_NODE_SCORE,
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.nodetable import NodeTable
from shoal.core.objects import PodInfo
from shoal.core.profile import PluginEntry
from shoal.core.selectors import SpreadConstraint
from shoal.core.status import SUCCESS, Code, Status
from shoal.plugins import nodeaffinity, tainttoleration

NAME = "PodTopologySpread"
FILTER_KEY = f"PreFilter{NAME}"
SCORE_KEY = f"PreScore{NAME}"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"


def skew_ok(domain_count: int, self_match: int, min_count: int, max_skew: int) -> bool:
    """The pure check behind Filter."""
    return domain_count + self_match - min_count <= max_skew


def score_for_count(count: float, max_skew: int, weight: float) -> float:
    return count * weight + float(max_skew - 1)


def _domain_counts(table: NodeTable, key: str, eligible: BoolArray, node_counts: IntArray) -> IntArray:
    """Matching pods per label value code of ``key``, over the eligible rows."""
    codes = table.label_column(key)
    size = len(table.label_values(key)) + 1
    out: IntArray = np.bincount(codes[eligible], weights=node_counts[eligible], minlength=size).astype(
        np.int64
    )
    return out


@dataclass
class _Constraints:
    items: tuple[SpreadConstraint, ...]
    #: rows eligible for each constraint (all keys present, inclusion policies passed)
    eligible: list[BoolArray]
    #: matching pods per row, for each constraint
    node_counts: list[IntArray]


class PodTopologySpread:
    name = NAME
    #: Filter and Score read what PreFilter and PreScore computed (profile validation checks it)
    needs_pre_filter = True
    needs_pre_score = True

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def _prepare(self, pod: PodInfo, items: tuple[SpreadConstraint, ...], table: NodeTable) -> _Constraints:
        n = table.n
        has_all = table.valid[:n].copy()
        for c in items:
            has_all &= table.label_column(c.topology_key) >= 0
        affinity_ok: BoolArray | None = None
        taints_ok: BoolArray | None = None
        eligible: list[BoolArray] = []
        for c in items:
            rows = has_all.copy()
            if c.node_affinity_policy == "Honor":
                if affinity_ok is None:
                    affinity_ok = nodeaffinity.matches(pod, table)
                rows &= affinity_ok
            if c.node_taints_policy == "Honor":
                if taints_ok is None:
                    taints_ok = self._tolerated(pod, table)
                rows &= taints_ok
            eligible.append(rows)
        counts = [np.zeros(n, dtype=np.int64) for _ in items]
        index = table.index
        for placed in self.cache.placed_sets.sets([pod.namespace]):
            if placed.key.terminating:
                continue  # as upstream: a pod being deleted no longer counts
            matching = [counts[i] for i, c in enumerate(items) if c.counts(placed.labels)]
            for node, count in placed.nodes.items() if matching else ():
                row = index.get(node)
                if row is not None:
                    for column in matching:
                        column[row] += count
        return _Constraints(items, eligible, counts)

    @staticmethod
    def _tolerated(pod: PodInfo, table: NodeTable) -> BoolArray:
        bad = [
            tid
            for tid, taints in enumerate(table.taint_sets)
            if taints and tainttoleration.first_untolerated(taints, pod.tolerations) is not None
        ]
        ok: BoolArray = ~np.isin(table.taint_set[: table.n], bad)
        return ok

    # -- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if pod.spread_error:
            return None, Status.unschedulable(f"parsing pod: {pod.spread_error}", resolvable=False)
        hard = tuple(c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule")
        if not hard:
            return None, Status.skip()
        state.write(FILTER_KEY, self._prepare(pod, hard, self.cache.table))
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        prepared: _Constraints = state.require(FILTER_KEY)
        n = table.n
        missing = np.zeros(n, dtype=bool)
        skewed = np.zeros(n, dtype=bool)
        for c, eligible, node_counts in zip(
            prepared.items, prepared.eligible, prepared.node_counts, strict=True
        ):
            codes = table.label_column(c.topology_key)
            present = np.unique(codes[eligible])
            domain = _domain_counts(table, c.topology_key, eligible, node_counts)
            min_count = int(domain[present].min()) if len(present) else 0
            if len(present) < c.min_domains:
                min_count = 0
            decided = missing | skewed
            missing |= ~decided & (codes < 0)
            own = np.where(codes >= 0, domain[np.maximum(codes, 0)], 0)
            self_match = 1 if c.self_match(pod.labels) else 0
            too_high = own + self_match - min_count > c.max_skew
            skewed |= ~decided & (codes >= 0) & too_high
        out = []
        if missing.any():
            out.append(Rejection(missing, MISSING_LABEL_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if skewed.any():
            out.append(Rejection(skewed, REASON, Code.UNSCHEDULABLE))
        return out

    # -- PreScore / Score ----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        soft = tuple(c for c in pod.topology_spread if c.when_unsatisfiable == "ScheduleAnyway")
        if not soft or not len(table):
            return Status.skip()
        state.write(SCORE_KEY, self._prepare(pod, soft, table))
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        prepared: _Constraints = state.require(SCORE_KEY)
        n = table.n
        scored = np.zeros(n, dtype=bool)
        scored[rows] = True
        ignored = np.zeros(n, dtype=bool)  # scored nodes missing a key: score 0 after normalising
        for c in prepared.items:
            ignored |= scored & (table.label_column(c.topology_key) < 0)
        kept = scored & ~ignored
        total = np.zeros(n, dtype=np.float64)
        for c, eligible, node_counts in zip(
            prepared.items, prepared.eligible, prepared.node_counts, strict=True
        ):
            codes = table.label_column(c.topology_key)
            if c.topology_key == HOSTNAME:
                weight = math.log(int(kept.sum()) + 2)
                count = node_counts.astype(np.float64)
            else:
                domains = np.unique(codes[kept])
                weight = math.log(len(domains) + 2)
                domain = _domain_counts(table, c.topology_key, eligible, node_counts)
                count = np.where(codes >= 0, domain[np.maximum(codes, 0)], 0.0)
            total += np.where(codes >= 0, count * weight + float(c.max_skew - 1), 0.0)
        raw = np.floor(total + 0.5).astype(np.int64)  # Go's math.Round (half away from zero)
        raw[ignored] = -1
        out: IntArray = raw[rows]
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        valid = scores >= 0
        if not valid.any():
            return np.zeros(len(scores), dtype=np.int64)
        low, high = int(scores[valid].min()), int(scores[valid].max())
        if high == 0:
            out: IntArray = np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
            return out
        normalised = (MAX_NODE_SCORE * (high + low - scores)) // high
        return np.where(valid, normalised, 0).astype(np.int64)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (
            EventRegistration(
                EventKind.ANY_POD | EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.NODE_DELETE
            ),
        )


def new(args: None, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(handle.cache)


ENTRY = PluginEntry(NAME, new, None, PodTopologySpread)
