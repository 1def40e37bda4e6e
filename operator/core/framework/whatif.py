"""What-if Filter runs on one node: preemption's dry runs and the pass with nominated pods.

kube-scheduler answers "would the pod fit this node if ...?" by cloning the node and the cycle
state and calling PreFilter extensions (``AddPod`` / ``RemovePod``). shoal's plugins read the
cache itself (columns, placed sets), so a what-if changes the cache's *accounting* for the
duration (:meth:`ClusterCache.uncount` / :meth:`~ClusterCache.recount`), runs PreFilter afresh
and every Filter on the one row, and puts everything back. The scheduling cycle is synchronous,
so nothing else sees the change. The cost is one PreFilter + Filter per question, paid only
while preemption runs or pods are nominated.

:func:`filter_with_nominated` is kube-scheduler's ``RunFilterPluginsWithNominatedPods``: on a
node with nominated pods of equal or higher priority than the pod, the pod must fit with them
counted *and* without them (the normal pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import BoolArray, ImpliesRequests, Rejection
from shoal.core.framework.outcomes import FilterOutcome, FilterStep
from shoal.core.framework.runtime import Framework
from shoal.core.state.objects import PodInfo
from shoal.core.state.room import Room
from shoal.core.state.status import Code, Status


@dataclass(frozen=True)
class RowVerdict:
    """One node's Filter verdict: fits, or the first rejecting plugin's status (reasons, code)."""

    status: Status
    rejections: Sequence[Rejection] = ()

    @property
    def fits(self) -> bool:
        return self.status.ok


FITS = RowVerdict(Status())


def shared_pre_filter(fw: Framework, pod: PodInfo) -> CycleState | None:
    """One PreFilter state for every what-if about ``pod`` (a preemption dry run asks hundreds),
    when nothing that PreFilter reads changes as victims come and go: the pod asks for nothing a
    plugin evaluates against other pods (pod affinity, spreading, volumes, claims, a gang), and
    no placed pod has required anti-affinity. Otherwise None: each what-if runs PreFilter afresh.
    Which PreFilters read only the pod, the plugins declare (core/framework/contract.py)."""
    if pod.group_key is not None or not fw.reads_only_the_pod(pod):
        return None
    if implied_requests(fw, pod):
        return None
    if next(iter(fw.handle.cache.placed_sets.with_affinity(required_anti_only=True)), None) is not None:
        return None
    state = CycleState()
    _, status = fw.run_pre_filter(state, pod)
    return state if status.ok else None


def filter_row(fw: Framework, pod: PodInfo, row: int, state: CycleState | None = None) -> RowVerdict:
    """PreFilter (fresh state, unless a :func:`shared_pre_filter` ``state`` is given) and every
    Filter on ``row``, against the cache as it is now."""
    if state is None:
        state = CycleState()
        _, status = fw.run_pre_filter(state, pod)
        if not status.ok:
            return RowVerdict(status)
    table = fw.handle.cache.table
    cand: BoolArray = np.zeros(table.n, dtype=bool)
    cand[row] = True
    for plugin in fw.filter:
        if plugin.name in state.skip_filter:
            continue
        try:
            rejections = [r for r in plugin.filter_nodes(state, pod, table, cand) if r.mask[row]]
        except Exception as exc:  # a what-if must not kill the cycle; an Error, as upstream
            return RowVerdict(Status.error(f"{type(exc).__name__}: {exc}", plugin.name))
        if rejections:
            unresolvable = any(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in rejections)
            reasons = tuple(r.reason for r in rejections)
            status = Status.unschedulable(*reasons, plugin=plugin.name, resolvable=not unresolvable)
            return RowVerdict(status, rejections)
    return FITS


def with_nominated(
    fw: Framework,
    pod: PodInfo,
    row: int,
    node: str,
    nominated: Iterable[PodInfo],
    state: CycleState | None = None,
) -> RowVerdict:
    """``filter_row`` with ``nominated`` pods counted on ``node`` for the duration."""
    cache = fw.handle.cache
    added: list[str] = []
    try:
        for other in nominated:
            cache.recount(other, node)
            added.append(other.uid)
        return filter_row(fw, pod, row, state)
    finally:
        for uid in added:
            cache.uncount(uid)


def nominated_for(fw: Framework, pod: PodInfo, node: str) -> list[PodInfo]:
    """Pods nominated to ``node`` that ``pod`` must leave room for: of equal or higher priority,
    not the pod itself, not placed yet (a placed pod is counted already)."""
    cache = fw.handle.cache
    return [
        p
        for p in cache.nominator.pods_on(node)
        if p.uid != pod.uid and p.priority >= pod.priority and cache.placed_node(p.uid) is None
    ]


def _plain(fw: Framework, pod: PodInfo) -> bool:
    """The pod asks for nothing a Filter weighs against other pods but resources: no gang, no pod
    affinity or spreading (its own or the profile's default constraints), no volumes or claims,
    no host ports, no GPU memory."""
    return (
        pod.group_key is None
        and pod.gpu_memory_gb is None
        and not pod.host_ports
        and fw.reads_only_the_pod(pod)
        and not implied_requests(fw, pod)
    )


def implied_requests(fw: Framework, pod: PodInfo) -> bool:
    """A Filter of the profile weighs other pods against ``pod`` for a request the pod does not
    spell out (:class:`ImpliesRequests`: PodTopologySpread's default hard constraints)."""
    return any(isinstance(p, ImpliesRequests) and p.implies_filter_requests(pod) for p in fw.filter)


def _nominated_verdict(fw: Framework, pod: PodInfo, row: int, node: str, others: list[PodInfo]) -> RowVerdict:
    """:func:`with_nominated`, by arithmetic when only resources can differ: the node passed
    every Filter in the normal pass, and when the pod and the nominated pods are plain and the
    profile's Filters are blind to other pods but for resources (``fw.arithmetic_what_ifs``),
    counting the nominated pods can change the resource Filter's verdict only (the same answer,
    without a PreFilter and every Filter again per node: preemption leaves hundreds of nominated
    pods)."""
    fit = fw.resource_filter
    if fit is not None and fw.arithmetic_for(pod) and _plain(fw, pod) and all(_plain(fw, o) for o in others):
        short = Room(fw.handle.cache.table, pod, row, others).short()
        return RowVerdict(Status.unschedulable(*short, plugin=fit.name)) if short else FITS
    return with_nominated(fw, pod, row, node, others)


def _nominated_rows(fw: Framework) -> np.ndarray:
    """Rows of the nodes that have nominated pods (kept until a nomination or the table changes)."""
    cache = fw.handle.cache
    table = cache.table
    key = (cache.nominator.version, table.version, table.n)
    hit = _ROWS.get(id(cache))
    if hit is None or hit[0] is not cache or hit[1] != key:
        found = (table.index.get(node) for node in cache.nominator.node_names())
        rows = np.fromiter((r for r in found if r is not None), dtype=np.int64)
        if len(_ROWS) > 16:
            _ROWS.clear()
        hit = _ROWS[id(cache)] = (cache, key, rows)
    return hit[2]


_ROWS: dict[int, tuple[object, tuple[int, int, int], np.ndarray]] = {}


def filter_with_nominated(fw: Framework, pod: PodInfo, outcome: FilterOutcome) -> None:
    """The first of kube-scheduler's two passes, on the feasible nodes holding nominated pods of
    equal or higher priority: a node where the pod does not fit with them counted is rejected
    (its reasons are that pass's). ``outcome`` is the normal pass; it is updated in place; the
    nodes rejected for the same reasons by the same plugin are one step."""
    cache = fw.handle.cache
    if not len(cache.nominator):
        return
    table = cache.table
    nominated_rows = _nominated_rows(fw)
    rows = nominated_rows[outcome.feasible[nominated_rows]] if nominated_rows.size else nominated_rows
    rejected: dict[tuple[str, tuple[str, ...], Code], list[int]] = {}
    for row in rows.tolist():
        node = table.name(row)
        others = nominated_for(fw, pod, node)
        if not others:
            continue
        verdict = _nominated_verdict(fw, pod, row, node, others)
        if verdict.status.code is Code.ERROR:
            outcome.error = verdict.status
            outcome.feasible = np.zeros(table.n, dtype=bool)
            return
        if verdict.fits:
            continue
        if verdict.rejections:  # a what-if: its plugin's own rejections, on this row
            only: BoolArray = np.zeros(len(outcome.feasible), dtype=bool)
            only[row] = True
            rejections = [Rejection(r.mask & only, r.reason, r.code) for r in verdict.rejections]
            outcome.steps.append(FilterStep(verdict.status.plugin, only, rejections))
        else:
            key = (verdict.status.plugin, verdict.status.reasons, verdict.status.code)
            rejected.setdefault(key, []).append(row)
        outcome.feasible[row] = False
    for (plugin, reasons, code), group in rejected.items():
        mask: BoolArray = np.zeros(len(outcome.feasible), dtype=bool)
        mask[group] = True
        outcome.steps.append(FilterStep(plugin, mask, [Rejection(mask, r, code) for r in reasons]))
