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

from shoal.core.framework.gangplan import GANG_DOMAIN_STATE, GangPlan, GangTrial
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
from shoal.core.state.fidelity import GANG_TOPOLOGY
from shoal.core.state.grouplinks import NATIVE_GROUP_API
from shoal.core.state.objects import (
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    PodGroupInfo,
    PodInfo,
)
from shoal.core.state.status import Code

_ANYWHERE = GangPlan((GangTrial(None, None, ""),))


@dataclass
class _Attempt:
    trial: GangTrial
    placed: list[Assumed] = field(default_factory=list)
    failed: list[tuple[QueuedPodInfo, Placement]] = field(default_factory=list)


class GangCycles:
    """Gangs' cycles, built on the steps of the pods' own (:class:`PodCycles`)."""

    def __init__(self, cycles: PodCycles) -> None:
        self.cycles = cycles

    def schedule(self, fw: Framework, first: QueuedPodInfo, group: PodGroupInfo, cycle: Cycle) -> None:
        """A gang is one cycle with N members: all of the quorum go to binding, or none."""
        began = time.perf_counter()
        cache = self.cycles.cache
        members = [first, *self.cycles.queue.pop_group(group.key, exclude=first.uid)]
        cycle.add_members(members[1:])
        members = [m for m in members if m.uid in cache.pods and not cache.placed_node(m.uid)]
        members.sort(key=lambda m: fw.sort_key(m.pod, m.enqueued))
        checked = fw.check_group(group, [m.pod for m in members])
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
            attempt = self._place(fw, cycle, members, trial)
            if _quorum(fw, attempt, need):
                self._commit(fw, group, attempt, began)
                return
            for p in reversed(attempt.placed):
                cycle.release(fw, p)
            if any(pl.status.code is Code.ERROR for _, pl in attempt.failed):
                break  # a plugin failed, not the cluster: no other domain will do better
        self._failed(fw, group, attempt, need, began, len(plan.trials))

    def _place(
        self, fw: Framework, cycle: Cycle, members: Sequence[QueuedPodInfo], trial: GangTrial
    ) -> _Attempt:
        """Every member placed for real inside ``trial``, one after another, each assumed."""
        attempt = _Attempt(trial)
        for m in members:
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
        members = [p.qpi for p in attempt.placed] + [m for m, _ in attempt.failed]
        error = next((pl.status for _, pl in attempt.failed if pl.status.code is Code.ERROR), None)
        if error is not None:  # a plugin failed, not the cluster: the whole gang retries with backoff
            message = f"{error_message(error)} (pod group {group.key}; nothing was reserved)"
            for m in members:
                self.cycles.retry_after_error(fw, m, message, duration)
            return
        why, plugins = first_reason(pl for _, pl in attempt.failed)
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


def _plan(fw: Framework, group: PodGroupInfo, members: list[QueuedPodInfo], need: int) -> GangPlan:
    """The trials: the profile's gang placer's, or one (anywhere) for a gang it does not constrain."""
    placer = fw.gang_placer
    if placer is None:  # never silently wrong: a constraint nobody enforces refuses the gang
        return GangPlan((), _unevaluated(fw, group)) if group.topology_levels else _ANYWHERE
    if not members or not placer.constrained(group):
        return _ANYWHERE
    feasible = _feasible_pod(fw, members[0].pod)
    return placer.gang_placements(group, [m.pod for m in members], feasible, need)


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


def _quorum(fw: Framework, attempt: _Attempt, need: int) -> bool:
    # The gang plugin opens its members' gates once the quorum is at Permit; a gate it still holds
    # (or one rejected meanwhile) means the quorum was not reached in this attempt.
    gang_plugin = fw.gang_plugin_name
    held = any(
        p.gate is not None and (p.gate.rejected or gang_plugin in p.gate.pending_plugins)
        for p in attempt.placed
    )
    return len(attempt.placed) >= need and not held


def explain_gang(fw: Framework, group: PodGroupInfo) -> list[str]:
    """What the gang cycle would do for ``group`` now, for ``shoal explain``: the levels, the
    domains it would try in order (with their room) or why none, as lines. Changes nothing."""
    cache = fw.handle.cache
    members = [m for m in cache.group_members(group.key) if not cache.placed_node(m.uid)]
    _, placed = cache.group_counts(group.key)
    need = max(group.min_member - placed, 0)
    head = f"pod group {group.key}: {group.min_field} {group.min_member}, {placed} placed"
    head += f", {len(members)} pending"
    placer = fw.gang_placer
    if placer is None and group.topology_levels:
        return [head, f"  no placement: {_unevaluated(fw, group)}"]
    if placer is None or not placer.constrained(group):
        return [head, "  no topology constraint: the members may go anywhere"]
    if not members:
        return [head]
    feasible = _feasible_pod(fw, members[0])
    plan = placer.gang_placements(group, members, feasible, need)
    lines = [head]
    if not plan.trials:
        lines.append(f"  no placement: {plan.failure}")
    for i, trial in enumerate(plan.trials, 1):
        dom = trial.domain
        room = f" (room for {dom.room} member(s) on {dom.nodes} node(s))" if dom is not None else ""
        size = f", {int(trial.rows.sum())} node(s) tried" if trial.rows is not None else ""
        lines.append(f"  try {i}: {trial.note or 'anywhere'}{room}{size}")
    return lines
