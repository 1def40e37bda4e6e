"""The scheduling queue: active heap, backoff heap, unschedulable set, and gated pods.

As in kube-scheduler's PriorityQueue:

* ``active``: pods ready to be tried, ordered by the profile's QueueSort key;
* ``backoff``: pods that failed recently, held for 1 s doubling per attempt up to 10 s;
* ``unschedulable``: pods no node could take; a cluster event that one of the rejecting plugins
  registered for (queueing hints) moves them back, and after 5 minutes they are retried anyway;
* ``gated``: pods a PreEnqueue plugin holds (e.g. a gang below its quorum of pods), re-checked on
  the events that plugin registered for.

Gang members are kept together: :meth:`pop_group` takes every queued member of a PodGroup, wherever
it waits, so the scheduler can place the whole gang in one cycle.

The queue is not thread-safe; it lives on the scheduler's event loop. Time comes from ``clock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from shoal.core.framework.interfaces import ClusterEvent, EventRegistration
from shoal.core.framework.metrics import Metrics, NullMetrics
from shoal.core.state.objects import PodInfo, status_only_update
from shoal.core.state.status import Status

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
MAX_UNSCHEDULABLE_SECONDS = 300.0

ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, IN_FLIGHT = "active", "backoff", "unschedulable", "gated", "inFlight"


@dataclass(slots=True)
class QueuedPodInfo:
    pod: PodInfo
    profile: str
    enqueued: float
    initial_attempt: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gate: Status | None = None
    backoff_until: float = 0.0
    parked_at: float = 0.0
    where: str = ""
    generation: int = 0
    last_message: str = ""
    #: the last attempt failed with an error (a plugin's, or a binding's), not "no node fits"
    last_error: bool = False
    #: order among parked pods (events move them in the order they were parked)
    parked_seq: int = 0

    @property
    def uid(self) -> str:
        return self.pod.uid


PreEnqueue = Callable[[PodInfo], Status]
#: told of each PreEnqueue verdict on a pod: its rejection (gated), or None when it leaves the gate
GateObserver = Callable[[QueuedPodInfo, Status | None], None]
SortKey = Callable[[PodInfo, float], tuple[Any, ...]]


class ProfileHooks(Protocol):
    """What the queue asks of the profiles, given when it is built (the Scheduler answers)."""

    def sort_key_for(self, profile: str) -> SortKey | None: ...

    def pre_enqueue_for(self, profile: str) -> PreEnqueue | None: ...

    def hints_for(self, profile: str) -> Sequence[tuple[str, EventRegistration]]: ...


class _NoProfiles:
    """No profile: FIFO by time queued, no gate, every event may help (kube's default)."""

    def sort_key_for(self, profile: str) -> SortKey | None:
        return None

    def pre_enqueue_for(self, profile: str) -> PreEnqueue | None:
        return None

    def hints_for(self, profile: str) -> Sequence[tuple[str, EventRegistration]]:
        return ()


NO_PROFILES = _NoProfiles()


class SchedulingQueue:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = INITIAL_BACKOFF,
        max_backoff: float = MAX_BACKOFF,
        max_unschedulable: float = MAX_UNSCHEDULABLE_SECONDS,
        metrics: Metrics | None = None,
        profiles: ProfileHooks | None = None,
    ) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self.metrics = metrics or NullMetrics()
        self._pods: dict[str, QueuedPodInfo] = {}
        self._active: list[tuple[tuple[Any, ...], int, str, int]] = []
        self._backoff: list[tuple[float, int, str, int]] = []
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
        #: unschedulable and gated pods: what events and the periodic flush look at, so that a
        #: cluster event costs O(parked pods), not O(every pod in the queue)
        self._parked: dict[str, QueuedPodInfo] = {}
        #: parked pods by (profile, rejecting plugin; "" when none): an event looks only at the
        #: pods one of whose plugins registered for it, not at every parked pod
        self._index: dict[tuple[str, str], dict[str, QueuedPodInfo]] = {}
        self._indexed: dict[str, tuple[tuple[str, str], ...]] = {}
        self._last_flush = 0.0
        #: what the queue asks of the profiles (QueueSort key, PreEnqueue, queueing hints)
        self.profiles: ProfileHooks = profiles if profiles is not None else NO_PROFILES
        #: where held pods are reported (the scheduler's reporter: events and a condition)
        self.gate_observer: GateObserver | None = None
        self._closed = False

    # -- bookkeeping ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def pods_in(self, where: str) -> list[QueuedPodInfo]:
        return [q for q in self._pods.values() if q.where == where]

    def _move(self, qpi: QueuedPodInfo, where: str) -> None:
        if qpi.where == GATED and where != GATED and self.gate_observer is not None:
            self.gate_observer(qpi, None)  # admitted, or gone: no longer held
        if qpi.where:
            self._counts[qpi.where] -= 1
        for key in self._indexed.pop(qpi.uid, ()):
            bucket = self._index[key]
            del bucket[qpi.uid]
            if not bucket:
                del self._index[key]
        if where in (UNSCHEDULABLE, GATED):
            if qpi.uid not in self._parked:
                qpi.parked_seq = next(self._seq)
            self._parked[qpi.uid] = qpi
            keys = tuple((qpi.profile, p) for p in qpi.unschedulable_plugins or ("",))
            for key in keys:
                self._index.setdefault(key, {})[qpi.uid] = qpi
            self._indexed[qpi.uid] = keys
        else:
            self._parked.pop(qpi.uid, None)
        qpi.where = where
        qpi.generation += 1
        if where:
            self._counts[where] += 1

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        self._move(qpi, ACTIVE)
        sort_key = self.profiles.sort_key_for(qpi.profile)
        key = sort_key(qpi.pod, qpi.enqueued) if sort_key else (qpi.enqueued,)
        heapq.heappush(self._active, (key, next(self._seq), qpi.uid, qpi.generation))
        self._wakeup.set()

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        self._move(qpi, BACKOFF)
        heapq.heappush(self._backoff, (qpi.backoff_until, next(self._seq), qpi.uid, qpi.generation))
        self._wakeup.set()

    def _backoff_for(self, attempts: int) -> float:
        return float(min(self.initial_backoff * (2 ** max(attempts - 1, 0)), self.max_backoff))

    def report(self) -> None:
        for name, count in self._counts.items():
            if name != IN_FLIGHT:
                self.metrics.pending(name, count)

    # -- adding and removing -------------------------------------------------------------------
    def add(self, pod: PodInfo, profile: str) -> QueuedPodInfo:
        """A new or updated pending pod. PreEnqueue decides between active and gated."""
        qpi = self._pods.get(pod.uid)
        if qpi is not None:
            old, qpi.pod = qpi.pod, pod
            if qpi.where in (UNSCHEDULABLE, GATED) and not status_only_update(old, pod):
                # the pod itself changed (kube: an update may make it schedulable)
                self._admit(qpi)
            return qpi
        qpi = QueuedPodInfo(pod=pod, profile=profile, enqueued=self.clock())
        self._pods[pod.uid] = qpi
        self._admit(qpi)
        return qpi

    def _admit(self, qpi: QueuedPodInfo) -> None:
        """PreEnqueue, then active (or backoff, for a pod that has been tried); else gated."""
        if self._gated(qpi):
            return
        if qpi.attempts and qpi.backoff_until > self.clock():
            self._push_backoff(qpi)
        else:
            self._push_active(qpi)

    def _gated(self, qpi: QueuedPodInfo) -> bool:
        """Run the profile's PreEnqueue plugins; a rejection gates the pod (True)."""
        pre_enqueue = self.profiles.pre_enqueue_for(qpi.profile)
        status = pre_enqueue(qpi.pod) if pre_enqueue is not None else None
        if status is None or status.ok:
            qpi.gate = None
            return False
        qpi.gate = status
        qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
        qpi.parked_at = self.clock()
        self._move(qpi, GATED)
        if self.gate_observer is not None:
            self.gate_observer(qpi, status)
        return True

    def activate(self, uids: Iterable[str]) -> None:
        """Put parked pods (unschedulable or gated) back into play now, PreEnqueue first (kube's
        ``Activate``): a plugin whose own state changed, not the cluster, says they may fit."""
        for uid in uids:
            qpi = self._pods.get(uid)
            if qpi is not None and qpi.where in (UNSCHEDULABLE, GATED):
                self._admit(qpi)

    def delete(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._pods.pop(uid, None)
        if qpi is not None:
            self._move(qpi, "")
        return qpi

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    # -- popping -------------------------------------------------------------------------------
    def flush(self, now: float | None = None) -> None:
        """Move finished backoffs to active, and long-unschedulable pods back into play."""
        now = self.clock() if now is None else now
        while self._backoff and self._backoff[0][0] <= now:
            _, _, uid, gen = heapq.heappop(self._backoff)
            qpi = self._pods.get(uid)
            if qpi is not None and qpi.generation == gen and qpi.where == BACKOFF:
                self._push_active(qpi)
        if self._counts[UNSCHEDULABLE] and now - self._last_flush >= 1.0:
            self._last_flush = now
            for qpi in list(self._parked.values()):
                if qpi.where == UNSCHEDULABLE and now - qpi.parked_at >= self.max_unschedulable:
                    self._requeue_after_event(qpi, now)

    def pop_nowait(self) -> QueuedPodInfo | None:
        self.flush()
        while self._active:
            _, _, uid, gen = heapq.heappop(self._active)
            qpi = self._pods.get(uid)
            if qpi is not None and qpi.generation == gen and qpi.where == ACTIVE:
                self._take(qpi)
                return qpi
        return None

    def _take(self, qpi: QueuedPodInfo) -> None:
        self._move(qpi, IN_FLIGHT)
        qpi.attempts += 1
        if qpi.initial_attempt is None:
            qpi.initial_attempt = self.clock()

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits for one. None once the queue is closed."""
        while not self._closed:
            qpi = self.pop_nowait()
            if qpi is not None:
                return qpi
            self._wakeup.clear()
            # idle: the pending gauges say what waits (gated pods too) within a second, as the
            # loop's maintenance reports them only between cycles
            self.report()
            timeout = 1.0
            if self._backoff:
                timeout = min(max(self._backoff[0][0] - self.clock(), 0.001), timeout)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
        return None

    def pop_group(self, group_key: str, exclude: str = "") -> list[QueuedPodInfo]:
        """Take every other queued member of a gang (active, backoff or unschedulable)."""
        members = []
        for qpi in self._pods.values():
            if (
                qpi.uid != exclude
                and qpi.pod.group_key == group_key
                and qpi.where in (ACTIVE, BACKOFF, UNSCHEDULABLE)
            ):
                members.append(qpi)
        for qpi in members:
            self._take(qpi)
        return members

    # -- after an attempt ----------------------------------------------------------------------
    def done(self, uid: str) -> None:
        """The pod is placed (assumed); it leaves the queue."""
        self.delete(uid)

    def requeue_unschedulable(self, qpi: QueuedPodInfo, plugins: Iterable[str], message: str = "") -> None:
        """No node fits: park the pod until a relevant event (or the 5-minute flush)."""
        self._pods.setdefault(qpi.uid, qpi)
        qpi.unschedulable_plugins = set(plugins)
        qpi.last_message, qpi.last_error = message, False
        qpi.backoff_until = self.clock() + self._backoff_for(qpi.attempts)
        qpi.parked_at = self.clock()
        self._move(qpi, UNSCHEDULABLE)

    def requeue_backoff(self, qpi: QueuedPodInfo, message: str = "", *, error: bool = True) -> None:
        """An error or a failed binding (``error`` False: rejected at Permit): retry after the backoff."""
        if qpi.uid not in self._pods:
            self._pods[qpi.uid] = qpi
        qpi.last_message, qpi.last_error = message, error
        qpi.backoff_until = self.clock() + self._backoff_for(qpi.attempts)
        self._push_backoff(qpi)

    # -- events --------------------------------------------------------------------------------
    def _wants(self, qpi: QueuedPodInfo, event: ClusterEvent) -> bool:
        regs = self.profiles.hints_for(qpi.profile)
        plugins = qpi.unschedulable_plugins
        if not plugins:
            return True
        for plugin, reg in regs:
            if plugin in plugins and reg.kind & event.kind and (reg.hint is None or reg.hint(qpi.pod, event)):
                return True
        return False

    def _requeue_after_event(self, qpi: QueuedPodInfo, now: float) -> None:
        """A parked pod an event may help: PreEnqueue again (as kube's move to the active queue),
        then backoff or active."""
        if self._gated(qpi):
            return
        if qpi.backoff_until > now:
            self._push_backoff(qpi)
        else:
            self._push_active(qpi)

    def _candidates(self, event: ClusterEvent) -> list[QueuedPodInfo]:
        """The parked pods an event may concern, in the order they were parked: those parked by
        a plugin registered for the event's kind (only the pods its ``targets`` names, when it
        names them), and those parked with no plugin to ask."""
        found: dict[str, QueuedPodInfo] = {}
        for profile in {profile for profile, _ in self._index}:
            found.update(self._index.get((profile, ""), {}))
            for plugin, reg in self.profiles.hints_for(profile):
                bucket = self._index.get((profile, plugin))
                if not bucket or not reg.kind & event.kind:
                    continue
                targets = reg.targets(event) if reg.targets is not None else None
                if targets is None:
                    found.update(bucket)
                else:
                    found.update((uid, bucket[uid]) for uid in targets if uid in bucket)
        return sorted(found.values(), key=lambda q: q.parked_seq)

    def on_event(self, event: ClusterEvent) -> int:
        """A cluster event: move the parked pods it may help. Returns how many moved."""
        if not self._counts[UNSCHEDULABLE] and not self._counts[GATED]:
            return 0
        now = self.clock()
        moved = 0
        for qpi in self._candidates(event):
            if qpi.where == UNSCHEDULABLE and self._wants(qpi, event):
                self._requeue_after_event(qpi, now)
                moved += qpi.where != GATED
            elif qpi.where == GATED and self._wants(qpi, event):
                self._admit(qpi)
                moved += qpi.where != GATED
        return moved

    def move_all(self) -> None:
        """Retry every parked pod (e.g. after a profile change)."""
        now = self.clock()
        for qpi in list(self._parked.values()):
            if qpi.where == UNSCHEDULABLE:
                self._requeue_after_event(qpi, now)
