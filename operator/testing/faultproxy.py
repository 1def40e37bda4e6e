"""A fault-injecting proxy between a client (shoal) and a real kube-apiserver.

Why: a production API server answers 429 with ``Retry-After`` under priority-and-fairness,
500 and 504 when etcd is slow, stalls, drops watch streams on restarts and load-balancer
timeouts, and cuts connections after it has acted on a request (a binding that was made, but
whose answer never arrived). The tests that prove shoal survives all of that need those faults on
demand, at a rate, against the real API server: this proxy forwards every request (plain HTTP on
loopback in, HTTPS to the API server out, the client's bearer token passed through) and, for a
share of them, answers with a fault instead:

* ``429``: ``Too Many Requests`` with ``Retry-After`` (the request is not forwarded);
* ``500`` / ``504``: an internal error or a gateway timeout, as a Status (not forwarded);
* ``slow``: forwarded after a delay;
* ``cut``: forwarded — the API server acts on it — and the connection is then closed before
  any answer reaches the client.

Watches (``watch=true``) are streamed through; with ``watch_drop_after`` each is cut after a
random time up to that many seconds, as an API server restart or an idle timeout cuts them.
What was injected is counted per fault (:attr:`FaultProxy.injected`), so a test can check the
faults really happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

FAULTS = ("429", "500", "504", "slow", "cut")
#: hop-by-hop headers a proxy does not pass on (RFC 9110), and those aiohttp sets itself
_SKIP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Transfer-Encoding",
        "TE",
        "Trailer",
        "Upgrade",
        "Proxy-Authorization",
        "Proxy-Authenticate",
        "Host",
        "Content-Length",
        "Content-Encoding",
    )
)


@dataclass
class FaultPlan:
    """What to inject. ``rate``: the share of requests (watches excluded) that get a fault, drawn
    from ``faults``; ``methods``: only requests of these methods (default: all); a path containing
    one of ``spare`` is never touched (say, the Lease, to keep leadership out of a test)."""

    rate: float = 0.0
    faults: tuple[str, ...] = FAULTS
    retry_after: int = 1
    slow_seconds: float = 1.0
    watch_drop_after: float | None = None
    methods: frozenset[str] | None = None
    spare: tuple[str, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown or not self.faults:
            raise ValueError(f"unknown faults {unknown}; choose from {', '.join(FAULTS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate {self.rate} is not in [0, 1]")


@dataclass
class FaultProxy:
    """``async with FaultProxy(upstream, plan) as proxy``: ``proxy.url`` reaches ``upstream``
    (the API server's https URL) through the faults; ``proxy.kubeconfig(admin, path)`` writes a
    kubeconfig like ``admin`` that goes through it."""

    upstream: str
    plan: FaultPlan = field(default_factory=FaultPlan)
    host: str = "127.0.0.1"
    port: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    #: requests forwarded, by method (faults included where the request reached the API server)
    forwarded: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE  # loopback to the test API server's self-signed certificate
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls, limit=0), auto_decompress=False
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def kubeconfig(self, admin: Path, path: Path) -> Path:
        """A copy of the kubeconfig ``admin`` (JSON or YAML) whose clusters point at the proxy."""
        import yaml

        doc: dict[str, Any] = yaml.safe_load(admin.read_text())
        for cluster in doc.get("clusters") or ():
            cluster["cluster"] = {"server": self.url}
        path.write_text(json.dumps(doc))
        return path

    def _fault_for(self, request: web.Request) -> str | None:
        plan = self.plan
        if plan.rate <= 0.0 or request.query.get("watch") in ("true", "1"):
            return None
        if plan.methods is not None and request.method not in plan.methods:
            return None
        if any(s in request.path for s in plan.spare):
            return None
        if self._rng.random() >= plan.rate:
            return None
        return self._rng.choice(plan.faults)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._fault_for(request)
        if fault is not None:
            self.injected[fault] += 1
        if fault == "429":
            return _status(429, "TooManyRequests", "injected: too many requests", self.plan.retry_after)
        if fault == "500":
            return _status(500, "InternalError", "injected: internal error")
        if fault == "504":
            return _status(504, "Timeout", "injected: the server was unable to return a response in time")
        if fault == "slow":
            await asyncio.sleep(self.plan.slow_seconds)
        body = await request.read()
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP}
        url = self.upstream.rstrip("/") + request.rel_url.path_qs
        watch = request.query.get("watch") in ("true", "1")
        self.forwarded[request.method] += 1
        timeout = aiohttp.ClientTimeout(total=None if watch else 120, sock_read=None if watch else 120)
        async with self._session.request(
            request.method, url, data=body or None, headers=headers, timeout=timeout, allow_redirects=False
        ) as upstream:
            if fault == "cut":
                await upstream.read()  # the API server has acted; the client never hears of it
                _cut(request)
                return web.Response(status=502)  # never sent: the transport is closed
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _SKIP}
            if upstream.headers.get("Content-Encoding"):
                out_headers["Content-Encoding"] = upstream.headers["Content-Encoding"]
            if not watch:
                return web.Response(status=upstream.status, body=await upstream.read(), headers=out_headers)
            response = web.StreamResponse(status=upstream.status, headers=out_headers)
            await response.prepare(request)
            drop = self.plan.watch_drop_after
            deadline = asyncio.get_running_loop().time() + self._rng.uniform(0.2, drop) if drop else None
            with contextlib.suppress(ConnectionError, asyncio.CancelledError, aiohttp.ClientError):
                async for chunk in _chunks(upstream, deadline):
                    await response.write(chunk)
            if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                self.injected["watch-drop"] += 1
                _cut(request)
            return response


async def _chunks(upstream: aiohttp.ClientResponse, deadline: float | None) -> Any:
    """The upstream body as it arrives, until it ends or ``deadline`` (loop time) passes."""
    loop = asyncio.get_running_loop()
    while True:
        wait = None if deadline is None else deadline - loop.time()
        if wait is not None and wait <= 0:
            return
        try:
            chunk = await asyncio.wait_for(upstream.content.readany(), wait)
        except TimeoutError:
            return
        if not chunk:
            return
        yield chunk


def _cut(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _status(status: int, reason: str, message: str, retry_after: int | None = None) -> web.Response:
    """A Status as the API server sends it (a 429 of priority-and-fairness carries
    ``details.retryAfterSeconds`` and the ``Retry-After`` header)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status,
    }
    headers = None
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
        headers = {"Retry-After": str(retry_after)}
    return web.json_response(body, status=status, headers=headers)
