"""kopf, configured to keep nothing on objects: event handlers only, stateless storages, login.

Why ``on.event`` rather than ``on.create/update/resume/delete``: the latter keep per-object
progress in annotations, written by every replica; event handlers are stateless and idempotent,
and only the leader writes status.

Two changes to how kopf runs, each the same result by less work, each applied only when kopf's
code is the one it was written against (else kopf is left as it is, and a log line says so; a unit
test fails on a kopf that changed it):

* :func:`lean_spawn`: kopf's watcher hands every new object to a per-object worker through
  ``aiotasks.Scheduler.spawn``, which ends in ``await asyncio.sleep(0)`` (kopf's comment: for the
  determinism of its own tests). A watcher reading a stream of new pods therefore gives the event
  loop one full turn per pod, and reads the stream in small pieces; without those turns shoal spent
  about a quarter less CPU under a stream of new pods (docs/benchmarks.md). The replacement is the
  same hand-over minus the yield: the workers are started by kopf's spawner task as before, as soon
  as the watcher waits for the network.
* :func:`lean_json`: kopf decodes each line of a watch with the standard library's ``json.loads``;
  the replacement decodes it with :func:`shoal.kube.rest.decode_json` (pydantic-core's parser,
  about twice as fast on a pod), into the same Python objects.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Callable
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotasks
from kopf._cogs.clients import api as kopf_api

from shoal.kube.rest import decode_json

log = logging.getLogger("shoal.kopf")


def configure(settings: kopf.OperatorSettings, watch_timeout: float) -> None:
    settings.persistence.diffbase_storage = StatelessDiffBase()
    settings.persistence.progress_storage = StatelessProgress()
    settings.posting.enabled = False  # kopf's own k8s-events; ours come from KubeReporter
    settings.watching.server_timeout = int(watch_timeout)  # the API wants an integer
    settings.watching.client_timeout = watch_timeout + 30
    settings.networking.request_timeout = 60
    lean_spawn()
    lean_json()


#: kopf's own code that was replaced, by what it is ("spawn", "json"), for tests to put
#: it back
KOPF_OWN: dict[str, Any] = {}


def _matches(fn: Callable[..., Any], markers: tuple[str, ...]) -> bool:
    """Whether ``fn``'s source contains every marker (False when there is no source)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return all(marker in source for marker in markers)


#: what kopf's ``Scheduler.spawn`` must contain for :func:`lean_spawn` to replace it
_SPAWN_MARKERS = (
    "self._closed",
    "self._pending_coros.put(SchedulerJob(",
    "notify_all()",
    "await asyncio.sleep(0)",
)


async def _spawn_without_yield(self: aiotasks.Scheduler, coro: Any, *, name: str | None = None) -> None:
    """kopf's hand-over of a coroutine to its spawner task, without the final ``sleep(0)``."""
    if self._closed:
        await aiotasks.cancel_coro(coro=coro, name=name)
        raise RuntimeError("Cannot add new coroutines to a closed and inactive scheduler.")
    async with self._condition:
        await self._pending_coros.put(aiotasks.SchedulerJob(coro=coro, name=name))
        self._condition.notify_all()


def lean_spawn() -> bool:
    """Make kopf's watcher hand new objects to their workers without a loop turn each (see the
    module docstring). Idempotent; False (and kopf untouched) when kopf's method is not the one
    this was written against."""
    current = aiotasks.Scheduler.spawn
    if current is _spawn_without_yield:
        return True
    if not _matches(current, _SPAWN_MARKERS):
        log.info("kopf's Scheduler.spawn is not the one shoal knows: left as it is")
        return False
    KOPF_OWN["spawn"] = current
    aiotasks.Scheduler.spawn = _spawn_without_yield  # type: ignore[method-assign]
    return True


#: what kopf's watch stream must contain for :func:`lean_json` to give it another decoder
_STREAM_MARKERS = ("json.loads(line.decode('utf-8'))",)


class _KopfJson:
    """What kopf's API module sees as ``json``: :func:`decode_json` as ``loads``, the standard
    library's module for everything else."""

    loads = staticmethod(decode_json)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


def lean_json() -> bool:
    """Decode kopf's watch lines with pydantic-core's parser (see the module docstring).
    Idempotent; False (and kopf untouched) when kopf's stream is not the one this was written
    against."""
    current = getattr(kopf_api, "json", None)
    if isinstance(current, _KopfJson):
        return True
    if current is not json or not _matches(kopf_api.stream, _STREAM_MARKERS):
        log.info("kopf's watch decoding is not the one shoal knows: left as it is")
        return False
    KOPF_OWN["json"] = current
    kopf_api.json = _KopfJson()  # type: ignore[attr-defined,assignment]
    return True


def login(kubeconfig: str | None, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's credentials: the kubeconfig given, in-cluster, or $KUBECONFIG."""
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
        return kopf.login_with_kubeconfig(**kwargs)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_with_service_account(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


class StatelessDiffBase(kopf.DiffBaseStorage):
    """shoal has only event handlers: no object essence to build (kopf deep-copies every body for
    it otherwise) and nothing to store on objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class StatelessProgress(kopf.ProgressStorage):
    """No handler progress is ever kept, in annotations or status."""

    def fetch(self, *, key: Any, body: kopf.Body) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def purge(self, *, key: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence
