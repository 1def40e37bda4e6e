"""Paged list calls returning plain dicts (no model deserialisation: faster, and exact)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from shoal.kube.rest import METADATA_LIST, RawClient, message_of


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
    """A listing the API server refused (HTTP status ``code``)."""

    def __init__(self, path: str, code: int, message: str) -> None:
        super().__init__(f"listing {path}: HTTP {code} {message[:200]}")
        self.code = code


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
    params: dict[str, str] = {"limit": "1000"}
    if field_selector:
        params["fieldSelector"] = field_selector
    if label_selector:
        params["labelSelector"] = label_selector
    while True:
        code, body = await raw.request(
            "GET",
            f"{path}?{urlencode(params)}",
            accept=METADATA_LIST if metadata_only else "application/json",
            timeout=timeout,
        )
        if code >= 300 or not isinstance(body, dict):
            raise ListError(path, code, message_of(body))
        items.extend(body.get("items") or [])
        meta = body.get("metadata") or {}
        items.resource_version = items.resource_version or str(meta.get("resourceVersion") or "")
        token = meta.get("continue")
        if not token:
            return items
        params["continue"] = str(token)
