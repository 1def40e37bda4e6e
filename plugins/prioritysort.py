"""PrioritySort (QueueSort): higher ``spec.priority`` first, then the earlier-queued pod."""

from __future__ import annotations

from typing import Any

from shoal.core.interfaces import Handle
from shoal.core.objects import PodInfo
from shoal.core.profile import PluginEntry

NAME = "PrioritySort"


def sort_key(priority: int, enqueued: float) -> tuple[int, float]:
    """Smallest first: negated priority, then the time the pod entered the queue."""
    return (-priority, enqueued)


class PrioritySort:
    name = NAME

    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        return sort_key(pod.priority, enqueued)


def new(args: None, handle: Handle) -> PrioritySort:
    return PrioritySort()


ENTRY = PluginEntry(NAME, new, None, PrioritySort)
