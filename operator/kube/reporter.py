"""KubeReporter: scheduling outcomes as Events and pod conditions, like kube-scheduler writes them.

* ``Scheduled`` (Normal): ``Successfully assigned <ns>/<pod> to <node>``;
* ``FailedScheduling`` (Warning): the core's message, e.g. ``0/5 nodes are available: ...``;
* pod condition ``PodScheduled=False``, reason ``Unschedulable`` (the API server sets it True when
  the Binding is accepted).
* a pod held before the queue (a PreEnqueue plugin said no): ``WaitingForGang`` (Normal: its gang
  has fewer pods than its quorum) or ``PodGroupMissing`` / ``NotReadyForScheduling`` (Warning),
  with ``PodScheduled=False`` reason ``NotReadyForScheduling`` (KEP-5501's), paced by
  ``core.reporting.HeldPacer``: only once held 5 s, then on a new reason, or a new message at most
  once per ``dedup_seconds``.

Events are ``events.k8s.io/v1`` with ``reportingController`` = the profile's schedulerName, as
kube-scheduler reports them, so ``kubectl describe pod`` shows them the usual way.

The core calls the reporter synchronously from the scheduling cycle; the writes happen on a
bounded queue drained by a few worker tasks, so a slow API server never stalls scheduling. Not
flooding: at most one event per attempt, and the same message for the same pod is not repeated
within ``dedup_seconds`` (kube-scheduler's event correlator does the same); the condition is only
patched when its message changes.

An event carries the time of what it reports, not of its write: with several workers a
``FailedScheduling`` queued before a pod's ``Scheduled`` may be written after it, and readers
(``kubectl describe``, the demo) order events by ``eventTime``. A queued ``PodScheduled=False``
whose pod has been bound since is dropped: written late, it would overwrite the ``True`` the API
server set on binding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from shoal.core.scheduling.reporting import NOT_READY_FOR_SCHEDULING, HeldPacer
from shoal.core.state.objects import PodInfo
from shoal.kube.rest import RawClient, write_retrying
from shoal.kube.wire import EVENTS, PODS, STRATEGIC_MERGE_PATCH, micro_time, rfc3339
from shoal.plugins.coscheduling import WAITING_FOR_GANG

log = logging.getLogger("shoal.reporter")


K = TypeVar("K")
V = TypeVar("V")


def problems_note(pod: PodInfo) -> str:
    return (" (ignored: " + "; ".join(pod.problems.values()) + ")") if pod.problems else ""


class KubeReporter:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        instance: str,
        workers: int = 4,
        max_pending: int = 10_000,
        dedup_seconds: float = 600.0,
        held_delay: float = 5.0,
        enabled: Callable[[], bool] = lambda: True,
        on_dropped: Callable[[], None] = lambda: None,
    ) -> None:
        self.raw = RawClient(api)
        #: called for each write dropped (shoal_events_dropped_total)
        self.on_dropped = on_dropped
        self.instance = instance
        self.enabled = enabled
        self.dedup_seconds = dedup_seconds
        self._queue: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue(max_pending)
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._recent: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._conditions: OrderedDict[str, str] = OrderedDict()
        #: uids bound or gone -> when: a write still queued for one is stale (kept ``dedup_seconds``,
        #: far longer than a queued write waits; every pod ever bound stayed here until 50,000)
        self._settled: OrderedDict[str, float] = OrderedDict()
        #: PodScheduled=False conditions queued and not written yet (pod uid -> reason, message, when)
        self._unsent: dict[str, tuple[str, str, float]] = {}
        #: pods held before the queue: when each is worth an event (``core.reporting.HeldPacer``)
        self.held_pacer = HeldPacer(delay=held_delay, interval=dedup_seconds)
        self._held_timers: dict[str, asyncio.TimerHandle] = {}
        self.dropped = 0
        self.written = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._work(), name=f"reporter-{i}") for i in range(self._workers)]

    async def stop(self, grace: float = 5.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), grace)
        for timer in self._held_timers.values():
            timer.cancel()
        self._held_timers.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def flush(self) -> None:
        await self._queue.join()

    async def _work(self) -> None:
        while True:
            job = await self._queue.get()
            try:
                await job()
                self.written += 1
            except ApiException as exc:
                if exc.status != 404:  # the pod is gone: nothing to report on
                    log.warning("reporting failed: HTTP %s %s", exc.status, exc.reason)
            except Exception:
                log.exception("reporting failed")
            finally:
                self._queue.task_done()

    def _submit(self, job: Callable[[], Awaitable[None]]) -> bool:
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self.dropped += 1
            self.on_dropped()
            return False
        return True

    def _fresh(self, pod: PodInfo, reason: str, message: str) -> bool:
        key = (pod.uid, reason, message)
        now = time.monotonic()
        last = self._recent.get(key)
        if last is not None and now - last < self.dedup_seconds:
            return False
        _remember(self._recent, key, now)
        # an entry older than the dedup window says nothing any more: without this, one per
        # FailedScheduling message of every pod ever seen stayed (up to 50,000, messages included)
        expire_before(self._recent, now - self.dedup_seconds)
        return True

    # -- the Reporter protocol ------------------------------------------------------------------
    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None:
        if not self.enabled():
            return
        self.forget(pod.uid)
        where = f" ({note})" if note else ""
        note = f"Successfully assigned {pod.key} to {node}{where}{problems_note(pod)}"
        when = time.time()
        self._submit(lambda: self._event(pod, profile, "Normal", "Scheduled", "Binding", note, when))

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None:
        if not self.enabled():
            return
        note = message + problems_note(pod)
        when = time.time()
        if self._fresh(pod, "FailedScheduling", note):
            self._submit(
                lambda: self._event(pod, profile, "Warning", "FailedScheduling", "Scheduling", note, when)
            )
        reason = "SchedulerError" if error else "Unschedulable"
        if self._conditions.get(pod.uid) != f"{reason}:{note}":
            _remember(self._conditions, pod.uid, f"{reason}:{note}")
            self._unsent[pod.uid] = (reason, note, when)
            if not self._submit(lambda: self._send_unsent(pod)):
                self._unsent.pop(pod.uid, None)

    def claim_condition(self, uid: str) -> dict[str, Any] | None:
        """Take the ``PodScheduled=False`` condition queued for the pod and not written yet, for
        the caller to write in a patch of its own: the preemption executor puts it in the
        preemptor's nomination patch, one status write as kube-scheduler's ``updatePod`` makes
        (condition and ``nominatedNodeName`` together) instead of two. None if nothing is queued."""
        entry = self._unsent.pop(uid, None)
        if entry is None or uid in self._settled:
            return None
        return _condition_body(*entry)

    def held(self, pod: PodInfo, reason: str, message: str, profile: str) -> None:
        """Held before the queue: an event and ``PodScheduled=False`` reason
        ``NotReadyForScheduling``, paced by :class:`HeldPacer` (first after ``held_delay``)."""
        now = time.monotonic()
        at = self.held_pacer.hold(pod, reason, message, profile, now)
        if pod.uid not in self._held_timers:
            self._arm_held(pod.uid, at - now)

    def released(self, pod: PodInfo) -> None:
        self.held_pacer.release(pod.uid)
        timer = self._held_timers.pop(pod.uid, None)
        if timer is not None:
            timer.cancel()

    def _arm_held(self, uid: str, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._held_timers[uid] = loop.call_later(max(delay, 0.0), self._report_held, uid)

    def _report_held(self, uid: str) -> None:
        self._held_timers.pop(uid, None)
        if not self.enabled():
            return  # not leading: nothing reported (again on the next re-evaluation)
        now = time.monotonic()
        entry, again = self.held_pacer.due(uid, now)
        if again is not None:
            self._arm_held(uid, again - now)
        if entry is None:
            return
        pod, reason, profile = entry.pod, entry.reason, entry.profile
        note, when = entry.message + problems_note(pod), time.time()
        kind = "Normal" if reason == WAITING_FOR_GANG else "Warning"
        self._submit(lambda: self._event(pod, profile, kind, reason, "Scheduling", note, when))
        _remember(self._conditions, pod.uid, f"{NOT_READY_FOR_SCHEDULING}:{note}")
        self._submit(lambda: self._condition(pod, NOT_READY_FOR_SCHEDULING, note, when))

    def forget(self, uid: str) -> None:
        """The pod is bound (by anyone) or gone: a condition still queued for it is stale."""
        self._conditions.pop(uid, None)
        self._unsent.pop(uid, None)
        now = time.monotonic()
        _remember(self._settled, uid, now)
        expire_before(self._settled, now - self.dedup_seconds)

    # -- writes --------------------------------------------------------------------------------
    async def _event(
        self, pod: PodInfo, profile: str, kind: str, reason: str, action: str, note: str, when: float
    ) -> None:
        body = event_body(
            pod.namespace,
            pod.name,
            pod.uid,
            controller=profile,
            instance=f"{profile}-{self.instance}",
            kind=kind,
            reason=reason,
            action=action,
            note=note,
            when=when,
        )
        await self._send("POST", EVENTS.path(namespace=pod.namespace), body, f"event {reason} for {pod.key}")

    async def _send_unsent(self, pod: PodInfo) -> None:
        entry = self._unsent.pop(pod.uid, None)
        if entry is not None:  # else claimed (written with the nomination), or a newer one was sent
            await self._condition(pod, *entry)

    async def _condition(self, pod: PodInfo, reason: str, message: str, when: float) -> None:
        if pod.uid in self._settled:
            return  # bound since this was queued: the API server's PodScheduled=True stands
        patch = {
            "metadata": {"uid": pod.uid},  # a precondition: never touch a recreated pod of that name
            "status": {"conditions": [_condition_body(reason, message, when)]},
        }
        path = PODS.path(pod.name, namespace=pod.namespace, sub="status")
        what = f"condition PodScheduled for {pod.key}"
        await self._send("PATCH", path, patch, what, content_type=STRATEGIC_MERGE_PATCH)

    async def _send(
        self, method: str, path: str, body: Any, what: str, *, content_type: str = "application/json"
    ) -> None:
        """One write, sent again while its trouble may pass (:func:`~shoal.kube.rest.write_retrying`:
        the same body, so an event already made answers 409); 404 and 409 end it (the pod is gone,
        or recreated under that name). Events and conditions are best effort, as kube-scheduler's
        are: after the last attempt the write is given up, saying so."""
        await write_retrying(
            self.raw,
            method,
            path,
            body,
            what,
            content_type=content_type,
            done=lambda code: code < 300 or code in (404, 409),
            log=log,
        )


def event_body(
    namespace: str,
    name: str,
    uid: str,
    *,
    controller: str,
    instance: str,
    kind: str,
    reason: str,
    action: str,
    note: str,
    when: float,
    regarding: tuple[str, str] = ("v1", "Pod"),
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event about a pod (or the object of ``regarding``: its apiVersion and
    kind), as kube-scheduler writes them: named ``<object>.<unix nanoseconds in hex>``,
    ``reportingController`` the profile's schedulerName."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}"[:253], "namespace": namespace},
        "eventTime": micro_time(when),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "action": action,
        "reason": reason,
        "type": kind,
        "note": note[:1024],
        "regarding": {
            "apiVersion": regarding[0],
            "kind": regarding[1],
            "name": name,
            "namespace": namespace,
            "uid": uid,
        },
    }


def _condition_body(reason: str, message: str, when: float) -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(when),
        "lastProbeTime": None,
    }


def expire_before(recent: OrderedDict[K, float], before: float) -> None:
    """Drop the entries stored before ``before``, in a map of key -> when it was stored whose
    oldest entries come first (as :func:`_remember` keeps it: a stored key moves to the end)."""
    while recent:
        key, when = next(iter(recent.items()))
        if when >= before:
            return
        del recent[key]


def _remember(recent: OrderedDict[K, V], key: K, value: V, limit: int = 50_000) -> None:
    """Store ``key`` as the most recent entry, dropping the oldest beyond ``limit``."""
    recent[key] = value
    recent.move_to_end(key)
    while len(recent) > limit:
        recent.popitem(last=False)
