"""kube/rest.reuse_most_recent: after a burst, a steady load uses few connections and the rest idle out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from shoal.kube.rest import reuse_most_recent

BURST = 12
KEEPALIVE = 60.0  # longer than the test: the order alone decides which connection is used


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int], asyncio.Event, asyncio.Event]]:
    """A loopback server recording the client port of each request; ``/slow`` waits for ``go``,
    and ``arrived`` is set once ``BURST`` of them wait."""
    ports: list[int] = []
    go, arrived = asyncio.Event(), asyncio.Event()
    waiting = [0]

    async def fast(request: web.Request) -> web.Response:
        ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.Response:
        waiting[0] += 1
        if waiting[0] == BURST:
            arrived.set()
        await go.wait()
        return await fast(request)

    app = web.Application()
    app.router.add_get("/fast", fast)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", ports, go, arrived
    finally:
        await runner.cleanup()


async def test_after_a_burst_a_steady_load_keeps_one_connection(
    server: tuple[str, list[int], asyncio.Event, asyncio.Event],
) -> None:
    url, ports, go, arrived = server
    connector = aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE)
    reuse_most_recent(connector)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def get(path: str) -> None:
            async with session.get(url + path) as resp:
                await resp.read()

        burst = [asyncio.create_task(get("/slow")) for _ in range(BURST)]
        await asyncio.wait_for(arrived.wait(), 10)  # every request of the burst holds a connection
        go.set()
        await asyncio.gather(*burst)
        assert len(set(ports)) == BURST
        # One request at a time: first in, first out, each of the burst's connections would be
        # taken in turn (and under a steady load none would idle out); most recent first, one is.
        ports.clear()
        for _ in range(2 * BURST):
            await get("/fast")
    assert len(set(ports)) == 1


def test_a_connector_without_the_private_pool_is_left_alone() -> None:
    class Other:
        pass

    other = Other()
    reuse_most_recent(other)  # type: ignore[arg-type]
    assert not hasattr(other, "_release")
