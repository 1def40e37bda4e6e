"""operator_app.memory: the C heap's free pages go back to the system once a minute."""

from __future__ import annotations

import asyncio
import contextlib
import platform

import pytest

from shoal.operator_app.memory import malloc_trim, trim_forever


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_has_malloc_trim_and_it_runs() -> None:
    trim = malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)  # 1: memory was released, 0: there was none to release


async def test_the_heap_is_trimmed_every_interval_until_cancelled() -> None:
    calls: list[int] = []
    twice = asyncio.Event()

    def trim(pad: int) -> int:
        calls.append(pad)
        if len(calls) == 2:
            twice.set()
        return 0

    task = asyncio.create_task(trim_forever(every=0.01, trim=trim))
    await asyncio.wait_for(twice.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert calls[:2] == [0, 0]


async def test_without_malloc_trim_the_task_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shoal.operator_app.memory.malloc_trim", lambda: None)
    await asyncio.wait_for(trim_forever(every=3600), 10)  # returns: nothing to trim with
