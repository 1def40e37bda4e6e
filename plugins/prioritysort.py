"""PrioritySort (QueueSort): higher ``spec.priority`` first, then the older pod.

Age is the pod's ``creationTimestamp`` (whole seconds), then the time it entered this scheduler's
queue: after a restart or a fail-over, pods of equal priority keep their order instead of coming
out in watch order.
"""

from __future__ import annotations

from typing import Any

from shoal.core.framework.interfaces import Handle
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.objects import PodInfo

NAME = "PrioritySort"


def sort_key(priority: int, enqueued: float, created: float = 0.0) -> tuple[int, float, float]:
    """Smallest first: negated priority, then creation time, then the time the pod was queued."""
    return (-priority, created, enqueued)


class PrioritySort:
    name = NAME

    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        return sort_key(pod.priority, enqueued, pod.created)


def new(args: None, handle: Handle) -> PrioritySort:
    return PrioritySort()


ENTRY = PluginEntry(NAME, new, None, PrioritySort)
