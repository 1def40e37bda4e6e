"""DefaultPreemption (PostFilter): a pod no node fits evicts pods of lower priority to make room.

kube-scheduler 1.37's plugin of the same name, with its semantics (the pure steps are in
:mod:`shoal.plugins.defaultpreemption.evaluator`): only pods of lower priority are victims;
``preemptionPolicy: Never`` preempts nothing; PodDisruptionBudgets are honoured where possible; the victims
on a node are the fewest that let the pod fit (all lower-priority pods removed, then the most important
reprieved first); the node is picked by upstream's criteria. Then, as upstream's asynchronous
preemption (``SchedulerAsyncPreemption``, on in 1.37):

* in memory at once: the pod is nominated to the node (pods of lower or equal priority leave that
  room alone, :mod:`shoal.core.framework.whatif`), lower-priority pods nominated there lose their
  nomination, and victims waiting at Permit are rejected there (no API call, as upstream);
* through the executor (``kube/preemption.py``), without blocking the cycle:
  ``status.nominatedNodeName`` on the pod, then for each victim a ``DisruptionTarget`` condition
  (reason ``PreemptionByScheduler``), a delete and a ``Preempted`` event;
* members of a gang (a profile plugin's ``pod_group``) do not preempt: evicting pods for one
  member could free room for a gang that still does not fit; gang-aware preemption is future
  work;
* the pod waits as unschedulable; while the executor is still at work, PreEnqueue holds it (as
  upstream's); the executor's completion activates a pod the gate held, and one still parked
  as unschedulable only if the cache has seen its victims go (else their deletions wake it:
  NodeResourcesFit and others register pod deletions); its nominated node is tried first.
  While a victim it evicted is still terminating, the pod preempts nothing more;
* after the executor is done, PreEnqueue also holds the pod while the cache still shows a victim
  it evicted (for at most ``VICTIM_HOLD_SECONDS``): the first victims' deletions would otherwise
  wake it to an attempt that can only fail (a second ``FailedScheduling`` and a doubled
  backoff). The deletion of its last victim opens the gate (a registration targeted at the
  preemptor); when the hold lapses (a victim stuck terminating, say on a node that is gone) the
  pod is tried again as before, on every node.

The message joins the pod's ``FailedScheduling`` event after the filter reasons, as upstream:
``... preemption: found a potential placement for pod on node n1, preempting 1 victims`` or
``... preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, ...``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydantic import Field

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import ClusterEvent, Diagnosis, EventKind, EventRegistration, Handle
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.framework.runtime import Framework
from shoal.core.state.objects import PREEMPT_NEVER, PodGroupInfo, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins.defaultpreemption import evaluator as preemption
from shoal.plugins.defaultpreemption.evaluator import Candidate, Victim
from shoal.plugins.defaultpreemption.gang import all_victims, best_gang_victims
from shoal.plugins.defaultpreemption.ports import PREEMPTION_EXECUTOR, PreemptionExecutor

NAME = "DefaultPreemption"
PREFIX = "preemption: "
GANG_PREFIX = "pod group preemption: "
#: the longest PreEnqueue holds a preemptor for victims still terminating once its executor is
#: done (kube's default ``terminationGracePeriodSeconds``); then it is tried again regardless
VICTIM_HOLD_SECONDS = 30.0
WAITING = "waiting for the preemption for this pod to be finished"
log = logging.getLogger("shoal.preemption")


class Args(ArgsModel):
    """kube-scheduler's ``DefaultPreemptionArgs``: how many candidate nodes a dry run looks for
    (at least this percentage of the potential nodes, and at least this many)."""

    min_candidate_nodes_percentage: int = Field(default=10, ge=0, le=100)
    min_candidate_nodes_absolute: int = Field(default=100, ge=0)


@dataclass(frozen=True)
class Verdict:
    """What preemption would do: its status (``preemption: ...``), the chosen node and victims,
    or ``hopeless`` when no node can be made to fit (the pod's nomination is then cleared)."""

    status: Status
    best: Candidate | None = None
    hopeless: bool = False


class DefaultPreemption:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        if args.min_candidate_nodes_percentage == 0 and args.min_candidate_nodes_absolute == 0:
            raise ValueError("minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be 0")
        self.args = args
        self.handle = handle
        self.fw: Framework | None = None
        #: preemptors (pod uid, or a gang's key) whose executor is still at work -> calls left
        self.running: dict[str, int] = {}
        #: preemptor -> the victims it deleted that the cache still holds (their DELETE not seen yet)
        self.evicting: dict[str, set[str]] = {}
        #: pods PreEnqueue held while their executor was at work (activated when it is done)
        self._held: set[str] = set()
        #: victim uid -> the preemptor (pod uid or gang key) that evicted it
        self._evicted_by: dict[str, str] = {}
        #: preemptors whose executor is done, held while their victims are cached -> hold's end
        self._hold_until: dict[str, float] = {}
        self._sweep_at = 64

    def waiting_for_victims(self, key: str) -> bool:
        """Are victims deleted for ``key`` still in the cache? Until the watch reports them gone,
        the room they held is not visible, and a retry would preempt a second node for nothing."""
        uids = self.evicting.get(key)
        if not uids:
            return False
        cache = self.handle.cache
        for gone in [u for u in uids if u not in cache.pods or not cache.placed_node(u)]:
            uids.discard(gone)
            self._evicted_by.pop(gone, None)
        if not uids:
            del self.evicting[key]
            self._hold_until.pop(key, None)
        return bool(uids)

    def _holding(self, uid: str) -> bool:
        """Is ``uid`` held for victims still cached (its executor done, the hold not lapsed)?"""
        until = self._hold_until.get(uid)
        if until is None:
            return False
        if self.handle.clock() >= until or not self.waiting_for_victims(uid):
            self._hold_until.pop(uid, None)
            return False
        return True

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """kube 1.37's gate: while the executor is still at work for this pod (its nomination and
        victims' deletions being written), the pod is not tried: a victim's deletion seen meanwhile
        would only make it fail again and double its backoff. When the executor is done the pod is
        activated (``Handle.activate``)."""
        if pod.uid in self.running:
            self._held.add(pod.uid)
        elif not self._holding(pod.uid):
            return Status()
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (WAITING,), plugin=NAME)

    def hold_reason(self, status: Status) -> str | None:
        """Not reported: a moment's wait while the preemption's API writes finish."""
        return None

    def attach_framework(self, fw: Framework) -> None:
        """The profile this instance belongs to: its PreFilter/Filter run the dry runs."""
        self.fw = fw

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a pod held while its executor was at work is activated when the executor is done; one
        # held for its victims when the last of them is deleted
        return (EventRegistration(EventKind.POD_DELETE, self._victims_gone, targets=self._preemptor_of),)

    def _preemptor_of(self, event: ClusterEvent) -> Collection[str]:
        key = self._evicted_by.get(getattr(event.obj, "uid", ""))
        return (key,) if key is not None else ()

    def _victims_gone(self, pod: PodInfo, event: ClusterEvent) -> bool:
        return not self._holding(pod.uid)

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        verdict = self.evaluate(pod, diagnosis)
        if self.fw is not None and self.fw.pod_group(pod) is None:  # a gang's attempt counts once
            self.fw.metrics.preemption(len(verdict.best.victims) if verdict.best is not None else 0)
        if verdict.best is not None:
            self._actuate(pod, verdict.best)
        elif verdict.hopeless:
            self._nominate(pod, "")  # no node can be made to fit: its nomination goes
        return verdict.status

    def evaluate(self, pod: PodInfo, diagnosis: Diagnosis) -> Verdict:
        """What preemption would do for ``pod`` now; changes nothing (``shoal explain`` asks too)."""
        fw = self.fw
        if fw is None:
            return Verdict(Status.error("DefaultPreemption is not attached to a profile"))
        if fw.pod_group(pod) is not None:
            # a gang preempts as one, when its cycle fails (post_filter_gang): evicting pods for
            # one member could free room for a gang that still does not fit (scheduler-plugins #581)
            return Verdict(Status.unschedulable())
        if pod.uid in self.running or self.waiting_for_victims(pod.uid):
            return Verdict(Status.unschedulable(PREFIX + WAITING))
        ok, why = preemption.eligible(fw, pod, diagnosis)
        if not ok:
            return Verdict(Status.unschedulable(PREFIX + why))
        rows = preemption.potential_rows(fw, diagnosis)
        candidates: list[Candidate] = []
        statuses: dict[str, Status] = {}
        if rows:
            wanted = preemption.num_candidates(
                len(rows), self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute
            )
            offset = fw.rng.randrange(len(rows))
            pdbs = list(self.handle.cache.pdbs.values())
            candidates, statuses = preemption.dry_run(fw, pod, rows, pdbs, offset, wanted, diagnosis)
        best = preemption.pick_one_node(candidates)
        if best is None:
            errors = preemption.errors_of(statuses)
            if errors:
                return Verdict(Status.error(PREFIX + errors[0]))
            message = preemption.fit_error(len(self.handle.cache.table), statuses)
            return Verdict(Status.unschedulable(PREFIX + message), hopeless=True)
        found = f"found a potential placement for pod on node {best.node}"
        status = Status(Code.SUCCESS, (f"{PREFIX}{found}, preempting {len(best.victims)} victims",))
        return Verdict(status, best)

    def post_filter_gang(self, group: PodGroupInfo, members: Sequence[PodInfo], need: int) -> Status:
        """A gang whose quorum did not fit preempts as one (:mod:`shoal.plugins.defaultpreemption.gang`):
        victims for every member at once, only if the whole quorum then fits. Messages as 1.37's
        workload-aware preemption (``pod group preemption: ...``)."""
        fw = self.fw
        if fw is None or not members:
            return Status.unschedulable()
        if any(m.preemption_policy == PREEMPT_NEVER for m in members):
            return Status.unschedulable(GANG_PREFIX + "not eligible due to preemptionPolicy=Never.")
        ongoing = (
            group.key in self.running
            or self.waiting_for_victims(group.key)
            or not all(preemption.eligible(fw, m, Diagnosis())[0] for m in members)
        )
        if ongoing:  # victims evicted for it are still going: wait for them, evict nothing more
            return Status.unschedulable(GANG_PREFIX + "ongoing preemption on nominated nodes")
        priority = min(m.priority for m in members)
        if not all_victims(fw, group, priority):
            return Status.unschedulable(GANG_PREFIX + "No preemption victims found for incoming preemptor")
        found = best_gang_victims(fw, group, members, need, list(self.handle.cache.pdbs.values()))
        if found is None:
            for member in members:
                self._nominate(member, "")
            why = f"pod group {group.key} does not fit even with every lower-priority pod preempted"
            if group.topology_levels:
                why += f" (inside one domain of {', '.join(group.topology_levels)})"
            return Status.unschedulable(GANG_PREFIX + why)
        victims, where = found
        if not victims:  # it fits as things are: what held it back was not room (e.g. a Permit gate)
            return Status.unschedulable()
        fw.metrics.preemption(sum(len(v.pods) for v in victims))
        self._actuate_gang(group, [m for m in members if m.uid in where], where, victims)
        count = sum(len(v.pods) for v in victims)
        return Status(
            Code.SUCCESS, (f"{GANG_PREFIX}found a placement for podgroup, preempting {count} victims",)
        )

    def _actuate_gang(
        self, group: PodGroupInfo, members: list[PodInfo], where: dict[str, str], victims: list[Victim]
    ) -> None:
        """Every member of the quorum nominated where it fits; each node's victims evicted for a
        member placed there (a victim gang's pods elsewhere, for the first member)."""
        on: dict[str, PodInfo] = {}
        for member in members:
            on.setdefault(where[member.uid], member)
        by_member: dict[str, list[PodInfo]] = {m.uid: [] for m in on.values()}
        for pod in (p for v in victims for p in v.pods):
            node = self.handle.cache.placed_node(pod.uid) or ""
            by_member[on.get(node, members[0]).uid].append(pod)
        for member in members:
            self._actuate(member, Candidate(where[member.uid], by_member.get(member.uid, [])), key=group.key)

    # -- carrying it out --------------------------------------------------------------------------
    def _executor(self) -> PreemptionExecutor | None:
        executor: PreemptionExecutor | None = self.handle.extras.get(PREEMPTION_EXECUTOR)
        return executor

    def _nominate(self, pod: PodInfo, node: str) -> None:
        cache = self.handle.cache
        had = cache.nominator.node_of(pod.uid) or pod.nominated_node
        if node:
            cache.nominator.nominate(pod, node)
        else:
            cache.nominator.remove(pod.uid)
        executor = self._executor()
        if executor is not None and had != node and (node or pod.nominated_node):
            executor.nominate(pod, node)

    def _actuate(self, pod: PodInfo, best: Candidate, *, key: str = "") -> None:
        """``key``: what ``running`` is keyed by (the pod's uid, or its gang's key)."""
        cache, node = self.handle.cache, best.node
        cache.nominator.nominate(pod, node)
        unnominate = [p for p in cache.nominator.pods_on(node) if p.priority < pod.priority]
        for other in unnominate:
            cache.nominator.remove(other.uid)
        to_delete: list[PodInfo] = []
        for victim in best.victims:
            if self.handle.waiting.reject(victim.uid, NAME, "preempted"):
                continue  # waiting at Permit: preempted in memory, no API call (as upstream)
            if not victim.terminating:
                to_delete.append(victim)
        log.info("pod %s preempts %d pod(s) on %s", pod.key, len(best.victims), node)
        executor = self._executor()
        if executor is None:
            return
        key = key or pod.uid
        self.running[key] = self.running.get(key, 0) + 1
        self.evicting.setdefault(key, set()).update(v.uid for v in to_delete)
        self._evicted_by.update((v.uid, key) for v in to_delete)
        if len(self.evicting) >= self._sweep_at:  # forget preemptors whose victims are all gone
            for preemptor in list(self.evicting):
                self.waiting_for_victims(preemptor)
            self._sweep_at = max(64, 2 * len(self.evicting))

        def done(ok: bool) -> None:
            left = self.running.pop(key, 1) - 1
            if left > 0:
                self.running[key] = left
            if not ok:  # some victim stays: the next attempt may preempt afresh
                for uid in self.evicting.pop(key, ()):
                    self._evicted_by.pop(uid, None)
                log.warning("preemption for %s on %s did not complete", pod.key, node)
            if key != pod.uid or key in self.running:
                return
            # the executor's gate is open. While the cache still shows a victim, the gate holds
            # the pod for them (bounded); a pod the gate held (it parked there when an event
            # moved it) is activated now, to be held again or admitted; one still parked as
            # unschedulable only if the cache has seen every victim go (else the retry could only
            # fail and double its backoff: the victims' deletions will wake it)
            waiting = ok and self.waiting_for_victims(key)
            if waiting:
                self._hold_until[key] = self.handle.clock() + VICTIM_HOLD_SECONDS
                self._lapse_later(key)
            held = pod.uid in self._held
            self._held.discard(pod.uid)
            if held or not waiting:
                self.handle.activate((pod.uid,))

        executor.preempt(pod, node, to_delete, unnominate, done)

    def _lapse_later(self, key: str) -> None:
        """End ``key``'s hold after ``VICTIM_HOLD_SECONDS`` and try it again (with no running loop,
        as in some unit tests, the hold lapses at the next event that asks)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def lapse() -> None:
            if self._hold_until.pop(key, None) is not None:
                self.handle.activate((key,))

        loop.call_later(VICTIM_HOLD_SECONDS, lapse)


def new(args: Args, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)


ENTRY = PluginEntry(NAME, new, Args, DefaultPreemption)
