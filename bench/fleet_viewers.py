"""Fleet-page viewers for ``make bench``'s ``basic_viewer`` scenario: what an open page costs the
scheduler.

Each viewer does what the page does in a browser (shoal.views.page): it loads ``/fleet`` once, then
asks ``/fleet/data.json`` every poll interval (``POLL_MS``) until stopped. They poll shoal's
plain-HTTP metrics port, where ``shoal run --web`` serves the page to whoever reaches it (the bench
binds it to 127.0.0.1). Recorded: requests answered, failures, and the answer times.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import aiohttp

from shoal.views.page import POLL_MS

#: viewers with the page open at once
VIEWERS = 3


class Viewers:
    def __init__(self, base_url: str, count: int = VIEWERS, interval_s: float = POLL_MS / 1000) -> None:
        self.base_url, self.count, self.interval_s = base_url, count, interval_s
        self.times_ms: list[float] = []
        self.failures = 0
        self.bytes = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None
        self._first = asyncio.Event()

    async def __aenter__(self) -> Viewers:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        self._tasks = [asyncio.create_task(self._view(i)) for i in range(self.count)]
        # the first page is open before the measured run begins
        await asyncio.wait_for(self._first.wait(), 60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()

    async def _get(self, path: str) -> None:
        assert self._session is not None
        began = time.monotonic()
        try:
            async with self._session.get(self.base_url + path) as resp:
                body = await resp.read()
                ok = resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok, body = False, b""
        self._first.set()
        if not ok:
            self.failures += 1
            return
        self.times_ms.append((time.monotonic() - began) * 1000)
        self.bytes = len(body)

    async def _view(self, index: int) -> None:
        # viewers opened a moment apart, as people do, so their polls do not all land together
        await asyncio.sleep(index * self.interval_s / self.count)
        await self._get("/fleet")
        while True:
            began = time.monotonic()
            await self._get("/fleet/data.json")
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - began)))

    def summary(self) -> dict[str, Any]:
        times = sorted(self.times_ms)
        return {
            "viewers": self.count,
            "interval_s": self.interval_s,
            "answered": len(times),
            "failures": self.failures,
            "p50_ms": statistics.median(times) if times else None,
            "p99_ms": times[max(0, int(len(times) * 0.99) - 1)] if times else None,
            "document_bytes": self.bytes,
        }
