"""Writing a ``status`` subresource by patch, and telling whether it needs writing.

A JSON merge patch (the default) replaces lists whole; a built-in kind's conditions list
(``listType=map`` keyed by type, as a native PodGroup's) is written by strategic merge patch
instead, which merges one condition and leaves the others as they are."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from shoal.kube.rest import RawClient, write_retrying
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
        """True when the API took it; a refusal or trouble that may pass (429, 5xx, a cut
        connection) is tried again a few times (:func:`~shoal.kube.rest.write_retrying`), then
        False, logged unless 404 (the object is gone). A status nobody wrote again would stay
        stale until its object changed."""
        answer = await write_retrying(
            self.raw,
            "PATCH",
            path,
            {"status": status},
            f"writing status of {what}",
            content_type=patch,
            done=lambda code: code < 300 or code == 404,
            log=log,
        )
        return answer is not None and answer[0] < 300


def same_status(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when every field we write already has the value we want."""
    return all(current.get(k) == v for k, v in desired.items())
