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

* Default constraints (``PodTopologySpreadArgs``): a pod without constraints of its own gets the
  profile's ``defaultConstraints`` (``defaultingType: List``) or the system defaults
  (``System``, the default: ScheduleAnyway over ``kubernetes.io/hostname`` with maxSkew 3 and
  ``topology.kubernetes.io/zone`` with maxSkew 5), all with one selector made from the Services,
  ReplicationControllers, ReplicaSets and StatefulSets that select it
  (core/state/spreadselectors.py); nothing selects it: no constraints. With the system defaults a
  node missing one of the keys is still scored (on the keys it has), so nodes without a zone
  label still spread by hostname; otherwise such a node scores 0. A default constraint's
  ``matchLabelKeys`` is ignored, as upstream (the deduced selector replaces the merged one).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

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
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import SelectorError, SpreadConstraint, check_label_key
from shoal.core.state.status import SUCCESS, Code, Status
from shoal.plugins import nodeaffinity, tainttoleration

NAME = "PodTopologySpread"
FILTER_KEY = f"PreFilter{NAME}"
SCORE_KEY = f"PreScore{NAME}"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"


class DefaultConstraint(ArgsModel):
    """One of ``defaultConstraints``: a topologySpreadConstraint without a selector (the selector
    is deduced for each pod from the objects that select it)."""

    max_skew: int = Field(gt=0)
    topology_key: str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    #: as upstream's args, 0 is accepted (it acts as 1)
    min_domains: int = Field(default=1, ge=0)
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"
    #: accepted, and ignored as upstream does for default constraints
    match_label_keys: tuple[str, ...] = ()
    label_selector: Any = None

    @field_validator("topology_key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not value:
            raise ValueError("can not be empty")
        try:
            check_label_key(value)
        except SelectorError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("label_selector")
    @classmethod
    def _no_selector(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("constraint must not define a selector, as they are deduced for each pod")
        return value

    def constraint(self) -> SpreadConstraint:
        """As a pod's constraint, without a selector yet."""
        return SpreadConstraint(
            max_skew=self.max_skew,
            topology_key=self.topology_key,
            when_unsatisfiable=self.when_unsatisfiable,
            selector=None,
            min_domains=self.min_domains,
            node_affinity_policy=self.node_affinity_policy,
            node_taints_policy=self.node_taints_policy,
        )


class Args(ArgsModel):
    """kube-scheduler's ``PodTopologySpreadArgs``."""

    #: ``System``: kube-scheduler's built-in default constraints; ``List``: ``defaultConstraints``
    defaulting_type: Literal["System", "List"] = "System"
    default_constraints: tuple[DefaultConstraint, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Args:
        if self.defaulting_type == "System" and self.default_constraints:
            raise ValueError(
                "defaultingType: System cannot be used with defaultConstraints (use List to list them)"
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f"defaultConstraints[{i}]: duplicate {{{pair[0]}, {pair[1]}}}")
            seen.add(pair)
        return self


#: kube-scheduler's system defaults (podtopologyspread/plugin.go ``systemDefaultConstraints``)
SYSTEM_DEFAULT_CONSTRAINTS: tuple[SpreadConstraint, ...] = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, selector=None),
    SpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, selector=None),
)


def skew_ok(domain_count: int, self_match: int, min_count: int, max_skew: int) -> bool:
    """The pure check behind Filter."""
    return domain_count + self_match - min_count <= max_skew


def score_for_count(count: float, max_skew: int, weight: float) -> float:
    return count * weight + float(max_skew - 1)


def _domain_counts(table: NodeTable, key: str, eligible: BoolArray, node_counts: IntArray) -> IntArray:
    """Matching pods per label value code of ``key``, over the eligible rows."""
    codes = table.label_column(key)
    size = len(table.label_values(key)) + 1
    rows = eligible & (codes >= 0)  # rows without the key count for no domain
    out: IntArray = np.bincount(codes[rows], weights=node_counts[rows], minlength=size).astype(np.int64)
    return out


@dataclass
class _Constraints:
    items: tuple[SpreadConstraint, ...]
    #: rows eligible for each constraint (all keys present, inclusion policies passed)
    eligible: list[BoolArray]
    #: matching pods per row, for each constraint
    node_counts: list[IntArray]
    #: a node must carry every constraint's key to be counted and scored (False only for the
    #: system defaults: a node without a zone label still spreads by hostname)
    require_all: bool = True


class PodTopologySpread:
    name = NAME
    #: Filter and Score read what PreFilter and PreScore computed (profile validation checks it)
    needs_pre_filter = True
    needs_pre_score = True

    def __init__(self, cache: ClusterCache, args: Args | None = None) -> None:
        self.cache = cache
        args = args if args is not None else Args()
        self.system_defaulted = args.defaulting_type == "System"
        self.defaults: tuple[SpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS
            if self.system_defaulted
            else tuple(c.constraint() for c in args.default_constraints)
        )

    def constraints(self, pod: PodInfo, action: str) -> tuple[SpreadConstraint, ...]:
        """The pod's constraints with this ``whenUnsatisfiable``: its own, or (it has none) the
        default ones with the selector of the objects that select it (none: no constraints)."""
        if pod.topology_spread:
            return tuple(c for c in pod.topology_spread if c.when_unsatisfiable == action)
        defaults = [c for c in self.defaults if c.when_unsatisfiable == action]
        if not defaults:
            return ()
        selector = self.cache.spread_selectors.default_selector(pod.namespace, pod.labels, pod.controller)
        if selector is None:
            return ()
        return tuple(dataclasses.replace(c, selector=selector) for c in defaults)

    def implies_filter_requests(self, pod: PodInfo) -> bool:
        """Default hard (DoNotSchedule) constraints apply to the pod: Filter counts other pods."""
        return not pod.topology_spread and bool(self.constraints(pod, DO_NOT_SCHEDULE))

    def _prepare(
        self, pod: PodInfo, items: tuple[SpreadConstraint, ...], table: NodeTable, require_all: bool = True
    ) -> _Constraints:
        n = table.n
        has_all = table.valid[:n].copy()
        if require_all:
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
        return _Constraints(items, eligible, counts, require_all)

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
        hard = self.constraints(pod, DO_NOT_SCHEDULE)
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
        if not len(table):
            return Status.skip()
        soft = self.constraints(pod, SCHEDULE_ANYWAY)
        if not soft:
            return Status.skip()
        # as upstream: only the system defaults score a node that lacks one of the keys
        require_all = bool(pod.topology_spread) or not self.system_defaulted
        state.write(SCORE_KEY, self._prepare(pod, soft, table, require_all))
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        prepared: _Constraints = state.require(SCORE_KEY)
        n = table.n
        scored = np.zeros(n, dtype=bool)
        scored[rows] = True
        ignored = np.zeros(n, dtype=bool)  # scored nodes missing a key: score 0 after normalising
        for c in prepared.items if prepared.require_all else ():
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


def new(args: Args | None, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(handle.cache, args)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(Evaluates(fidelity.SPREAD_HARD), Evaluates(fidelity.SPREAD_SOFT, "score")),
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, PodTopologySpread, contract=CONTRACT)
