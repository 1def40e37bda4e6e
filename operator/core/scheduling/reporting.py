"""Where each scheduling attempt's outcome goes: events and conditions in the operator
(``kube/reporter.py``), a log in the simulator. The core itself does no I/O.

Pods held before the queue (a PreEnqueue plugin said no) are reported too, under a reason of
their own (:func:`held_reason`), so that ``kubectl describe pod`` says why a pod that was never
tried waits. The plugin that holds the pod names the reason
(:class:`~shoal.core.framework.interfaces.ReportsHold`: Coscheduling's ``WaitingForGang`` and
``PodGroupMissing``; none for scheduling gates, whose ``SchedulingGated`` condition the API server
already sets); any other hold is ``NotReadyForScheduling`` (e.g. a ResourceClaim not created yet:
KEP-5501's reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shoal.core.framework.interfaces import Plugin, ReportsHold
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status

#: the condition reason of a held pod (KEP-5501's ``PodReasonNotReadyForScheduling``)
NOT_READY_FOR_SCHEDULING = "NotReadyForScheduling"


def held_reason(plugin: Plugin | None, status: Status) -> str | None:
    """The event reason for a PreEnqueue rejection by ``plugin``, or None when it is not reported."""
    if isinstance(plugin, ReportsHold):
        return plugin.hold_reason(status)
    return NOT_READY_FOR_SCHEDULING


class Reporter(Protocol):
    """Where the outcome of each attempt goes (one call per pod per attempt, at most)."""

    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None: ...

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None: ...

    def held(self, pod: PodInfo, reason: str, message: str, profile: str) -> None:
        """The pod is held before the queue (each re-evaluation calls this again)."""

    def released(self, pod: PodInfo) -> None:
        """The pod is no longer held (admitted to the queue, bound or gone)."""


class NullReporter:
    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None:
        pass

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None:
        pass

    def held(self, pod: PodInfo, reason: str, message: str, profile: str) -> None:
        pass

    def released(self, pod: PodInfo) -> None:
        pass


@dataclass(slots=True)
class _Held:
    pod: PodInfo
    reason: str
    message: str
    profile: str
    since: float
    sent_reason: str = ""
    sent_message: str = ""
    sent_at: float = 0.0


class HeldPacer:
    """When a held pod is worth a report (pure, the clock is given). Not flooding:

    * nothing until the pod has been held ``delay`` seconds (KEP-5501 waits 5 s): a gang whose
      pods arrive in a burst reaches its quorum before anyone is told it waited;
    * then one report, and another only when the reason changes (no sooner than ``delay`` after
      the last one), or when the message changes (``has 2 of 8 pods`` to ``has 3 of 8``) and
      ``interval`` seconds have passed since the last one: a gang filling up slowly gives each
      member one report per ``interval``, never one per re-evaluation.
    """

    def __init__(self, delay: float = 5.0, interval: float = 600.0) -> None:
        self.delay = delay
        self.interval = interval
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, pod: PodInfo, reason: str, message: str, profile: str, now: float) -> float:
        """Record the latest verdict; returns when to call :meth:`due` next at the earliest."""
        entry = self._held.get(pod.uid)
        if entry is None:
            entry = self._held[pod.uid] = _Held(pod, reason, message, profile, now)
        entry.pod, entry.reason, entry.message, entry.profile = pod, reason, message, profile
        return max(entry.since + self.delay, now)

    def release(self, uid: str) -> None:
        self._held.pop(uid, None)

    def due(self, uid: str, now: float) -> tuple[_Held | None, float | None]:
        """(what to report now or None, when to look again or None)."""
        entry = self._held.get(uid)
        if entry is None:
            return None, None
        if entry.reason != entry.sent_reason:
            earliest = max(entry.since, entry.sent_at if entry.sent_reason else entry.since) + self.delay
        elif entry.message != entry.sent_message:
            earliest = entry.sent_at + self.interval
        else:
            return None, None  # already said
        if now < earliest:
            return None, earliest
        entry.sent_reason, entry.sent_message, entry.sent_at = entry.reason, entry.message, now
        return entry, None
