"""One pod's scheduling cycle and binding cycle, top to bottom (kube-scheduler's ``schedule_one.go``).

Where a pod goes, told in the order it happens::

    informer -> Scheduler.on_pod -> SchedulingQueue.add --PreEnqueue--> active (QueueSort order)
    Scheduler.run: queue.pop -> a gang's pod: the gang cycle (gangs.py); any other pod:
    PodCycles.schedule_one:
      schedule_pod                                    where it would go; assumes nothing
        refusal      a field the profile does not evaluate: unschedulable, naming it
        PreFilter    once; may narrow the nodes or reject the pod
        Filter       every plugin over every node (vectorised), then the nominated pods' pass
        PostFilter   only if no node fits (preemption); the pod is unschedulable either way
        sample       percentageOfNodesToScore of the feasible nodes, from a rotating start
        PreScore, Score, NormalizeScore, x weight; select_host: the best, ties at random
      Cycle.assume   count it on the node at once, then Reserve, then Permit (Wait: a gate)
      start_binding  hand the pod to its binding task; the next pod's cycle may start
    PodCycles._binding_cycle (an asyncio task per pod):
      wait on the Permit gate -> PreBind -> Bind -> PostBind -> a Scheduled event
    any failure after assume: Unreserve (reverse order), forget, requeue with backoff; no node
    fits: park as unschedulable until an event one of the rejecting plugins registered for

Why it is shaped this way:

* The **scheduling cycle** is synchronous: between popping a pod and assuming it on a node nothing else
  runs on the event loop, so the cache cannot change under a cycle and no snapshot copy is needed.
  Watch events and binding tasks run between cycles.
* The **binding cycle** is an asyncio task per pod. Any failure after assume (Permit rejection or
  timeout included) runs Unreserve (reverse order), forgets the pod, requeues it with backoff; a 409
  from Bind (someone else bound it) only forgets it.
* Everything a cycle assumes is either handed to a binding task or released before the cycle ends
  (:class:`Cycle`), so a bug costs its pods a backoff, never a leaked reservation.
* The Framework runs plugins; this module is the algorithm that combines its points
  (``schedulePod``, ``findNodesThatFitPod``, ``prioritizeNodes``, ``selectHost``).
  :func:`schedule_pod` is pure with respect to the cluster: it assumes nothing, reserves nothing and
  writes nothing (PostFilter plugins may act, as in kube-scheduler); ``what_if`` is explain's
  variant: no PostFilter, every feasible node scored, the first best node picked (no random
  tie-break), the diagnosis kept for every rejected node, so asking changes nothing.

Outcomes go to a :class:`~shoal.core.scheduling.reporting.Reporter`; the core itself does no I/O.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gates import PermitGate, WaitingPods
from shoal.core.framework.interfaces import BoolArray, Diagnosis, IntArray
from shoal.core.framework.metrics import Metrics
from shoal.core.framework.outcomes import ScoreOutcome
from shoal.core.framework.runtime import Framework
from shoal.core.framework.whatif import filter_with_nominated
from shoal.core.scheduling.queue import QueuedPodInfo, SchedulingQueue
from shoal.core.scheduling.reporting import Reporter
from shoal.core.state.cache import ClusterCache
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status

log = logging.getLogger("shoal.scheduler")

#: below this many feasible nodes every one is scored, whatever percentageOfNodesToScore says
MIN_FEASIBLE_NODES_TO_SCORE = 100
#: what the pod's Scheduled event adds (the domain its gang went to, a fallback): in its cycle state
PLACEMENT_NOTE = "shoal.dev/placement-note"


def error_message(status: Status) -> str:
    return f"running {status.plugin or 'the framework'}: {status.message}"


class PodCycles:
    """The scheduling and binding cycles of one scheduler's pods (see the module docstring).

    The :class:`~shoal.core.scheduling.scheduler.Scheduler` owns one and runs its loop over it;
    the gang cycle (:mod:`shoal.core.scheduling.gangs`) is built on its steps.
    """

    def __init__(
        self,
        cache: ClusterCache,
        queue: SchedulingQueue,
        waiting: WaitingPods,
        metrics: Metrics,
        reporter: Reporter,
        *,
        clock: Callable[[], float],
        max_binds_in_flight: int = 256,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.waiting = waiting
        self.metrics = metrics
        self.reporter = reporter
        self.clock = clock
        self.binding: set[asyncio.Task[None]] = set()
        #: binding cycles past their Permit gate (PreBind/Bind under way); the loop waits when
        #: there are ``max_binds_in_flight`` so a burst cannot pile up thousands of tasks
        self.binds_in_flight = 0
        self.max_binds_in_flight = max_binds_in_flight
        self.bind_slot = asyncio.Event()
        #: gang key -> when its timeout was last counted: its members' gates close together
        self._gang_timeouts: dict[str, float] = {}
        #: called with every placement that found a node, its per-plugin scores recorded (the
        #: simulator keeps the best nodes' scores for ``shoal simulate``)
        self.placement_observer: Callable[[PodInfo, Placement], None] | None = None

    def new_cycle(self, fw: Framework | None, qpi: QueuedPodInfo) -> Cycle:
        return Cycle(fw, self.cache, self.waiting, qpi)

    # -- the scheduling cycle --------------------------------------------------------------------
    def schedule_one(self, fw: Framework, qpi: QueuedPodInfo, cycle: Cycle) -> None:
        """One scheduling cycle for ``qpi``: placed, it is handed to a binding task; whatever
        ``cycle`` still holds if this raises is the caller's to roll back."""
        began = time.perf_counter()
        state = fw.new_cycle_state()
        placement = self.place(fw, state, qpi.pod)
        if placement.node is None:
            self.failed(fw, qpi, placement, began)
            return
        placed, status = cycle.assume(fw, qpi, state, placement.node)
        if not status.ok and not status.is_wait:
            cycle.release(fw, placed)
            self.failed(fw, qpi, Placement(status=status), began)
            return
        self.start_binding(fw, placed, began)

    def place(self, fw: Framework, state: CycleState, pod: PodInfo, *, record: bool = False) -> Placement:
        """PreFilter → Filter (every node) → PostFilter → PreScore/Score → pick. Assumes nothing."""
        observer = self.placement_observer
        placement = schedule_pod(fw, state, pod, record=record or observer is not None, names=record)
        if observer is not None and placement.row is not None:
            observer(pod, placement)
        return placement

    def failed(self, fw: Framework, qpi: QueuedPodInfo, placement: Placement, began: float) -> None:
        """No node fits (unschedulable) or a plugin failed (an error): requeue and report."""
        status = placement.status
        duration = time.perf_counter() - began
        if status.code is Code.ERROR or (placement.diagnosis is None and not status.is_rejected):
            self.retry_after_error(fw, qpi, error_message(status), duration)
            return
        diag = placement.diagnosis
        message = diag.message() if diag is not None else status.message
        plugins = diag.unschedulable_plugins if diag is not None else {status.plugin}
        self.unschedulable(fw, qpi, plugins, message, duration)

    def unschedulable(
        self, fw: Framework, qpi: QueuedPodInfo, plugins: Iterable[str], message: str, duration: float
    ) -> None:
        """Count it, park the pod until an event one of the rejecting ``plugins`` registered for,
        say why in a FailedScheduling event."""
        self.metrics.attempt("unschedulable", fw.name, duration)
        self.queue.requeue_unschedulable(qpi, plugins, message)
        self.reporter.unschedulable(qpi.pod, message, fw.name)

    def retry_after_error(self, fw: Framework, qpi: QueuedPodInfo, message: str, duration: float) -> None:
        """An error (not "no node fits"): count it, retry after the backoff, say so in an event."""
        self.metrics.attempt("error", fw.name, duration)
        self.queue.requeue_backoff(qpi, message)
        self.reporter.unschedulable(qpi.pod, message, fw.name, error=True)

    def start_binding(self, fw: Framework, placed: Assumed, began: float) -> None:
        task = asyncio.get_running_loop().create_task(
            self._binding_cycle(fw, placed, began), name=f"bind {placed.qpi.pod.key}"
        )
        self.binding.add(task)
        task.add_done_callback(self.binding.discard)
        # handed over only once the task exists: until then a failure releases it (the guard)
        placed.cycle.hand_over(placed)
        self.queue.done(placed.qpi.uid)

    # -- the binding cycle -----------------------------------------------------------------------
    async def _binding_cycle(self, fw: Framework, placed: Assumed, began: float) -> None:
        qpi, state, node = placed.qpi, placed.state, placed.node
        pod = qpi.pod
        status = Status()
        binding = False
        try:
            if placed.gate is not None:
                result = await placed.gate.wait()
                self.waiting.remove(pod.uid)
                self.metrics.permit_wait("allowed" if result.allowed else "rejected", result.waited)
                if result.timed_out and pod.group_key is not None:
                    self._gang_timed_out(fw, pod.group_key, result.waited)
                status = result.status
            if status.ok:
                binding = True
                self.binds_in_flight += 1
                status = await fw.run_pre_bind(state, pod, node)
            if status.ok and node not in self.cache.table:
                # deleted while the pod waited or pre-bound: the API server would accept a Binding
                # to a node that no longer exists, so stop here and place the pod again
                status = Status.unschedulable(f"node {node} was deleted before the pod was bound")
            if status.ok:
                status = await fw.run_bind(state, pod, node)
        except asyncio.CancelledError:
            self._binding_failed(fw, placed, Status.error("scheduler shutting down"), began, report=False)
            raise
        except Exception as exc:  # an adapter bug must not leak the reservation
            log.exception("binding cycle for %s failed", pod.key)
            status = Status.error(f"{type(exc).__name__}: {exc}")
        finally:
            if binding:
                self.binds_in_flight -= 1
                self.bind_slot.set()
        if not status.ok:
            self._binding_failed(fw, placed, status, began)
            return
        self.cache.finish_binding(pod.uid)
        fw.run_post_bind(state, pod, node)
        self.metrics.attempt("scheduled", fw.name, time.perf_counter() - began)
        if qpi.initial_attempt is not None:
            self.metrics.pod_scheduled(qpi.attempts, self.queue.clock() - qpi.initial_attempt)
        self.reporter.scheduled(pod, node, fw.name, note=state.read(PLACEMENT_NOTE, ""))

    def _gang_timed_out(self, fw: Framework, key: str, waited: float) -> None:
        """Count a gang's Permit timeout once: its members' gates time out within moments of each
        other, and a retry's gates wait a whole timeout again (``waited``) before theirs."""
        now = self.clock()
        if now - self._gang_timeouts.get(key, -1e9) < waited / 2:
            return
        self._gang_timeouts[key] = now
        if len(self._gang_timeouts) > 4096:  # forget the oldest (dicts keep insertion order)
            del self._gang_timeouts[next(iter(self._gang_timeouts))]
        self.metrics.gang_timeout(fw.name)

    def _binding_failed(
        self, fw: Framework, placed: Assumed, status: Status, began: float, *, report: bool = True
    ) -> None:
        qpi, pod = placed.qpi, placed.qpi.pod
        self.waiting.remove(pod.uid)
        fw.run_unreserve(placed.state, pod, placed.node)
        self.cache.forget(pod.uid)
        if not status.requeue:
            log.info("pod %s was bound by someone else (%s); forgot it", pod.key, status.message)
            return
        if pod.uid not in self.cache.pods:
            return  # deleted meanwhile
        if not report:  # stepping down: keep the pod queued (quietly) for whoever schedules next
            self.queue.requeue_backoff(qpi, status.message)
            return
        message = status.message or "binding failed"
        result = "unschedulable" if status.is_rejected else "error"
        self.metrics.attempt(result, fw.name, time.perf_counter() - began)
        # Rejected or timed out at Permit, or failed at PreBind/Bind: retried after the backoff
        # (1 s doubling to 10 s). Waiting for a cluster event instead could strand a gang whose
        # Permit timed out with nothing left to change.
        self.queue.requeue_backoff(qpi, message, error=result == "error")
        self.reporter.unschedulable(pod, message, fw.name, error=result == "error")


# -- where a pod would go (schedulePod) -------------------------------------------------------------
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


# -- what one cycle holds until it ends -------------------------------------------------------------
@dataclass(eq=False)  # compared by identity: a cycle looks them up in its list
class Assumed:
    """A pod assumed on ``node`` by ``cycle``: reserved if ``reserved``, at ``gate`` if it waits."""

    qpi: QueuedPodInfo
    state: CycleState
    node: str
    cycle: Cycle
    reserved: bool = False
    gate: PermitGate | None = None


class Cycle:
    """What one scheduling cycle owns until it ends (see the module docstring)."""

    def __init__(self, fw: Framework | None, cache: ClusterCache, waiting: WaitingPods, first: QueuedPodInfo):
        self.fw = fw
        self.cache = cache
        self.waiting = waiting
        #: every pod this cycle popped from the queue
        self.pods: list[QueuedPodInfo] = [first]
        #: assumed and not yet handed to binding: what a failure must give back
        self.assumed: list[Assumed] = []

    def add_members(self, members: Iterable[QueuedPodInfo]) -> None:
        """The other queued members of the gang, popped into this cycle."""
        self.pods.extend(members)

    def assume(
        self, fw: Framework, qpi: QueuedPodInfo, state: CycleState, node: str
    ) -> tuple[Assumed, Status]:
        """Assume the pod on ``node``, then Reserve, then Permit. On failure the caller releases it."""
        assumed = Assumed(qpi, state, node, self)
        self.cache.assume(qpi.pod, node)
        self.assumed.append(assumed)
        status = fw.run_reserve(state, qpi.pod, node)
        if not status.ok:
            return assumed, status  # run_reserve already ran Unreserve for every plugin
        assumed.reserved = True
        status, assumed.gate = fw.run_permit(state, qpi.pod, node)
        return assumed, status

    def release(self, fw: Framework, assumed: Assumed) -> None:
        """Undo everything after assume, for a pod whose binding never started."""
        pod = assumed.qpi.pod
        if assumed.gate is not None:
            assumed.gate.reject("", "released")
            self.waiting.remove(pod.uid)
        if assumed.reserved:
            fw.run_unreserve(assumed.state, pod, assumed.node)
        self.cache.forget(pod.uid)
        if assumed in self.assumed:
            self.assumed.remove(assumed)

    def hand_over(self, assumed: Assumed) -> None:
        """The commit: a binding task now owns the pod (and releases it if binding fails)."""
        if assumed in self.assumed:
            self.assumed.remove(assumed)

    def rollback(self) -> list[QueuedPodInfo]:
        """After the cycle raised: release all it still holds; the popped pods to requeue (not those
        deleted meanwhile or binding)."""
        for assumed in reversed(list(self.assumed)):  # release() removes from the list
            try:
                if self.fw is not None:
                    self.release(self.fw, assumed)
                else:
                    self.cache.forget(assumed.qpi.uid)
            except Exception:
                log.exception("releasing %s after a failed cycle", assumed.qpi.pod.key)
                self.cache.forget(assumed.qpi.uid)
        self.assumed.clear()
        return [m for m in self.pods if m.uid in self.cache.pods and not self.cache.placed_node(m.uid)]
