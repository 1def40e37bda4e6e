"""kopf, configured to keep nothing on objects: event handlers only, stateless storages, login.

Why ``on.event`` rather than ``on.create/update/resume/delete``: the latter keep per-object
progress in annotations, written by every replica; event handlers are stateless and idempotent,
and only the leader writes status.

One change to how kopf runs, :func:`lean_spawn`: kopf's watcher hands every new object to a
per-object worker through ``aiotasks.Scheduler.spawn``, which ends in ``await asyncio.sleep(0)``
(kopf's comment: for the determinism of its own tests). A watcher reading a stream of new pods
therefore gives the event loop one full turn per pod, and reads the stream in small pieces;
without those turns shoal spent about a quarter less CPU under a stream of new pods
(docs/benchmarks.md). :func:`lean_spawn` replaces that one method with the same hand-over minus
the yield: the workers are started by kopf's spawner task as before, as soon as the watcher
waits for the network. It is applied only when kopf's method is the one it was written against
(else kopf is left as it is, and a log line says so).
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotasks

log = logging.getLogger("shoal.kopf")


def configure(settings: kopf.OperatorSettings, watch_timeout: float) -> None:
    settings.persistence.diffbase_storage = StatelessDiffBase()
    settings.persistence.progress_storage = StatelessProgress()
    settings.posting.enabled = False  # kopf's own k8s-events; ours come from KubeReporter
    settings.watching.server_timeout = int(watch_timeout)  # the API wants an integer
    settings.watching.client_timeout = watch_timeout + 30
    settings.networking.request_timeout = 60
    lean_spawn()


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
    try:
        source = inspect.getsource(current)
    except (OSError, TypeError):
        source = ""
    if not all(marker in source for marker in _SPAWN_MARKERS):
        log.info("kopf's Scheduler.spawn is not the one shoal knows: left as it is")
        return False
    aiotasks.Scheduler.spawn = _spawn_without_yield  # type: ignore[method-assign]
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
