"""Health: is this replica ready, is it alive, and the rule for vital tasks.

A vital task (leader election, the scheduling loop, the PodGroup status loop) runs until the
process stops. If one ends — an exception, or returning at all — :func:`vital` marks the replica
broken *first* (``/livez`` fails, so the kubelet restarts it) and then raises out of its task
group, which cancels its siblings: the election steps down and releases the Lease, so a healthy
replica takes over at once. Cancellation (a stop) is never "broken".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

log = logging.getLogger("shoal.operator")


class VitalTaskEnded(RuntimeError):
    """A vital task returned: it must run until the process stops."""


class Health:
    def __init__(self) -> None:
        #: the caches are primed and the vital tasks started
        self.started = False
        #: why this replica is broken (a vital task ended), or None
        self.broken: str | None = None

    def ready(self) -> bool:
        return self.started and self.broken is None

    def alive(self) -> bool:
        return self.broken is None

    def fail(self, reason: str, exc: BaseException | None = None) -> None:
        if self.broken is not None:  # the first reason stands (the rest follow from it)
            log.debug("also: %s", reason)
            return
        self.broken = reason
        log.error("%s; /livez now fails so this replica is restarted", reason, exc_info=exc)


async def vital(health: Health, name: str, coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro``; if it ends other than by cancellation, mark ``health`` broken and raise."""
    try:
        await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        health.fail(f"task {name} ended: {exc!r}", exc)
        raise
    health.fail(f"task {name} ended")
    raise VitalTaskEnded(name)


async def run_vital(health: Health, tasks: Mapping[str, Coroutine[Any, Any, Any]]) -> None:
    """Run vital tasks in one task group until one ends (then all are cancelled, and this returns:
    ``health`` says why) or until cancelled."""
    try:
        async with asyncio.TaskGroup() as group:
            for name, coro in tasks.items():
                group.create_task(vital(health, name, coro), name=name)
    except* Exception:  # already logged by vital(); the replica now waits to be restarted
        pass
