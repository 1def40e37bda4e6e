"""Leadership: what this replica does while it holds the Lease, and how it steps down.

Each term is one task group (:meth:`Leadership.lead`): the scheduling loop (vital: if it ends,
the term fails, which fails :meth:`Leadership.run` and so marks the replica broken) and side
tasks such as the bootstrap of profiles (their trouble is logged; the Lease renewal never waits
on them). Stepping down (:meth:`Leadership.follow`) cancels the term's group, then finishes or
releases the bindings in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from shoal.core.scheduling.scheduler import Scheduler
from shoal.kube.leader import LeaseElector
from shoal.operator_app.health import Health, vital
from shoal.operator_app.metrics import PromMetrics

log = logging.getLogger("shoal.operator")

#: what a new term starts beside the scheduling loop: name -> a coroutine factory
SideTasks = Callable[[], Mapping[str, Coroutine[Any, Any, Any]]]


class Leadership:
    def __init__(
        self,
        scheduler: Scheduler,
        metrics: PromMetrics,
        health: Health,
        *,
        elector: LeaseElector | None = None,
        renew_deadline: float = 10.0,
        on_lead: Callable[[], Awaitable[None]] | None = None,
        side_tasks: SideTasks | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.metrics = metrics
        self.health = health
        self.elector = elector
        self.renew_deadline = renew_deadline
        self.on_lead = on_lead
        self.side_tasks = side_tasks
        self.leading = False
        #: a graceful stop is draining bindings: their events are still reported
        self.draining = False
        self._term: asyncio.Task[None] | None = None
        self._host: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        """Campaign for the Lease (or lead at once without election) until cancelled.

        Terms run in this task group: a failed term raises out of it."""
        async with asyncio.TaskGroup() as host:
            self._host = host
            try:
                if self.elector is not None:
                    await self.elector.run(self.lead, self.follow)
                else:
                    await self._lead_alone()
            finally:
                self._host = None

    async def _lead_alone(self) -> None:
        await self.lead()
        try:
            await asyncio.Event().wait()
        finally:
            # a broken replica stops binding at once; a graceful stop lets bindings finish
            await self.follow(self.health.broken is not None)

    async def lead(self) -> None:
        """This replica holds the Lease: start a term (scheduling loop and side tasks)."""
        self.leading = True
        self.metrics.leader.set(1)
        self.scheduler.queue.move_all()
        spawn = self._host.create_task if self._host is not None else asyncio.get_running_loop().create_task
        self._term = spawn(self._run_term(), name="leadership-term")
        if self.on_lead is not None:
            await self.on_lead()

    async def _run_term(self) -> None:
        async with asyncio.TaskGroup() as term:
            loop = vital(self.health, "scheduling-loop", self.scheduler.run())
            term.create_task(loop, name="scheduling-loop")
            for name, coro in (self.side_tasks() if self.side_tasks is not None else {}).items():
                term.create_task(_logged(name, coro), name=name)

    async def follow(self, lost: bool) -> None:
        """Step down: stop scheduling, then finish or release in-flight bindings.

        ``lost``: the Lease could not be renewed, so another replica may lead already and place
        pods from a cache that does not know ours: cancel (and release) every binding at once.
        Otherwise (graceful stop) the Lease is still ours: bindings get ``renew_deadline`` seconds
        to finish — less than the lease duration, so no one else leads meanwhile — and their
        events are still reported; the Lease is released right after.
        """
        was = self.leading
        self.leading = False
        self.metrics.leader.set(0)
        term, self._term = self._term, None
        if term is not None:
            term.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await term
        if was:
            self.draining = not lost
            try:
                if lost:
                    await self.scheduler.drain(grace=0.0, close_queue=False)
                else:
                    await self._drain_while_leading()
            finally:
                self.draining = False

    async def _drain_while_leading(self) -> None:
        """Graceful drain (the elector renews the Lease meanwhile); if the Lease is lost after
        all, cancel what is left at once, as for a lost Lease."""
        drain = asyncio.ensure_future(self.scheduler.drain(grace=self.renew_deadline, close_queue=False))
        if self.elector is None:
            await drain
            return
        lost = asyncio.ensure_future(self.elector.lease_lost.wait())
        try:
            await asyncio.wait({drain, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not drain.done():
                log.warning("the Lease was lost while draining; cancelling the bindings still in flight")
                self.draining = False
                await self.scheduler.drain(grace=0.0, close_queue=False)
            await drain
        finally:
            lost.cancel()


async def _logged(name: str, coro: Coroutine[Any, Any, Any]) -> None:
    """A side task of a term: its failure is logged, never the term's."""
    try:
        await coro
    except Exception:
        log.exception("%s failed", name)
