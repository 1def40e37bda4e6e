"""Raw JSON requests over kubernetes-asyncio's own aiohttp session, for the hot path.

Why: per binding, event and condition, kubernetes-asyncio's generated layer validates parameters,
sanitises bodies, selects headers and builds a RESTResponse — a fifth of the operator's CPU under a
burst. These calls send a pre-built JSON body with the same session, TLS context and credentials
(token refreshes included, through ``Configuration.auth_settings``), and return status and body.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pydantic_core
from kubernetes_asyncio import client, config

log = logging.getLogger("shoal.rest")

#: Accept header of a list whose items carry only ``metadata`` (``PartialObjectMetadataList``, as
#: client-go's metadata informers ask for it), plain JSON from a server that cannot
METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"


def decode_json(data: str | bytes) -> Any:
    """JSON text to Python objects, as ``json.loads`` gives them (dicts, lists, str, int, float,
    bool, None), by pydantic-core's parser (installed with pydantic), about twice as fast on a
    pod; ``ValueError`` on bad input, as ``json.loads``."""
    return pydantic_core.from_json(data)


class RawClient:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.host = str(api.configuration.host or "").rstrip("/")

    async def _headers(self, content_type: str, accept: str = "application/json") -> dict[str, str]:
        headers = {"Accept": accept, "Content-Type": content_type}
        for auth in (await self.api.configuration.auth_settings()).values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[str(auth["key"])] = str(auth["value"])
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """Send ``body`` as JSON; returns (HTTP status, decoded JSON or text). Never raises on HTTP errors.
        ``accept``: the Accept header (e.g. :data:`METADATA_LIST`)."""
        session: Any = self.api.rest_client.pool_manager
        data = None if body is None else pydantic_core.to_json(body)
        async with session.request(
            method,
            self.host + path,
            data=data,
            headers=await self._headers(content_type, accept),
            timeout=timeout,
        ) as resp:
            raw = await resp.read()
        try:
            return resp.status, decode_json(raw) if raw else None
        except ValueError:
            return resp.status, raw.decode(errors="replace")

    async def stream(self, path: str, *, timeout: float) -> AsyncIterator[Any]:
        """GET ``path`` (a watch) and yield each JSON line as it arrives, until the server ends it.
        Raises :class:`StreamError` when the API server refuses."""
        session: Any = self.api.rest_client.pool_manager
        headers = await self._headers("application/json")
        async with session.request("GET", self.host + path, headers=headers, timeout=timeout) as resp:
            if resp.status >= 300:
                raise StreamError(f"GET {path}: HTTP {resp.status} {(await resp.text())[:200]}")
            async for line in resp.content:
                if line.strip():
                    yield decode_json(line)


def minor_of(body: Any) -> int:
    """The minor version in a ``/version`` body (``"38"``, or ``"38+"`` from some distributions);
    0 when it says none."""
    minor = str(body.get("minor") or "") if isinstance(body, dict) else ""
    digits = minor[: len(minor) - len(minor.lstrip("0123456789"))]
    return int(digits) if digits else 0


async def server_minor(raw: RawClient) -> int:
    """The API server's minor version (its ``/version``), 0 when it cannot be read: shoal writes
    what the cluster's own release would (a condition's reason) and never assumes the newest."""
    try:
        status, body = await raw.request("GET", "/version", timeout=10.0)
    except (aiohttp.ClientError, TimeoutError, OSError):
        return 0
    return minor_of(body) if status == 200 else 0


class StreamError(Exception):
    """A watch the API server refused."""


def retry_after_of(body: Any) -> float | None:
    """A Status body's ``details.retryAfterSeconds`` (priority-and-fairness sends it with a 429)."""
    if isinstance(body, dict):
        seconds = (body.get("details") or {}).get("retryAfterSeconds")
        if isinstance(seconds, int | float) and seconds > 0:
            return float(seconds)
    return None


#: how many times a write that may pass (429, 5xx, a cut connection, a timeout) is sent
WRITE_ATTEMPTS = 5


async def write_retrying(
    raw: RawClient,
    method: str,
    path: str,
    body: Any,
    what: str,
    *,
    content_type: str = "application/json",
    done: Callable[[int], bool] = lambda code: code < 300,
    log: logging.Logger = log,
) -> tuple[int, Any] | None:
    """Send one write (a patch, or a create whose repeat is refused with 409), again with the
    same body while the trouble may pass — 429 (after its Retry-After), 5xx, a cut connection,
    a timeout — up to :data:`WRITE_ATTEMPTS` times, with a doubling delay from 0.2 s. Each
    failure is one line of ``log`` saying what is written, why it failed and when it is tried
    again; never a traceback. Returns the last answer (status, body), or None when the API
    server was never reached. ``done``: the codes that end it (success, or a refusal the caller
    expects, such as 404 for a pod that is gone)."""
    delay = 0.2
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        wait = delay
        answer: tuple[int, Any] | None = None
        try:
            answer = await raw.request(method, path, body, content_type=content_type)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            code, reply = answer
            if done(code):
                return answer
            why = f"HTTP {code} {message_of(reply)[:300]}"
            if code != 429 and code < 500:
                log.warning("%s: %s", what, why)
                return answer
            wait = max(delay, retry_after_of(reply) or 0.0)
        if attempt == WRITE_ATTEMPTS:
            log.warning("%s: %s; given up after %d attempts", what, why, attempt)
            return answer
        log.warning("%s: %s; writing again in %.1f s", what, why, wait)
        await asyncio.sleep(wait)
        delay = min(delay * 2, 5.0)
    return None


def message_of(body: Any) -> str:
    """The ``message`` of a Status body, or the text."""
    if isinstance(body, dict):
        return str(body.get("message", body))
    return str(body)


async def connect(kubeconfig: str | None) -> client.ApiClient:
    """An API client: ``kubeconfig``, else in-cluster when run in a pod, else $KUBECONFIG."""
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        api = await config.new_client_from_config(config_file=kubeconfig)
    else:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.ApiClient()
    # aiohttp's trust_env reads ~/.netrc and proxy variables in a thread on *every* request;
    # the API server is reached directly (kubeconfig or in-cluster), so skip that per-request work.
    session = getattr(api.rest_client, "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False
    if session is not None:
        reuse_most_recent(session.connector)
    return api


def reuse_most_recent(connector: aiohttp.BaseConnector | None) -> None:
    """Make ``connector`` hand out its most recently released connection first.

    aiohttp's pool is first in, first out: under a steady stream of requests every idle
    connection is reused in turn, so none stays idle for the keep-alive timeout (15 s) and the
    pool never shrinks. After a burst (the bindings, events and status writes that queue while
    the API server restarts, up to ``binding_concurrency`` at once) the operator kept every
    connection it had opened, each with its TLS state and buffers: the soak measured the leader's
    connections to the API server going from 48 to 86 and about 14 MB of C memory (glibc, outside
    Python's allocator) staying in use after one restart. Most recent first, the connections a
    steady load does not need idle out after the burst; a burst still opens what it needs.

    aiohttp has no option for this; the release hook is its private ``_release`` and the pool its
    ``_conns`` (a deque per host, taken from the left). When either is missing (another aiohttp),
    the pool is left as it is.
    """
    release = getattr(connector, "_release", None)
    if connector is None or release is None or not isinstance(getattr(connector, "_conns", None), dict):
        return

    def release_to_front(key: Any, protocol: Any, *args: Any, **kwargs: Any) -> None:
        release(key, protocol, *args, **kwargs)
        pool = connector._conns.get(key)
        if pool and pool[-1][0] is protocol:
            pool.rotate(1)  # the connection just released is the next one taken

    connector._release = release_to_front  # type: ignore[method-assign]
