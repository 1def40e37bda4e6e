"""The gang cycle: a PodGroup's queued members placed in one scheduling cycle, all or nothing.

Every queued member is placed against the cache, one after the other, each assumed, reserved and
sent to Permit, where members wait at their gates until the quorum is reached and the last one opens
them all. If fewer than ``minMember`` fit, everything placed is released before the cycle ends: a
gang that does not fit holds nothing, two gangs can never hold half the cluster each, and small pods
behind it are scheduled normally.

Where the members go is asked first of the profile's gang placer (a Filter plugin implementing
:class:`~shoal.core.framework.interfaces.GangPlacementPlugin`): it returns *trials*, node subsets such
as "the fewest nodes of rack r3", "all of rack r3", "zone a". The members are placed for real inside
each trial in turn (the trial is in each member's cycle state, the placer's Filter rejects the nodes
outside it) until the quorum fits; a trial that fails is released whole before the next. Without a
placer, or for an unconstrained gang, there is one trial: anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from shoal.core.framework.gangplan import (
    GANG_DOMAIN_STATE,
    GangPlan,
    GangTrial,
    PlacementProgress,
    rows_within,
)
from shoal.core.framework.interfaces import BoolArray
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.queue import QueuedPodInfo
from shoal.core.scheduling.schedule_one import (
    PLACEMENT_NOTE,
    Assumed,
    Cycle,
    Placement,
    PodCycles,
    error_message,
    first_reason,
)
from shoal.core.state.cache import ClusterCache
from shoal.core.state.fidelity import GANG_TOPOLOGY
from shoal.core.state.grouplinks import NATIVE_GROUP_API
from shoal.core.state.hierarchy import REASON_COMPOSITE_ERROR, TreeNode, min_children, ready_count
from shoal.core.state.objects import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    PodGroupInfo,
    PodInfo,
)
from shoal.core.state.status import Code, Status
from shoal.core.state.workloads import REASON_SCHEDULER_ERROR

_ANYWHERE = GangPlan((GangTrial(None, None, ""),))


@dataclass
class _Attempt:
    trial: GangTrial
    placed: list[Assumed] = field(default_factory=list)
    failed: list[tuple[QueuedPodInfo, Placement]] = field(default_factory=list)
    #: members not tried: a PlacementFeasible plugin ended the trial (``stopped`` says why)
    skipped: list[QueuedPodInfo] = field(default_factory=list)
    stopped: Status | None = None


class GangCycles:
    """Gangs' cycles, built on the steps of the pods' own (:class:`PodCycles`)."""

    def __init__(self, cycles: PodCycles) -> None:
        self.cycles = cycles
        #: groups whose last cycle the gang plugin refused with an error (kube-scheduler 1.38's
        #: runtime validation: their condition says ``PodGroupError`` there)
        self.refused_groups: set[str] = set()
        #: each CompositePodGroup's last result (held?, why not, the condition's reason if not
        #: ``Unschedulable``): its status
        self.composite_outcomes: dict[str, tuple[bool, str, str]] = {}

    def schedule(self, fw: Framework, first: QueuedPodInfo, group: PodGroupInfo, cycle: Cycle) -> None:
        """A gang is one cycle with N members: all of the quorum go to binding, or none."""
        if group.parent:  # a CompositePodGroup tree: the whole root in one cycle
            TreeCycle(self, fw, cycle).run(first, group)
            return
        began = time.perf_counter()
        cache = self.cycles.cache
        members = [first, *self.cycles.queue.pop_group(group.key, exclude=first.uid)]
        cycle.add_members(members[1:])
        members = [m for m in members if m.uid in cache.pods and not cache.placed_node(m.uid)]
        members.sort(key=lambda m: fw.sort_key(m.pod, m.enqueued))
        checked = fw.check_group(group, [m.pod for m in members])
        self._refused(group.key, checked)
        if not checked.ok:  # the group itself is refused: every pending member, nothing placed
            for m in members:
                self.cycles.failed(fw, m, Placement(status=checked, diagnosis=None), began)
            return
        _, already = cache.group_counts(group.key)
        need = max(group.min_member - already, 0)
        plan = _plan(fw, group, members, need)
        if not plan.trials:
            self._refuse(fw, group, members, need, plan.failure, began)
            return
        attempt = _Attempt(plan.trials[0])
        for trial in plan.trials:
            attempt = self._place(fw, cycle, group, members, trial)
            if _quorum(fw, attempt, need):
                self._commit(fw, group, attempt, began)
                return
            for p in reversed(attempt.placed):
                cycle.release(fw, p)
            if _error(attempt) is not None:
                break  # a plugin failed, not the cluster: no other domain will do better
        self._failed(fw, group, attempt, need, began, len(plan.trials))

    def _refused(self, key: str, checked: Status) -> None:
        if checked.code is Code.ERROR:
            self.refused_groups.add(key)
        else:
            self.refused_groups.discard(key)

    def _place(
        self,
        fw: Framework,
        cycle: Cycle,
        group: PodGroupInfo,
        members: Sequence[QueuedPodInfo],
        trial: GangTrial,
    ) -> _Attempt:
        """Every member placed for real inside ``trial``, one after another, each assumed; after
        each, the profile's PlacementFeasible plugins may end the trial (the gang cannot hold
        there: the members not tried yet are skipped)."""
        attempt = _Attempt(trial)
        _, already = self.cycles.cache.group_counts(group.key)  # placed before this cycle
        for i, m in enumerate(members):
            if i and fw.placement_feasible:
                progress = PlacementProgress(
                    already + len(attempt.placed), len(attempt.failed), len(members) - i
                )
                verdict = fw.run_placement_feasible(group, progress)
                if not verdict.ok and not verdict.is_wait:
                    attempt.stopped = verdict
                    attempt.skipped = list(members[i:])
                    break
            state = fw.new_cycle_state()
            if trial.rows is not None:
                state.write(GANG_DOMAIN_STATE, trial)
            if trial.note:
                state.write(PLACEMENT_NOTE, trial.note)
            placement = self.cycles.place(fw, state, m.pod)
            if placement.node is None:
                attempt.failed.append((m, placement))
                continue
            p, status = cycle.assume(fw, m, state, placement.node)
            if not status.ok and not status.is_wait:
                cycle.release(fw, p)
                attempt.failed.append((m, Placement(status=status, diagnosis=None)))
                continue
            attempt.placed.append(p)
        return attempt

    def _commit(self, fw: Framework, group: PodGroupInfo, attempt: _Attempt, began: float) -> None:
        if attempt.trial.rows is not None and fw.gang_placer is not None and attempt.placed:
            table = self.cycles.cache.table
            rows = [table.index[p.node] for p in attempt.placed if p.node in table.index]
            note = fw.gang_placer.describe(group, attempt.trial, rows)
            for p in attempt.placed:
                p.state.write(PLACEMENT_NOTE, note)
        for p in attempt.placed:
            self.cycles.start_binding(fw, p, began)
        for m, placement in attempt.failed:  # members beyond the quorum that fit nowhere: retried alone
            self.cycles.failed(fw, m, placement, began)
        if attempt.skipped and attempt.stopped is not None:  # not tried: retried alone
            stopped = Placement(status=attempt.stopped, diagnosis=None)
            for m in attempt.skipped:
                self.cycles.failed(fw, m, stopped, began)

    def _refuse(
        self,
        fw: Framework,
        group: PodGroupInfo,
        members: list[QueuedPodInfo],
        need: int,
        why: str,
        began: float,
    ) -> None:
        """No trial at all: a required level no domain can hold now (the gang may preempt inside
        one domain: ``Framework.run_gang_post_filter``), or a constraint the profile does not
        evaluate (it may not)."""
        placer = fw.gang_placer
        preempted = fw.run_gang_post_filter(group, [m.pod for m in members], need) if placer else ""
        message = f"pod group {group.key}: {why}; nothing was reserved.{preempted}"
        duration = time.perf_counter() - began
        rejecting = {placer.name} if placer is not None else {name for name, _ in _placers(fw)}
        for m in members:
            self.cycles.unschedulable(fw, m, rejecting, message, duration)

    def _failed(
        self, fw: Framework, group: PodGroupInfo, attempt: _Attempt, need: int, began: float, trials: int
    ) -> None:
        """The gang's quorum did not fit (everything it assumed is released): say why, requeue all."""
        duration = time.perf_counter() - began
        members = [p.qpi for p in attempt.placed] + [m for m, _ in attempt.failed] + attempt.skipped
        error = _error(attempt)
        if error is not None:  # a plugin failed, not the cluster: the whole gang retries with backoff
            message = f"{error_message(error)} (pod group {group.key}; nothing was reserved)"
            for m in members:
                self.cycles.retry_after_error(fw, m, message, duration)
            return
        why, plugins = first_reason(pl for _, pl in attempt.failed)
        if attempt.stopped is not None:
            why = f"{why} {attempt.stopped.message}".strip()
            plugins |= {attempt.stopped.plugin} if attempt.stopped.plugin else set()
        # the gang may preempt as one (a GangPostFilterPlugin): " preemption: ..." or ""
        preempted = fw.run_gang_post_filter(group, [m.pod for m in members], need)
        where = ""
        if attempt.trial.domain is not None:
            tried = f"{trials} placement(s) tried, the last " if trials > 1 else ""
            where = f" ({tried}{attempt.trial.note})"
        message = (
            f"{why} pod group {group.key}: only {len(attempt.placed)} of the {need} pending member(s) "
            f"it needs fit{where} ({group.min_field} {group.min_member}); nothing was reserved.{preempted}"
        ).strip()
        for m in members:
            self.cycles.unschedulable(fw, m, plugins or {fw.gang_plugin_name}, message, duration)


@dataclass
class _TreeOutcome:
    """What a tree's placement holds so far: kept placements, members beyond a quorum that fit
    nowhere, why each group failed, and the first plugin error (which ends the cycle)."""

    placed: list[Assumed] = field(default_factory=list)
    extra: list[tuple[QueuedPodInfo, Placement]] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    rejecting: set[str] = field(default_factory=set)
    error: Status | None = None
    #: each CompositePodGroup's result (key -> held?), for its status
    held: dict[str, bool] = field(default_factory=dict)


class TreeCycle:
    """A CompositePodGroup tree (``shoal.core.state.hierarchy``) placed in one cycle, as
    kube-scheduler 1.38's pod-group cycle does, all or nothing at every level.

    The tree is walked from its root: a level with a topology key is tried in one domain of it at
    a time (inside its parent's domain; the placer's domains, least room first), and inside it the
    children in order, each kept once it holds (a PodGroup when ``minCount`` of its pods are
    placed, a CompositePodGroup when ``minGroupCount`` of its children hold); a level that does
    not hold releases everything under it and tries its next domain. Under a level that holds, a
    child that failed keeps its own failure and its members are requeued while its siblings bind.
    Whole-tree preemption is not tried (its members' messages say so)."""

    def __init__(self, gangs: GangCycles, fw: Framework, cycle: Cycle) -> None:
        self.gangs, self.fw, self.cycle = gangs, fw, cycle
        self.cycles = gangs.cycles
        self.cache = gangs.cycles.cache
        self.began = time.perf_counter()
        self.pending: dict[str, list[QueuedPodInfo]] = {}
        self.out = _TreeOutcome()
        self.tree: TreeNode | None = None

    def run(self, first: QueuedPodInfo, group: PodGroupInfo) -> None:
        tree, problem, _ = self.cache.group_tree(group)
        leaves = list(tree.leaves()) if tree is not None else [group]
        queued = [first]
        for leaf in leaves:
            queued.extend(self.cycles.queue.pop_group(leaf.key, exclude=first.uid))
        self.cycle.add_members(queued[1:])
        members = [m for m in queued if m.uid in self.cache.pods and not self.cache.placed_node(m.uid)]
        members.sort(key=lambda m: self.fw.sort_key(m.pod, m.enqueued))
        for m in members:
            self.pending.setdefault(m.pod.group_key or "", []).append(m)
        gang_plugin = self.fw.gang_plugin_name
        if tree is None or tree.composite is None:  # gone since PreEnqueue let it in: wait again
            why = f"{named_group(group)}: {problem or 'no longer in a CompositePodGroup tree'}"
            self._refuse(members, Status.unschedulable(why, plugin=gang_plugin, resolvable=False))
            return
        self.tree = tree
        if problem:  # kube-scheduler's runtime validation: the whole tree fails, retried with backoff
            for node in tree.nodes():
                if node.composite is not None:
                    self.gangs.composite_outcomes[node.key] = (False, problem, REASON_COMPOSITE_ERROR)
                elif node.group is not None:
                    self.gangs.refused_groups.add(node.group.key)
            self._refuse(members, Status.error(f"{tree.composite.named()}: {problem}", plugin=gang_plugin))
            return
        for leaf in leaves:
            checked = self.fw.check_group(leaf, [m.pod for m in self.pending.get(leaf.key, ())])
            self.gangs._refused(leaf.key, checked)
            if not checked.ok:  # the tree is refused whole (kube-scheduler's runtime validation)
                self._refuse(members, checked)
                return
        held, why = self._place(tree, None, "")
        root = tree.composite
        self._record(tree, held, why)
        if self.out.error is not None:
            self._release()
            message = f"{error_message(self.out.error)} ({root.named()}; nothing was reserved)"
            for m in members:
                self.cycles.retry_after_error(self.fw, m, message, time.perf_counter() - self.began)
            return
        if not held:
            self._release()
            self._requeue(members, f"{why}; nothing was reserved (whole-tree preemption is not tried).")
            return
        for p in self.out.placed:
            self.cycles.start_binding(self.fw, p, self.began)
        for m, placement in self.out.extra:  # beyond their group's quorum: retried alone
            self.cycles.failed(self.fw, m, placement, self.began)
        done = {p.qpi.uid for p in self.out.placed} | {m.uid for m, _ in self.out.extra}
        self._requeue([m for m in members if m.uid not in done], "")

    # -- one level ---------------------------------------------------------------------------
    def _place(self, node: TreeNode, rows: BoolArray | None, context: str) -> tuple[bool, str]:
        """Place ``node``'s subtree inside ``rows`` (None: anywhere); whether it holds, and why not."""
        if node.group is not None:
            return self._place_group(node.group, rows, context)
        assert node.composite is not None
        need = min_children(node)
        trials, failure = self._level_trials(node, rows)
        if not trials:
            self.out.failures[node.key] = failure
            return False, failure
        why = ""
        for trial in trials:
            kept, extra = len(self.out.placed), len(self.out.extra)
            note = f"{node.composite.named()} {trial.note}" if trial.note else ""
            inner = f"{context}; {note}" if context and note else context or note
            held, reasons = 0, []
            for i, child in enumerate(node.children):
                ok, child_why = self._place(child, trial.rows, inner)
                held += ok
                if not ok:
                    reasons.append(child_why)
                if self.out.error is not None or held + len(node.children) - i - 1 < need:
                    break  # a plugin failed, or the rest cannot make up the minimum
            if held >= need:
                self.out.failures.pop(node.key, None)
                return True, ""
            for p in reversed(self.out.placed[kept:]):
                self.cycle.release(self.fw, p)
            del self.out.placed[kept:], self.out.extra[extra:]
            where = f" {trial.note}" if trial.note else ""
            field_name = "minGroupCount" if node.composite.gang else "basic: one"
            why = (
                f"{node.composite.named()}: {held} of the {need} child groups it needs ({field_name}) "
                f"fit{where}" + (f": {reasons[0]}" if reasons else "")
            )
            if self.out.error is not None:
                break
        self.out.failures[node.key] = why
        return False, why

    def _place_group(self, group: PodGroupInfo, rows: BoolArray | None, context: str) -> tuple[bool, str]:
        """A PodGroup of the tree: its pending members inside ``rows``, in its own domains."""
        members = self.pending.get(group.key, [])
        _, already = self.cache.group_counts(group.key)
        need = max((group.min_member if group.gang else 1) - already, 0)
        if need == 0 and not members:
            self.out.failures.pop(group.key, None)
            return True, ""
        if len(members) < need:
            have = len(members) + already
            why = f"pod group {group.key} has {have} of the {group.min_member} pods it needs"
            self.out.failures[group.key] = why
            return False, why
        trials, failure = self._group_trials(group, members, rows, need)
        if not trials:
            self.out.failures[group.key] = failure
            return False, failure
        attempt = _Attempt(trials[0])
        for trial in trials:
            attempt = self.gangs._place(self.fw, self.cycle, group, members, trial)
            if _quorum(self.fw, attempt, need):
                self._note(group, attempt, context)
                self.out.failures.pop(group.key, None)
                self.out.placed.extend(attempt.placed)
                self.out.extra.extend(attempt.failed)
                return True, ""
            for p in reversed(attempt.placed):
                self.cycle.release(self.fw, p)
            error = _error(attempt)
            if error is not None:
                self.out.error = error
                break
        reason, plugins = first_reason(pl for _, pl in attempt.failed)
        if attempt.stopped is not None:
            reason = f"{reason} {attempt.stopped.message}".strip()
        self.out.rejecting |= plugins
        where = f" ({attempt.trial.note})" if attempt.trial.note else ""
        why = (
            f"{reason} pod group {group.key}: only {len(attempt.placed)} of the {need} pending member(s) "
            f"it needs fit{where} ({group.min_field} {group.min_member})"
        ).strip()
        self.out.failures[group.key] = why
        return False, why

    def _group_trials(
        self, group: PodGroupInfo, members: list[QueuedPodInfo], rows: BoolArray | None, need: int
    ) -> tuple[list[GangTrial], str]:
        placer = self.fw.gang_placer
        if placer is None and group.topology_levels:
            return [], _unevaluated(self.fw, group)
        if placer is None or not any(p.constrained(group) for p in self.fw.gang_placers):
            return [GangTrial(None, rows, "")], ""
        feasible = _limit(_feasible_pod(self.fw, members[0].pod), rows)
        plan = self.fw.gang_placements(group, [m.pod for m in members], feasible, need)
        trials = [GangTrial(t.domain, rows_within(t.rows, rows), t.note) for t in plan.trials]
        return trials, plan.failure

    def _level_trials(self, node: TreeNode, rows: BoolArray | None) -> tuple[list[GangTrial], str]:
        """The domains of a CompositePodGroup's topology key to try its subtree in, inside ``rows``."""
        assert node.composite is not None
        key = node.composite.topology_required
        if key is None:
            return [GangTrial(None, rows, "")], ""
        placer = self.fw.gang_placer
        if placer is None:
            return [], (
                f"{node.composite.named()} uses spec.schedulingConstraints.topology, which this profile "
                "does not evaluate"
            )
        members = [m for leaf in node.leaves() for m in self.pending.get(leaf.key, ())]
        if not members:
            return [GangTrial(None, rows, "")], ""
        table = self.cache.table
        # every domain inside ``rows`` (its children decide, each with its own Filters): only
        # the schedulable nodes, as room for the smallest member, order them and rule some out
        feasible = _limit(table.valid_rows() & ~table.unschedulable[: table.size], rows)
        placed = [
            table.index[n]
            for leaf in node.leaves()
            for m in self.cache.group_members(leaf.key)
            if (n := self.cache.placed_node(m.uid)) is not None and n in table.index
        ]
        need = _need(node, self.cache)
        plan = placer.level_placements(key, [m.pod for m in members], feasible, need, placed)
        if not plan.trials:
            return [], f"{node.composite.named()}: {plan.failure}"
        return [GangTrial(t.domain, rows_within(t.rows, rows), t.note) for t in plan.trials], ""

    # -- the end -----------------------------------------------------------------------------
    def _note(self, group: PodGroupInfo, attempt: _Attempt, context: str) -> None:
        """What the members' Scheduled events say: their group's domain, and the tree's."""
        placer = self.fw.gang_placer
        note = ""
        if attempt.trial.rows is not None and placer is not None and attempt.placed:
            table = self.cache.table
            rows = [table.index[p.node] for p in attempt.placed if p.node in table.index]
            note = placer.describe(group, attempt.trial, rows) if attempt.trial.domain else ""
        note = "; ".join(n for n in (note, context) if n)
        if note:
            for p in attempt.placed:
                p.state.write(PLACEMENT_NOTE, note)

    def _record(self, tree: TreeNode, held: bool, why: str) -> None:
        """Each CompositePodGroup's result, for its status: under a root that does not hold, none does."""
        for node in tree.nodes():
            if node.composite is not None:
                ok = held and node.key not in self.out.failures
                self.out.held[node.key] = ok
                message = "" if ok else self.out.failures.get(node.key) or why
                reason = REASON_SCHEDULER_ERROR if self.out.error is not None else ""
                self.gangs.composite_outcomes[node.key] = (ok, message, reason)

    def _release(self) -> None:
        for p in reversed(self.out.placed):
            self.cycle.release(self.fw, p)
        self.out.placed.clear()
        self.out.extra.clear()

    def _refuse(self, members: list[QueuedPodInfo], status: Status) -> None:
        for m in members:
            self.cycles.failed(self.fw, m, Placement(status=status, diagnosis=None), self.began)

    def _requeue(self, members: list[QueuedPodInfo], tree_why: str) -> None:
        """Members left pending: their group's own failure when the tree held (or, for a group
        that held under a level that did not, that level's), else the tree's. Parked on the gang
        plugin too: a change to the tree (``minGroupCount`` lowered) may let them in."""
        duration = time.perf_counter() - self.began
        plugins = self.out.rejecting | {self.fw.gang_plugin_name}
        for m in members:
            why = tree_why or self._failure_of(m.pod.group_key or "")
            self.cycles.unschedulable(self.fw, m, plugins, why, duration)

    def _failure_of(self, key: str) -> str:
        """Why group ``key`` is not placed: its own failure, or its nearest failed ancestor's."""
        if key in self.out.failures:
            return self.out.failures[key]
        ancestors: list[TreeNode] = []

        def path(node: TreeNode) -> bool:
            if node.group is not None:
                return node.group.key == key
            ancestors.append(node)
            if any(path(child) for child in node.children):
                return True
            ancestors.pop()
            return False

        if self.tree is not None and path(self.tree):
            for node in reversed(ancestors):
                if node.key in self.out.failures:
                    return f"ancestor {node.named()} is unschedulable: {self.out.failures[node.key]}"
        return "no pods were schedulable"


def _limit(feasible: BoolArray, rows: BoolArray | None) -> BoolArray:
    """The feasible nodes inside ``rows`` (all of them when None)."""
    limited = rows_within(feasible, rows)
    return feasible if limited is None else limited


def _need(node: TreeNode, cache: ClusterCache) -> int:
    """The fewest members still to place for ``node`` to hold (its domain must have room for them)."""
    if node.group is not None:
        _, already = cache.group_counts(node.group.key)
        return max((node.group.min_member if node.group.gang else 1) - already, 0)
    needs = sorted(_need(child, cache) for child in node.children)
    return sum(needs[: min_children(node)])


def named_group(group: PodGroupInfo) -> str:
    return f"pod group {group.key}"


def _plan(fw: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], need: int) -> GangPlan:
    """The trials: the profile's gang placer's, or one (anywhere) for a gang it does not constrain."""
    placer = fw.gang_placer
    if placer is None:  # never silently wrong: a constraint nobody enforces refuses the gang
        return GangPlan((), _unevaluated(fw, group)) if group.topology_levels else _ANYWHERE
    if not members or not any(p.constrained(group) for p in fw.gang_placers):
        return _ANYWHERE
    feasible = _feasible_pod(fw, members[0].pod)
    return fw.gang_placements(group, [m.pod for m in members], feasible, need)


def _unevaluated(fw: Framework, group: PodGroupInfo) -> str:
    """Never silently wrong: the gang's topology constraint, which no plugin of the profile
    enforces, names the plugins that would (those declaring they evaluate it)."""
    field_name = TOPOLOGY_REQUIRED_ANNOTATION if group.topology_required else TOPOLOGY_PREFERRED_ANNOTATION
    if group.api == NATIVE_GROUP_API:
        field_name = "spec.schedulingConstraints.topology"
    placers = _placers(fw)
    where = f" (it leaves out {' or '.join(f'{p} at {at}' for p, at in placers)})" if placers else " yet"
    return f"pod group {group.key} uses {field_name}, which this profile does not evaluate{where}"


def _placers(fw: Framework) -> list[tuple[str, str | None]]:
    """The registered plugins that enforce a gang's topology constraint, and where they run."""
    return list(fw.evaluators.get(GANG_TOPOLOGY, ()))


def _feasible_pod(fw: Framework, pod: PodInfo) -> BoolArray:
    """The nodes one member passes every Filter on (all valid nodes if its PreFilter refuses: the
    placement then fails with the real reason)."""
    table = fw.handle.cache.table
    state = fw.new_cycle_state()
    pre, status = fw.run_pre_filter(state, pod)
    if not status.ok:
        return table.valid_rows().copy()
    outcome = fw.find_feasible(state, pod, pre)
    if outcome.error is not None:
        return table.valid_rows().copy()
    feasible: BoolArray = np.asarray(outcome.feasible, dtype=bool)
    return feasible


def _error(attempt: _Attempt) -> Status | None:
    """A plugin's failure in the attempt (not the cluster's "does not fit"), if any."""
    if attempt.stopped is not None and attempt.stopped.code is Code.ERROR:
        return attempt.stopped
    return next((pl.status for _, pl in attempt.failed if pl.status.code is Code.ERROR), None)


def _quorum(fw: Framework, attempt: _Attempt, need: int) -> bool:
    # The gang plugin opens its members' gates once the quorum is at Permit; a gate it still holds
    # (or one rejected meanwhile) means the quorum was not reached in this attempt.
    gang_plugin = fw.gang_plugin_name
    held = any(
        p.gate is not None and (p.gate.rejected or gang_plugin in p.gate.pending_plugins)
        for p in attempt.placed
    )
    return len(attempt.placed) >= need and not held


def _explain_tree(cache: ClusterCache, group: PodGroupInfo) -> list[str]:
    """The tree ``group`` is in, level by level: policy, topology key, children ready."""
    tree, problem, _ = cache.group_tree(group)
    if tree is None:
        return [f"  waiting: {problem}"]
    lines = [f"  refused: {problem}"] if problem else []
    for node in tree.nodes():
        if node.composite is None:
            continue
        info = node.composite
        policy = f"minGroupCount {info.min_groups}" if info.gang else "basic"
        where = f", one {info.topology_required} domain" if info.topology_required else ""
        ready_now = ready_count(node, cache.group_size)
        lines.append(
            f"  {'  ' * (node.depth - 1)}{info.named()}: {policy}{where}, {ready_now} of "
            f"{len(node.children)} child group(s) ready"
        )
    return lines


def explain_gang(fw: Framework, group: PodGroupInfo) -> list[str]:
    """What the gang cycle would do for ``group`` now, for ``shoal explain``: the levels, the
    domains it would try in order (with their room) or why none, as lines. Changes nothing."""
    cache = fw.handle.cache
    members = [m for m in cache.group_members(group.key) if not cache.placed_node(m.uid)]
    _, placed = cache.group_counts(group.key)
    need = max(group.min_member - placed, 0)
    head = f"pod group {group.key}: {group.min_field} {group.min_member}, {placed} placed"
    head += f", {len(members)} pending"
    if group.parent:  # a CompositePodGroup tree: the job's levels first
        return [head, *_explain_tree(cache, group)]
    placer = fw.gang_placer
    if placer is None and group.topology_levels:
        return [head, f"  no placement: {_unevaluated(fw, group)}"]
    if placer is None or not placer.constrained(group):
        return [head, "  no topology constraint: the members may go anywhere"]
    if not members:
        return [head]
    feasible = _feasible_pod(fw, members[0])
    plan = fw.gang_placements(group, members, feasible, need)
    lines = [head]
    if not plan.trials:
        lines.append(f"  no placement: {plan.failure}")
    for i, trial in enumerate(plan.trials, 1):
        dom = trial.domain
        room = f" (room for {dom.room} member(s) on {dom.nodes} node(s))" if dom is not None else ""
        size = f", {int(trial.rows.sum())} node(s) tried" if trial.rows is not None else ""
        lines.append(f"  try {i}: {trial.note or 'anywhere'}{room}{size}")
    return lines
