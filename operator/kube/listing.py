"""Paged list calls returning plain dicts (no model deserialisation: faster, and exact)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp

from shoal.kube.rest import METADATA_LIST, RawClient, message_of, retry_after_of

log = logging.getLogger("shoal.listing")


async def list_all(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item of a kubernetes-asyncio list call, as plain dicts, 1,000 per page."""
    items: list[dict[str, Any]] = []
    token = None
    while True:
        resp = await method(*args, _preload_content=False, limit=1000, _continue=token, **kwargs)
        try:
            body = await resp.json()
        finally:
            resp.release()
        items.extend(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items


class ListError(Exception):
    """A listing the API server refused (HTTP status ``code``; ``retry_after``: the seconds its
    Status asked the client to wait, ``details.retryAfterSeconds``, as priority-and-fairness
    sends with a 429)."""

    def __init__(self, path: str, code: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"listing {path}: HTTP {code} {message[:200]}")
        self.code = code
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """What may pass if asked again: too many requests, or a server-side failure."""
        return self.code == 429 or self.code >= 500


#: what a listing may meet that passes (the API server busy, restarting or out of reach)
TRANSIENT = (aiohttp.ClientError, TimeoutError, OSError)


async def list_retrying(
    raw: RawClient,
    path: str,
    *,
    what: str,
    backoff: tuple[float, float] = (0.2, 5.0),
    **kwargs: Any,
) -> Listing:
    """:func:`list_objects`, asked again for as long as the trouble may pass — 429 (after the
    ``Retry-After`` the API server gave, at least), 5xx, a cut connection, a timeout — with a
    doubling delay from ``backoff[0]`` up to ``backoff[1]``, each wait logged with what it waits
    for (client-go's reflectors retry their listings the same way). A refusal that will not pass
    (403, 404) is raised at once; so is cancellation."""
    delay = backoff[0]
    while True:
        try:
            return await list_objects(raw, path, **kwargs)
        except ListError as exc:
            if not exc.transient:
                raise
            wait = max(delay, exc.retry_after or 0.0)
            reason = f"HTTP {exc.code}" + (f", Retry-After {exc.retry_after:g} s" if exc.retry_after else "")
        except TRANSIENT as exc:
            wait, reason = delay, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        log.warning("listing %s failed (%s); listing again in %.1f s", what, reason, wait)
        await asyncio.sleep(wait)
        delay = min(delay * 2, backoff[1])


class Listing(list[dict[str, Any]]):
    """A listing's objects, and the resourceVersion it was served at (every page of a paged
    listing is served at the first page's): a watch from it misses nothing changed since."""

    resource_version: str = ""


async def list_objects(
    raw: RawClient,
    path: str,
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
    metadata_only: bool = False,
    timeout: float = 60.0,
) -> Listing:
    """Every object of a collection path (``wire.Resource.path()``), as plain dicts, 1,000 per page;
    ``metadata_only``: each with its ``metadata`` alone (a fraction of the bytes to send and decode).

    Any resource of any group is listed the same way, so a new watched kind needs no client class.
    Raises :class:`ListError` when the API server refuses (404: a CRD not installed).
    """
    items = Listing()
    items.resource_version = await list_each(
        raw,
        path,
        items.append,
        field_selector=field_selector,
        label_selector=label_selector,
        metadata_only=metadata_only,
        timeout=timeout,
    )
    return items


async def list_each(
    raw: RawClient,
    path: str,
    each: Callable[[dict[str, Any]], object],
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
    metadata_only: bool = False,
    timeout: float = 60.0,
) -> str:
    """Call ``each`` on every object of a :func:`list_objects` listing, a page (1,000 objects) at a
    time; returns the listing's resourceVersion. Each page is let go before the next is asked for:
    a caller that keeps only something of each object (the re-list check, its identities) never
    holds a listing of every pod while other tasks allocate what they keep, which would leave
    those long-lived objects scattered over memory the listing had taken (the soak saw the
    scheduler's resident size step up by megabytes at its first re-list this way)."""
    params: dict[str, str] = {"limit": "1000"}
    if field_selector:
        params["fieldSelector"] = field_selector
    if label_selector:
        params["labelSelector"] = label_selector
    version = ""
    while True:
        code, body = await raw.request(
            "GET",
            f"{path}?{urlencode(params)}",
            accept=METADATA_LIST if metadata_only else "application/json",
            timeout=timeout,
        )
        if code >= 300 or not isinstance(body, dict):
            raise ListError(path, code, message_of(body), retry_after_of(body))
        meta = body.get("metadata") or {}
        version = version or str(meta.get("resourceVersion") or "")
        token = meta.get("continue")
        _each(body.get("items") or [], each)
        del body, meta  # the page is not kept alive while the next one is awaited
        if not token:
            return version
        params["continue"] = str(token)


def _each(objs: list[dict[str, Any]], each: Callable[[dict[str, Any]], object]) -> None:
    """``each`` on every object of one page. A function of its own so that its loop variable
    ends with it: a loop in :func:`list_each` would keep the page's last object alive while the
    next page is awaited."""
    for obj in objs:
        each(obj)
