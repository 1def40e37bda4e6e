"""kopf as shoal configures it: the watcher's hand-over of new objects without a loop turn each."""

from __future__ import annotations

import asyncio
import inspect

import kopf
import pytest
from kopf._cogs.aiokits import aiotasks

from shoal.operator_app import kopf_glue


@pytest.fixture
def kopf_spawn() -> object:
    """kopf's own ``Scheduler.spawn``, put back after the test."""
    original = aiotasks.Scheduler.spawn
    yield original
    aiotasks.Scheduler.spawn = original  # type: ignore[method-assign]


def test_configure_applies_lean_spawn_to_the_installed_kopf(kopf_spawn: object) -> None:
    """Fails when a kopf upgrade changes Scheduler.spawn: lean_spawn must then be looked at again."""
    settings = kopf.OperatorSettings()
    kopf_glue.configure(settings, 300.0)
    assert aiotasks.Scheduler.spawn is kopf_glue._spawn_without_yield
    assert kopf_glue.lean_spawn()  # idempotent
    assert settings.posting.enabled is False and settings.watching.server_timeout == 300


async def test_spawn_hands_over_without_a_loop_turn_and_the_work_still_runs(kopf_spawn: object) -> None:
    """kopf's spawn suspends once per call (its trailing sleep(0)); the lean one never does, and
    every coroutine handed over still runs, started by kopf's spawner task."""
    ran: list[int] = []

    async def work(i: int) -> None:
        ran.append(i)

    def suspends(scheduler: aiotasks.Scheduler, i: int) -> bool:
        step = scheduler.spawn(work(i), name=f"work {i}")
        try:
            step.send(None)
        except StopIteration:
            return False
        step.close()
        return True

    scheduler = aiotasks.Scheduler()
    try:
        assert suspends(scheduler, -1)  # kopf's own method
        assert kopf_glue.lean_spawn()
        assert not any([suspends(scheduler, i) for i in range(100)])
        assert ran == []  # handed over, not started: kopf's spawner task starts them
        await asyncio.wait_for(scheduler.wait(), 5)
        assert sorted(ran) == list(range(-1, 100))
    finally:
        await scheduler.close()


async def test_a_closed_scheduler_refuses_new_work_and_closes_the_coroutine(kopf_spawn: object) -> None:
    assert kopf_glue.lean_spawn()
    scheduler = aiotasks.Scheduler()
    await scheduler.close()

    async def work() -> None:
        raise AssertionError("must not run")

    coro = work()
    with pytest.raises(RuntimeError, match="closed"):
        await scheduler.spawn(coro)
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


def test_an_unknown_kopf_spawn_is_left_as_it_is(kopf_spawn: object, caplog: pytest.LogCaptureFixture) -> None:
    async def other(self: aiotasks.Scheduler, coro: object, *, name: str | None = None) -> None:
        """A kopf version whose spawn does something else."""

    aiotasks.Scheduler.spawn = other  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.lean_spawn()
    assert aiotasks.Scheduler.spawn is other
    assert "left as it is" in caplog.text
