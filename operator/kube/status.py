"""Writing a ``status`` subresource by patch, and telling whether it needs writing.

A JSON merge patch (the default) replaces lists whole; a built-in kind's conditions list
(``listType=map`` keyed by type, as a native PodGroup's) is written by strategic merge patch
instead, which merges one condition and leaves the others as they are."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from shoal.kube.rest import RawClient, message_of
from shoal.kube.wire import MERGE_PATCH

log = logging.getLogger("shoal.status")


class StatusWriter(Protocol):
    """Writes ``status`` at ``path`` (a ``/status`` subresource) as a patch of content type
    ``patch``; True when the API took it."""

    async def write(
        self, path: str, status: Mapping[str, Any], what: str, *, patch: str = MERGE_PATCH
    ) -> bool: ...


class MergePatchStatus:
    """The StatusWriter of the operator: one patch per write."""

    def __init__(self, raw: RawClient) -> None:
        self.raw = raw

    async def write(
        self, path: str, status: Mapping[str, Any], what: str, *, patch: str = MERGE_PATCH
    ) -> bool:
        """False (logged unless 404: the object is gone) when refused or unreachable."""
        try:
            code, reply = await self.raw.request("PATCH", path, {"status": status}, content_type=patch)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("writing status of %s: %s", what, exc)
            return False
        if code >= 300 and code != 404:
            log.warning("writing status of %s: HTTP %s %s", what, code, message_of(reply)[:200])
        return code < 300


def same_status(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when every field we write already has the value we want."""
    return all(current.get(k) == v for k, v in desired.items())
