"""DefaultBinder (Bind): hands the pod to the scheduler's Binder.

The Kubernetes adapter's binder posts a v1 Binding carrying the pod's UID (a recreated pod of the
same name is never bound by mistake); the simulator's binder updates the in-memory cluster.
"""

from __future__ import annotations

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Binder, Handle
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, binder: Binder) -> None:
        self.binder = binder

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return await self.binder.bind(pod, node)


def new(args: None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle.binder)


ENTRY = PluginEntry(NAME, new, None, DefaultBinder)
