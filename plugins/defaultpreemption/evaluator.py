"""Preemption without I/O: which pods to evict, on which node (kube-scheduler 1.37's DefaultPreemption).

The steps, as upstream's ``Evaluator.Preempt`` (``pkg/scheduler/framework/preemption``):

1. **eligible**: not with ``preemptionPolicy: Never``; not while victims evicted for the pod on
   its nominated node are still terminating (unless that node is now UnschedulableAndUnresolvable);
2. **potential nodes**: those Filter rejected as Unschedulable (not UnschedulableAndUnresolvable);
3. **dry run** on each, from a random offset, until ``num_candidates`` candidates (at least one
   that violates no PDB) are found: :func:`select_victims_on_node` removes every pod of lower
   priority, checks the pod fits (with nominated pods, two passes), then *reprieves* pods, most
   important first (priority, then earlier start), PDB-violating ones before the others, keeping
   each that still lets the pod fit; what is left are the victims;
4. **pick one node** (:func:`pick_one_node`): fewest PDB violations, lowest highest-victim
   priority, smallest sum of priorities, fewest victims, latest start of the highest-priority
   victims, then the first.

Carrying it out (nominating the pod, deleting victims, events) is the plugin's and its executor's
(:class:`PreemptionExecutor`, the kube adapter's ``kube/preemption.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Diagnosis
from shoal.core.framework.runtime import Framework
from shoal.core.framework.whatif import (
    RowVerdict,
    filter_row,
    nominated_for,
    shared_pre_filter,
    with_nominated,
)
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.objects import PREEMPT_NEVER, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins.defaultpreemption import reprieve

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass
class Candidate:
    node: str
    #: most important first
    victims: list[PodInfo]
    pdb_violations: int = 0


def _start(pod: PodInfo) -> float:
    """A pod that has not started counts as starting now: later than any that has."""
    return pod.start_time if pod.start_time is not None else math.inf


def importance(pod: PodInfo) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start (MoreImportantVictim)."""
    return (-pod.priority, _start(pod))


def eligible(fw: Framework, pod: PodInfo, diagnosis: Diagnosis) -> tuple[bool, str]:
    """kube's ``PodEligibleToPreemptOthers``."""
    if pod.preemption_policy == PREEMPT_NEVER:
        return False, "not eligible due to preemptionPolicy=Never."
    cache = fw.handle.cache
    nominated = pod.nominated_node or cache.nominator.node_of(pod.uid)
    row = cache.table.index.get(nominated) if nominated else None
    if row is None:
        return True, ""
    unresolvable = diagnosis.unresolvable_rows
    if unresolvable is not None and row < len(unresolvable) and unresolvable[row]:
        return True, ""  # the nominated node will not do any more: preempt elsewhere
    for other in cache.pods_on(nominated):
        if other.priority < pod.priority and other.terminating and other.preempted:
            return False, "not eligible due to a terminating pod on the nominated node."
    return True, ""


def potential_rows(fw: Framework, diagnosis: Diagnosis) -> list[int]:
    """Rows whose Filter status is Unschedulable (removing pods may help), in table order."""
    if diagnosis.rejected_rows is None or diagnosis.unresolvable_rows is None:
        return []
    table = fw.handle.cache.table
    n = min(len(diagnosis.rejected_rows), table.n)
    mask = diagnosis.rejected_rows[:n] & ~diagnosis.unresolvable_rows[:n] & table.valid[:n]
    return [int(r) for r in np.flatnonzero(mask)]


def fits_with_nominated(fw: Framework, pod: PodInfo, row: int, state: CycleState | None = None) -> RowVerdict:
    """kube's ``RunFilterPluginsWithNominatedPods`` on one node: with the nominated pods of
    equal or higher priority counted, then (if that fits) without them."""
    node = fw.handle.cache.table.name(row)
    others = nominated_for(fw, pod, node)
    if others:
        verdict = with_nominated(fw, pod, row, node, others, state)
        if not verdict.fits:
            return verdict
    return filter_row(fw, pod, row, state)


@dataclass(frozen=True)
class Victim:
    """What is evicted as one: a pod, or every placed member of a gang (a pod whose
    ``scheduling.x-k8s.io/pod-group`` PodGroup exists), never part of it."""

    pods: tuple[PodInfo, ...]
    group: bool = False

    @property
    def priority(self) -> int:
        """A gang counts as its most important member: it goes only if every member may."""
        return max(p.priority for p in self.pods)

    def importance(self) -> tuple[int, int, int, float]:
        """Sort key, most important first, as 1.37's ``MoreImportantVictim``: priority, then a
        group before a pod, then the larger group, then the earlier start."""
        earliest = min(_start(p) for p in self.pods)
        return (-self.priority, -int(self.group), -len(self.pods), earliest)


def victims_on(fw: Framework, node: str, priority: int) -> list[Victim]:
    """The pods on ``node`` of lower priority than ``priority``, gangs whole (their members on
    other nodes included)."""
    cache = fw.handle.cache
    out: list[Victim] = []
    seen: set[str] = set()
    for pod in cache.pods_on(node):
        key = pod.group_key
        if key is not None and key in cache.pod_groups:
            if key in seen:
                continue
            seen.add(key)
            members = tuple(m for m in cache.group_members(key) if cache.placed_node(m.uid))
            victim = Victim(members, group=True)
        else:
            victim = Victim((pod,))
        if victim.priority < priority:
            out.append(victim)
    return out


def split_by_pdb(
    victims: Sequence[Victim], pdbs: Sequence[PDBInfo]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """(victims with the number of their pods whose eviction would take a budget below zero,
    the others), order kept (kube's ``FilterVictimsWithPDBViolation``: budgets are spent in the
    order given; a victim with one violating pod is violating as a whole)."""
    allowed = [p.disruptions_allowed for p in pdbs]

    def violates(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    others: list[Victim] = []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violates(pod))
        if count:
            violating.append((victim, count))
        else:
            others.append(victim)
    return violating, others


class Evicted:
    """Victims counted off their nodes for a what-if, put back by :meth:`restore`."""

    def __init__(self, fw: Framework) -> None:
        self.cache = fw.handle.cache
        self.nodes: dict[str, str] = {}
        self.pods: dict[str, PodInfo] = {}

    def remove(self, victim: Victim) -> None:
        for pod in victim.pods:
            node = self.cache.uncount(pod.uid)
            if node is not None:
                self.nodes[pod.uid], self.pods[pod.uid] = node, pod

    def add(self, victim: Victim) -> None:
        for pod in victim.pods:
            node = self.nodes.pop(pod.uid, None)
            if node is not None:
                self.cache.recount(self.pods.pop(pod.uid), node)

    def restore(self) -> None:
        for uid, node in list(self.nodes.items()):
            self.cache.recount(self.pods[uid], node)
        self.nodes.clear()
        self.pods.clear()


def select_victims_on_node(
    fw: Framework,
    pod: PodInfo,
    row: int,
    pdbs: Sequence[PDBInfo],
    state: CycleState | None = None,
    resources_only: bool = False,
) -> tuple[list[PodInfo], int, Status]:
    """The fewest pods to evict for ``pod`` to fit on ``row``: (victims, PDB violations, status).
    ``resources_only``: only the resource Filter rejected the row (see reprieve.py)."""
    potential = victims_on(fw, fw.handle.cache.table.name(row), pod.priority)
    if not potential:
        return [], 0, Status.unschedulable(NO_VICTIMS, resolvable=False)
    if resources_only and state is not None:
        node = fw.handle.cache.table.name(row)
        here = [p for v in potential for p in v.pods if fw.handle.cache.placed_node(p.uid) == node]
        if reprieve.applies(fw, pod, here):
            return _select_by_arithmetic(fw, pod, row, node, potential, pdbs)
    evicted = Evicted(fw)
    try:
        for victim in potential:
            evicted.remove(victim)
        verdict = fits_with_nominated(fw, pod, row, state)
        if not verdict.fits:
            return [], 0, verdict.status
        potential.sort(key=Victim.importance)
        violating, others = split_by_pdb(potential, pdbs)
        victims: list[Victim] = []
        node = fw.handle.cache.table.name(row)
        mine = [(v, [p for p in v.pods if evicted.nodes.get(p.uid) == node]) for v in potential]
        fast = None
        if state is not None and reprieve.applies(fw, pod, [p for _, ps in mine for p in ps]):
            fast = reprieve.reprieve_by_resources(fw, pod, row, mine, nominated_for(fw, pod, node))

        def spare(victim: Victim) -> bool:
            if fast is not None:  # only resources can change: arithmetic (reprieve.py)
                if fast(victim):
                    evicted.add(victim)
                    return True
                victims.append(victim)
                return False
            evicted.add(victim)
            if fits_with_nominated(fw, pod, row, state).fits:
                return True
            evicted.remove(victim)
            victims.append(victim)
            return False

        violations = sum(count for v, count in violating if not spare(v))
        for victim in others:
            spare(victim)
        pods = sorted((p for v in victims for p in v.pods), key=importance)
        return pods, violations, Status()
    finally:
        evicted.restore()


def _select_by_arithmetic(
    fw: Framework, pod: PodInfo, row: int, node: str, potential: list[Victim], pdbs: Sequence[PDBInfo]
) -> tuple[list[PodInfo], int, Status]:
    """select_victims_on_node's steps with resources counted, not Filters run: the same victims."""
    cache = fw.handle.cache
    potential.sort(key=Victim.importance)
    violating, others = split_by_pdb(potential, pdbs)
    ordered = [v for v, _ in violating] + others
    counts = [n for _, n in violating] + [0] * len(others)
    on_node = [[p for p in v.pods if cache.placed_node(p.uid) == node] for v in ordered]
    short, put_back = reprieve.fits_after_evictions(fw, pod, row, on_node, nominated_for(fw, pod, node))
    if short:
        return [], 0, reprieve.short_of(fw, short)
    victims: list[Victim] = []
    violations = 0
    for i, victim in enumerate(ordered):
        if not put_back(i):
            victims.append(victim)
            violations += counts[i]
    pods = sorted((p for v in victims for p in v.pods), key=importance)
    return pods, violations, Status()


def _plain_on_node(
    fw: Framework, pod: PodInfo, row: int, node: str, plain: reprieve.PlainRun
) -> tuple[list[PodInfo], int, Status] | None:
    """select_victims_on_node by reprieve.select_plain where it applies (None: it does not)."""
    quick = reprieve.select_plain(fw, pod, row, node, plain, nominated_for(fw, pod, node))
    if quick is None:
        return None
    victims, short = quick
    if short:
        return [], 0, reprieve.short_of(fw, short)
    return victims, 0, Status()


def num_candidates(n: int, percentage: int, absolute: int) -> int:
    """kube's ``calculateNumCandidates``."""
    return min(max(n * percentage // 100, absolute), n)


def dry_run(
    fw: Framework,
    pod: PodInfo,
    rows: Sequence[int],
    pdbs: Sequence[PDBInfo],
    offset: int,
    wanted: int,
    diagnosis: Diagnosis | None = None,
) -> tuple[list[Candidate], dict[str, Status]]:
    """Candidates (those violating no PDB first) and the status of each node that is none."""
    table = fw.handle.cache.table
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    state = shared_pre_filter(fw, pod)
    by_resources = reprieve.resources_only_rows(fw, diagnosis) if diagnosis is not None else None
    plain = reprieve.plain_run(fw, pod, pdbs) if state is not None and by_resources is not None else None
    for i in range(len(rows)):
        row = rows[(offset + i) % len(rows)]
        node = table.name(row)
        arithmetic = by_resources is not None and row < len(by_resources) and bool(by_resources[row])
        result = _plain_on_node(fw, pod, row, node, plain) if arithmetic and plain is not None else None
        if result is None:
            result = select_victims_on_node(fw, pod, row, pdbs, state, arithmetic)
        victims, violations, status = result
        if status.ok and victims:
            found = violating if violations else clean
            if len(found) < wanted:  # each list holds ``wanted`` at most, as upstream's
                found.append(Candidate(node, victims, violations))
            if clean and len(clean) + len(violating) >= wanted:
                break
            continue
        if status.ok:
            status = Status.error(f'expected at least one victim pod on node "{node}"')
        statuses[node] = status
    return clean + violating, statuses


def _earliest_top_start(c: Candidate) -> float:
    top = c.victims[0].priority
    return min(_start(v) for v in c.victims if v.priority == top)


#: pickOneNodeForPreemption's criteria, in order; each is maximised
_CRITERIA: tuple[Callable[[Candidate], float], ...] = (
    lambda c: -c.pdb_violations,
    lambda c: -c.victims[0].priority,
    lambda c: -sum(v.priority + 2**31 for v in c.victims),
    lambda c: -len(c.victims),
    _earliest_top_start,
)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    """kube's ``pickOneNodeForPreemption`` (victims ordered most important first)."""
    left = list(candidates)
    if len(left) <= 1:
        return left[0] if left else None
    for criterion in _CRITERIA:
        scores = [criterion(c) for c in left]
        best = max(scores)
        left = [c for c, s in zip(left, scores, strict=True) if s == best]
        if len(left) == 1:
            break
    return left[0]


def fit_error(total: int, statuses: dict[str, Status]) -> str:
    """``0/N nodes are available: ...`` over the dry run's statuses; the other nodes are
    "Preemption is not helpful for scheduling" (as upstream's FitError)."""
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if (rest := total - len(statuses)) > 0:
        counts[NOT_HELPFUL] = counts.get(NOT_HELPFUL, 0) + rest
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return (
        f"0/{total} nodes are available: {', '.join(parts)}." if parts else f"0/{total} nodes are available."
    )


def errors_of(statuses: dict[str, Status]) -> list[str]:
    return [s.message for s in statuses.values() if s.code is Code.ERROR]
