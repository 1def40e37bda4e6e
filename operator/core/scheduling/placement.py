"""The scheduling algorithm: where one pod would go, combining the Framework's extension points.

As kube-scheduler splits it, the Framework runs plugins and this module is the algorithm
(``schedulePod``, ``findNodesThatFitPod``, ``prioritizeNodes``, ``selectHost``)::

    PreFilter -> Filter (every node) -> [none fit: PostFilter] -> sample -> PreScore/Score -> select

:func:`schedule_pod` is pure with respect to the cluster: it assumes nothing, reserves nothing and
writes nothing (PostFilter plugins may act, as in kube-scheduler). The scheduling cycle
(:meth:`Scheduler.place <shoal.core.scheduling.scheduler.Scheduler.place>`), ``Scheduler.explain`` and the
simulator all use it; ``what_if`` is explain's variant: no PostFilter, every feasible node scored,
the first best node picked (no random tie-break), the diagnosis kept for every rejected node, so
asking changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import BoolArray, Diagnosis, IntArray
from shoal.core.framework.outcomes import ScoreOutcome
from shoal.core.framework.runtime import Framework
from shoal.core.framework.whatif import filter_with_nominated
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status

#: below this many feasible nodes every one is scored, whatever percentageOfNodesToScore says
MIN_FEASIBLE_NODES_TO_SCORE = 100


@dataclass
class Placement:
    """The result of PreFilter → Filter → Score → select for one pod (nothing assumed yet)."""

    node: str | None = None
    status: Status = field(default_factory=Status)
    diagnosis: Diagnosis | None = None
    scores: ScoreOutcome | None = None
    #: the node table row of ``node``
    row: int | None = None


def schedule_pod(
    fw: Framework,
    state: CycleState,
    pod: PodInfo,
    *,
    record: bool = False,
    names: bool = False,
    what_if: bool = False,
) -> Placement:
    """Where ``pod`` goes now (kube's schedulePod). ``record`` keeps per-plugin scores, ``names``
    the rejected nodes' names in the diagnosis; ``what_if``: see the module docstring."""
    refused = _refused_before_pre_filter(fw, pod, what_if)
    if refused is not None:
        return refused
    pre, status = fw.run_pre_filter(state, pod)
    if not status.ok:
        return _pre_filter_failed(fw, status)
    outcome = fw.find_feasible(state, pod, pre)  # findNodesThatFitPod: every Filter, every node
    filter_with_nominated(fw, pod, outcome)  # nominated pods of >= priority hold their room
    if outcome.error is not None:
        return Placement(status=outcome.error)
    names = names or what_if
    if not outcome.feasible.any():
        none_fit = outcome.diagnosis(fw.handle.cache.table.names if names else None)
        if not what_if and fw.post_filter:
            none_fit.post_filter_message = fw.run_post_filter(state, pod, none_fit).message
        return Placement(status=Status.unschedulable(none_fit.message()), diagnosis=none_fit)
    diag = outcome.diagnosis(fw.handle.cache.table.names) if what_if else None
    rows = feasible_rows(outcome.feasible) if what_if else _nominated_row(fw, pod, outcome.feasible)
    if rows is None:
        rows = sample_rows(fw, outcome.feasible, outcome.looked_at)
    scores, status = fw.run_score(state, pod, rows, record=record or what_if)
    if not status.ok:
        return Placement(status=status, diagnosis=diag)
    row = select_host(scores, None if what_if else fw.rng)
    return Placement(fw.handle.cache.table.name(row), diagnosis=diag, scores=scores, row=row)


def _nominated_row(fw: Framework, pod: PodInfo, feasible: BoolArray) -> IntArray | None:
    """The node the pod was nominated to (it preempted there), when it fits: kube-scheduler tries
    that node first and takes it without looking further."""
    node = fw.handle.cache.nominator.node_of(pod.uid) or pod.nominated_node
    row = fw.handle.cache.table.index.get(node) if node else None
    if row is None or not feasible[row]:
        return None
    return np.array([row], dtype=np.int64)


def _refused_before_pre_filter(fw: Framework, pod: PodInfo, what_if: bool) -> Placement | None:
    """A pod using a field its profile does not evaluate (core/state/fidelity.py) is refused, naming it;
    a what-if also says when PreEnqueue holds the pod (scheduling gates, a gang below quorum)."""
    status = fw.refusal(pod)
    if status is not None:
        return _pre_filter_failed(fw, status)
    if what_if:
        gate = fw.run_pre_enqueue(pod)
        if not gate.ok:
            return _pre_filter_failed(fw, gate)
    return None


def _pre_filter_failed(fw: Framework, status: Status) -> Placement:
    """PreFilter rejected the pod (the cycle stops, no node is tried) or failed (an Error)."""
    if status.code is Code.ERROR:
        return Placement(status=status)
    diag = Diagnosis(total_nodes=len(fw.handle.cache.table), pre_filter_status=status)
    diag.unschedulable_plugins.add(status.plugin)
    diag.unresolvable = status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Placement(status=status, diagnosis=diag)


def feasible_rows(feasible: BoolArray) -> IntArray:
    rows: IntArray = np.flatnonzero(feasible).astype(np.int64, copy=False)
    return rows


def sample_rows(fw: Framework, feasible: BoolArray, n_all: int | None = None) -> IntArray:
    """Feasible rows to score: all by default; with the profile's percentageOfNodesToScore, as
    kube-scheduler's ``numFeasibleNodesToFind``: that share of the nodes Filter looked at (``n_all``:
    all nodes, or the PreFilter result's; at least 100; every node below 100), the first feasible
    ones from a start that rotates over the rows. The next cycle starts where upstream's would,
    sequentially: at the feasible node after the last one taken (the one that stopped the search)."""
    rows = feasible_rows(feasible)
    n_all = len(fw.handle.cache.table) if n_all is None else n_all
    if fw.percentage >= 100 or n_all < MIN_FEASIBLE_NODES_TO_SCORE:
        return rows
    want = max(MIN_FEASIBLE_NODES_TO_SCORE, (n_all * fw.percentage) // 100)
    if want >= len(rows):
        return rows  # upstream looks at every node and finds fewer: its start stays where it was
    start = fw.next_start % len(feasible)
    order = np.roll(np.arange(len(feasible), dtype=np.int64), -start)
    found = np.flatnonzero(feasible[order])
    fw.next_start = (start + int(found[want])) % len(feasible)
    sampled: IntArray = order[found[:want]]
    return sampled


def select_host(scores: ScoreOutcome, rng: random.Random | None) -> int:
    """The row with the highest total score; ties broken at random (like kube-scheduler), or the
    first of them without ``rng``."""
    total = scores.total
    if len(total) == 1:
        return int(scores.rows[0])
    best = np.flatnonzero(total == total.max())
    pick = best[0] if len(best) == 1 or rng is None else best[rng.randrange(len(best))]
    return int(scores.rows[pick])


def first_reason(failed: Iterable[Placement]) -> tuple[str, set[str]]:
    """Why placements failed, for one message: the first diagnosis (or, before one, the last
    status message) and the plugins that rejected."""
    why = ""
    plugins: set[str] = set()
    for placement in failed:
        if placement.diagnosis is not None:
            why = placement.diagnosis.message()
            plugins |= placement.diagnosis.unschedulable_plugins
            break
        if placement.status.message:
            why = placement.status.message
            plugins.add(placement.status.plugin)
    return why, plugins


@dataclass
class Explanation:
    """``Scheduler.explain``'s answer: a what-if placement, per node (scores, or why rejected)."""

    pod: PodInfo
    profile: str
    best: str | None
    diagnosis: Diagnosis
    scores: dict[str, dict[str, int]]
    totals: dict[str, int]
    #: the pod's gang: what the gang cycle would try (core/gangs.explain_gang), as lines
    gang: list[str] = field(default_factory=list)
    #: node -> plugin -> the raw cost behind a score (NetworkLatency's network cost to the peers)
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    #: node -> plugin -> a note (GPUMemory's source, DynamicResources' per-node allocation detail)
    notes: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, pod: PodInfo, profile: str, placement: Placement, table: NodeTable) -> Explanation:
        """A what-if placement, per node: the feasible nodes' scores, the others' reasons."""
        diag = placement.diagnosis or Diagnosis(total_nodes=len(table), pre_filter_status=placement.status)
        scores: dict[str, dict[str, int]] = {}
        totals: dict[str, int] = {}
        result = placement.scores
        if result is not None:
            for i, row in enumerate(result.rows):
                name = table.name(int(row))
                totals[name] = int(result.total[i])
                scores[name] = {p: int(v[i]) for p, v in result.by_plugin.items()}
        return cls(pod, profile, placement.node, diag, scores, totals)

    @property
    def message(self) -> str:
        if self.best is not None:
            return f"would be placed on {self.best} (score {self.totals[self.best]})"
        return self.diagnosis.message()
