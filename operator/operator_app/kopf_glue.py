"""kopf, configured to keep nothing on objects: event handlers only, stateless storages, login.

Why ``on.event`` rather than ``on.create/update/resume/delete``: the latter keep per-object
progress in annotations, written by every replica; event handlers are stateless and idempotent,
and only the leader writes status.

Six changes to how kopf runs, each the same result by less work or memory, each applied only when
kopf's code is the one it was written against (else kopf is left as it is, and a log line says so;
a unit test fails on a kopf that changed it):

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
* :func:`lean_events`: for every event, kopf's ``process_resource_event`` recalls a per-object
  memory, builds a body view, a patch, three loggers, an error throttle, a diff base and a cause
  with its keyword arguments, then applies an empty patch, before and after calling the handler;
  that was about half of "kopf's event path" in docs/profiles.md (13 % of shoal's CPU under a
  backlog of 20,000 pods). For a kind whose only handlers are shoal's informer handlers (marked
  ``EVENT_ONLY``: ``@kopf.on.event``, no filter, reading only ``event``, writing nothing through
  kopf), the event goes straight to them from kopf's per-object worker: the same watcher, the
  same one-object-at-a-time workers, the same wait for kopf's indices, and a failing handler is
  logged and ignored as kopf ignores an event handler's error. Any other kind (a handler kopf
  must filter, index, spawn or track progress for) takes kopf's own path.
* :func:`continue_from_prime`: kopf starts each watch by listing every object and replaying each
  through its per-event machinery, after shoal has just listed them all to prime its cache; the
  first watch of a primed kind now starts from the priming's resourceVersion instead (when kopf's
  watch selects what the priming listed: the same field selector, no label or shard selector).
* :func:`stream_relists`: every listing the priming does not answer (a re-list after a 410, as
  after every API server restart; a kind not primed) is a watch that sends its initial events
  (``sendInitialEvents``, as client-go's WatchListClient lists) read one line at a time and handed
  on a hundred objects at a time, instead of one response of every object decoded at once; a
  server that does not stream it (or a kind with shard selectors) is listed as kopf does. With
  kopf's per-object workers exiting 0.5 s after an object's last event (kopf: 5 s, holding the
  body), a re-list no longer holds every object of a kind twice: the peak the allocator kept after
  each API server restart (docs/reliability.md). A re-listed object the informer already has at
  its resourceVersion is dropped as it is read: kopf makes no queue and no worker for it.
* :func:`bound_read_ahead`: kopf's watcher decodes a watch's events as fast as the connection
  gives them and queues each for its object's worker, with no bound on how far it runs ahead of
  the workers. After a stalled replica resumes (SIGSTOP, a long GC pause, a starved node), or
  when the API server replays 30 s of events at once, the whole backlog could sit decoded in
  those queues together, and the allocator kept the arenas that peak took (memray: 8–9 MB at a
  30 s stall, docs/reliability.md). Each watcher now stops reading when ``READ_AHEAD`` of its
  events are read and not yet handled, and reads on when its workers have brought that down to
  half (or after ``READ_AHEAD_WAIT_S`` in any case): the same events, in the same order, to the
  same workers. A stream is bounded only once it has said LISTED (kopf's indices wait for every
  kind's listing, which must never wait on a worker).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from typing import Any

import aiohttp
import kopf
from kopf._cogs.aiokits import aiotasks
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import errors as kopf_errors
from kopf._cogs.clients import fetching as kopf_fetching
from kopf._cogs.clients import watching as kopf_watching
from kopf._core.intents import registries as kopf_registries
from kopf._core.reactor import processing as kopf_processing
from kopf._core.reactor import queueing as kopf_queueing

from shoal.kube.informer import EVENT_ONLY, Primed
from shoal.kube.rest import decode_json

log = logging.getLogger("shoal.kopf")


def configure(
    settings: kopf.OperatorSettings,
    watch_timeout: float,
    primed: dict[tuple[str, str, str], Primed] | None = None,
    unchanged: Unchanged | None = None,
) -> None:
    """kopf's settings for shoal, and the changes below; ``primed``: the informer's
    ``primed_versions`` (filled at start-up, before kopf watches), for :func:`continue_from_prime`;
    ``unchanged``: the informer's ``replayed_unchanged``, for :func:`stream_relists`."""
    settings.persistence.diffbase_storage = StatelessDiffBase()
    settings.persistence.progress_storage = StatelessProgress()
    settings.posting.enabled = False  # kopf's own k8s-events; ours come from KubeReporter
    settings.watching.server_timeout = int(watch_timeout)  # the API wants an integer
    settings.watching.client_timeout = watch_timeout + 30
    settings.networking.request_timeout = 60
    # kopf's per-object worker waits this long for the object's next event before it exits, holding
    # the last event's body all that time; shoal's handlers write nothing kopf must see come back,
    # so a worker need not linger: after a re-list, 5 s (kopf's default) kept a worker and a body
    # alive for every object of the kind at once
    settings.queueing.idle_timeout = IDLE_TIMEOUT_S
    lean_spawn()
    lean_json()
    lean_events()
    if primed is not None:
        continue_from_prime(settings, primed)
    stream_relists(settings, unchanged)
    bound_read_ahead()


#: kopf's own code that was replaced, by what it is ("spawn", "json", "process", "fetching",
#: "watcher"), for tests to put it back
KOPF_OWN: dict[str, Any] = {}


def _matches(fn: Callable[..., Any], markers: tuple[str, ...]) -> bool:
    """Whether ``fn``'s source contains every marker (False when there is no source)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return all(marker in source for marker in markers)


def _replace(
    owner: Any, name: str, replacement: Callable[..., Any], markers: tuple[str, ...], key: str, what: str
) -> bool:
    """Put ``replacement`` in place of kopf's ``owner.name`` (kopf's own kept in ``KOPF_OWN[key]``)
    when kopf's contains every marker. Idempotent; False (kopf untouched, the log naming ``what``)
    otherwise."""
    current = getattr(owner, name)
    if current is replacement:
        return True
    if not _matches(current, markers):
        log.info("kopf's %s is not the one shoal knows: left as it is", what)
        return False
    KOPF_OWN[key] = current
    setattr(owner, name, replacement)
    return True


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
    return _replace(
        aiotasks.Scheduler, "spawn", _spawn_without_yield, _SPAWN_MARKERS, "spawn", "Scheduler.spawn"
    )


#: what kopf's ``process_resource_event`` must contain for :func:`lean_events`: the indices'
#: toggles it honours before any handler (the lean path does the same), and the per-event work the
#: lean path leaves out
_PROCESS_MARKERS = (
    "memories.recall(",
    "operator_indexed.drop_toggle(resource_indexed)",
    "operator_indexed.wait_for(True)",
    "indexing.index_resource(",
    "process_resource_causes(",
    "application.apply(",
)
#: the attribute of an OperatorRegistry caching, per resource, its lean handlers (None: kopf's path)
_LEAN_PLANS = "_shoal_lean_plans"


def _lean_handlers(registry: kopf.OperatorRegistry, resource: Any) -> tuple[Any, ...] | None:
    """The watching handlers of ``resource`` if each is an ``EVENT_ONLY`` function with no filter
    and the kind has no other handler kopf must run (indexing, changing, spawning); else None."""
    counts = tuple(  # the registries' own lists, not copies: this runs on every event
        len(r._handlers)
        for r in (registry._watching, registry._indexing, registry._changing, registry._spawning)
    )
    plans: dict[Any, tuple[tuple[int, ...], tuple[Any, ...] | None]] = registry.__dict__.setdefault(
        _LEAN_PLANS, {}
    )
    cached = plans.get(resource)
    if cached is not None and cached[0] == counts:  # handlers added since: plan again
        return cached[1]
    others = (registry._indexing, registry._changing, registry._spawning)
    handlers = tuple(
        h for h in registry._watching.get_all_handlers() if kopf_registries._matches_resource(h, resource)
    )
    lean = (
        bool(handlers)
        and not any(r.has_handlers(resource) for r in others)
        and all(
            getattr(h.fn, EVENT_ONLY, False)
            and inspect.iscoroutinefunction(h.fn)  # kopf runs a plain function in a thread
            and h.labels is None
            and h.annotations is None
            and h.when is None
            and h.field is None
            and h.value is None
            for h in handlers
        )
    )
    plans[resource] = (counts, handlers if lean else None)
    return handlers if lean else None


async def _process_event(
    *,
    registry: kopf.OperatorRegistry,
    resource: Any,
    raw_event: Any,
    resource_indexed: Any = None,
    operator_indexed: Any = None,
    **kwargs: Any,
) -> str | None:
    """kopf's processor of one watch event: :func:`_lean_handlers` straight, or kopf's own."""
    handlers = _lean_handlers(registry, resource)
    if handlers is None:
        own: Callable[..., Any] = KOPF_OWN["process"]
        result: str | None = await own(
            registry=registry,
            resource=resource,
            raw_event=raw_event,
            resource_indexed=resource_indexed,
            operator_indexed=operator_indexed,
            **kwargs,
        )
        return result
    if operator_indexed is not None and resource_indexed is not None:
        await operator_indexed.drop_toggle(resource_indexed)  # this object is indexed (no indexer)
    if operator_indexed is not None:
        await operator_indexed.wait_for(True)  # as kopf: no handler before every kind is indexed
    for handler in handlers:
        try:
            await handler.fn(event=raw_event)
        except Exception as exc:  # kopf ignores an event handler's error, after logging it
            obj = raw_event.get("object") or {}
            meta = obj.get("metadata") or {}
            ref = {k: obj[k] for k in ("apiVersion", "kind") if obj.get(k)}
            ref |= {k: meta[k] for k in ("namespace", "name", "uid") if meta.get(k)}
            log.exception(
                "handler %r failed on %s %s/%s with an exception and will ignore it: %s",
                handler.id,
                resource.plural,
                meta.get("namespace", ""),
                meta.get("name", ""),
                exc,
                extra={"k8s_ref": ref},  # the object, as kopf's object logger names it
            )
    return None


def lean_events() -> bool:
    """Hand the events of kinds with only ``EVENT_ONLY`` handlers straight to them (see the module
    docstring). Idempotent; False (and kopf untouched) when kopf's processor is not the one this
    was written against."""
    return _replace(
        kopf_processing,
        "process_resource_event",
        _process_event,
        _PROCESS_MARKERS,
        "process",
        "process_resource_event",
    )


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


#: what kopf's ``continuous_watch`` must contain for :func:`continue_from_prime`: it lists with
#: ``fetching.fetch_objs``, replays each object as a type-None event, says LISTED, and watches
#: from the listing's resourceVersion
_WATCH_MARKERS = (
    "fetching.fetch_objs(",
    "for obj in chunk:",
    "yield {'type': None, 'object': obj}",
    "yield Bookmark.LISTED",
    "since=resource_version",
)
#: the attribute of kopf's settings holding the informer's primed versions
_PRIMED = "shoal_primed_versions"
#: set on kopf's settings by :func:`stream_relists`
_STREAMED = "shoal_streamed_relists"
#: set on kopf's settings by :func:`stream_relists`: which re-listed objects to drop
_UNCHANGED = "shoal_relisted_unchanged"

#: whether a re-listed object, of the kind at (group, version, plural), is one the handlers
#: already have at its resourceVersion (and may be dropped before kopf's per-object machinery)
Unchanged = Callable[[tuple[str, str, str], Mapping[str, Any]], bool]


class _KopfFetching:
    """What kopf's watching module sees as ``fetching``: ``fetch_objs`` answers a kind's first
    cluster-wide listing from the priming (no object, the priming's resourceVersion), once; every
    other listing, and everything else, is kopf's own module."""

    def __init__(self, real: Any) -> None:
        self._real = real

    async def fetch_objs(
        self, *, settings: kopf.OperatorSettings, resource: Any, namespace: Any, logger: Any
    ) -> AsyncIterator[tuple[Collection[Any], str]]:
        primed: dict[tuple[str, str, str], Primed] | None = getattr(settings, _PRIMED, None)
        key = (resource.group, resource.version, resource.plural)
        entry = None
        if primed is not None and namespace is None:
            entry = primed.pop(key, None)
        if entry is not None and entry.resource_version:
            if _selects_as_primed(settings, resource, entry.field_selector):
                logger.debug(
                    f"Watching {resource} from the priming's resourceVersion {entry.resource_version}."
                )
                yield [], entry.resource_version
                return
            log.info("kopf watches %s with other selectors than the priming's: it lists them again", resource)
        unchanged: Unchanged | None = getattr(settings, _UNCHANGED, None)
        if getattr(settings, _STREAMED, False) and not settings.watching.shard_selectors.collect(resource):
            streamed = 0
            try:
                async for chunk, listed in _stream_list(settings, resource, namespace, logger, unchanged):
                    streamed += len(chunk)
                    yield chunk, listed
                logger.debug(
                    f"Streamed the listing of {resource}: {streamed} objects changed, version {listed}."
                )
                return
            except _NotStreamed as exc:
                # the objects streamed so far come again in the listing: the handlers are idempotent
                log.info(
                    "%s: listed instead of streamed (%s; %d objects streamed first)", resource, exc, streamed
                )
        async for chunk, listed in self._real.fetch_objs(
            settings=settings, resource=resource, namespace=namespace, logger=logger
        ):
            if unchanged is not None:
                chunk = [obj for obj in chunk if not unchanged(key, obj)]
            yield chunk, listed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


#: kopf's per-object worker exits this long after the object's last event (kopf's default: 5 s)
IDLE_TIMEOUT_S = 0.5
#: objects handed to kopf at a time from a streamed listing
STREAM_CHUNK = 100
#: the bookmark that ends a streamed listing's initial events
_INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class _NotStreamed(Exception):
    """The API server did not stream the listing (refused, an error event, or no end bookmark)."""


async def _stream_list(
    settings: kopf.OperatorSettings,
    resource: Any,
    namespace: Any,
    logger: Any,
    unchanged: Unchanged | None = None,
) -> AsyncIterator[tuple[list[Any], str]]:
    """A kind's listing as a watch that sends its initial events (``sendInitialEvents``, the API
    server's streaming list, as client-go's WatchListClient): objects arrive one watch line at a
    time and are handed to kopf ``STREAM_CHUNK`` at a time, so a re-list never holds a whole
    listing's response and its decoded objects at once (a listing of every pod decoded in one piece
    was the scheduler's memory peak after each API server restart). The last chunk carries the
    resourceVersion of the bookmark that ends the initial events, from which kopf watches on.
    An object ``unchanged`` says the handlers already have is not handed on at all."""
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    watching = settings.watching
    for key, selectors in (
        ("labelSelector", watching.label_selectors.collect(resource)),
        ("fieldSelector", watching.field_selectors.collect(resource)),
    ):
        if selectors:
            params[key] = ",".join(sorted(set(selectors)))
    if watching.server_timeout is not None:
        params["timeoutSeconds"] = str(watching.server_timeout)
    chunk: list[Any] = []
    kind_key = (resource.group, resource.version, resource.plural)
    try:
        async for event in kopf_api.stream(
            url=resource.get_url(namespace=namespace, params=params),
            settings=settings,
            logger=logger,
            # a stalled stream is noticed as kopf's own listing notices it, not only at the end
            timeout=aiohttp.ClientTimeout(
                total=watching.client_timeout, sock_read=settings.networking.request_timeout
            ),
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "BOOKMARK":
                meta = obj.get("metadata") or {}
                if (meta.get("annotations") or {}).get(_INITIAL_EVENTS_END) == "true":
                    yield chunk, meta.get("resourceVersion") or ""
                    return
            elif kind in ("ADDED", "MODIFIED"):
                if unchanged is not None and unchanged(kind_key, obj):
                    continue
                chunk.append(obj)
                if len(chunk) >= STREAM_CHUNK:
                    yield chunk, ""
                    chunk = []
            elif kind == "ERROR":
                raise _NotStreamed(f"error event: {obj.get('message') or obj}")
    except kopf_errors.APIError as exc:
        raise _NotStreamed(f"refused: {exc}") from exc
    raise _NotStreamed("the stream ended before its initial events did")


def _selects_as_primed(settings: kopf.OperatorSettings, resource: Any, field_selector: str) -> bool:
    """Whether kopf's watch of ``resource`` selects the objects the priming listed: the same
    field selector (kopf joins every one configured for the resource), no label or shard selector."""
    watching = settings.watching
    if watching.label_selectors.collect(resource) or watching.shard_selectors.collect(resource):
        return False
    return _requirements(watching.field_selectors.collect(resource)) == _requirements([field_selector])


def _requirements(selectors: Iterable[str]) -> set[str]:
    """The requirements of comma-joined selectors, as one set (kopf joins a resource's selectors)."""
    return {part for selector in selectors for part in selector.split(",") if part}


def continue_from_prime(settings: kopf.OperatorSettings, primed: dict[tuple[str, str, str], Primed]) -> bool:
    """kopf's first watch of each primed kind starts from the priming's resourceVersion instead
    of listing every object again and replaying each through its per-event machinery (as
    client-go's informers watch from their own listing): the watch delivers every change since
    the priming, so nothing is missed, and each object reaches the handlers once at start-up.
    A later listing (kopf re-lists after a 410, a version too old) is kopf's own. ``primed`` is
    read when kopf first watches (after the start-up handler that primes), and each entry is
    taken once. Idempotent; False (and kopf untouched) when kopf's watch is not the one this was
    written against."""
    if not _install_fetching():
        log.info("kopf's watch is not the one shoal knows: it lists every kind again after priming")
        return False
    setattr(settings, _PRIMED, primed)
    return True


def stream_relists(settings: kopf.OperatorSettings, unchanged: Unchanged | None = None) -> bool:
    """kopf's listings the priming does not answer (a re-list after a 410, a kind not primed) are
    streamed (:func:`_stream_list`) instead of fetched whole; a server that does not stream them,
    and a kind watched with shard selectors, are listed as kopf does. A re-listed object
    ``unchanged`` says the handlers already have (the informer's ``replayed_unchanged``: same
    resourceVersion) is dropped there, before kopf's watcher makes a queue and a worker task for
    it: a re-list after an API server restart replays every object, nearly all unchanged, and the
    small objects kopf kept from those per-object workers pinned the memory the re-list had
    taken (docs/reliability.md). Idempotent; False (and kopf untouched) when kopf's watch is not
    the one this was written against."""
    if not _install_fetching():
        log.info("kopf's watch is not the one shoal knows: its re-lists are kopf's own")
        return False
    setattr(settings, _STREAMED, True)
    setattr(settings, _UNCHANGED, unchanged)
    return True


def _install_fetching() -> bool:
    """kopf's watching module reads ``fetching`` through :class:`_KopfFetching` (once)."""
    current = kopf_watching.fetching  # type: ignore[attr-defined]
    if isinstance(current, _KopfFetching):
        return True
    if current is not kopf_fetching or not _matches(kopf_watching.continuous_watch, _WATCH_MARKERS):
        return False
    KOPF_OWN["fetching"] = current
    kopf_watching.fetching = _KopfFetching(current)  # type: ignore[attr-defined,assignment]
    return True


#: a watcher stops reading when this many of its events are read and not yet handled ...
READ_AHEAD = 128
#: ... and reads on when its workers have brought them down to this many
READ_AHEAD_RESUME = READ_AHEAD // 2
#: ... or after this long in any case: kopf's watch stream stays inside its inactivity timeout
#: (70 s) while the watcher waits, and that timeout would cancel the watcher itself
READ_AHEAD_WAIT_S = 10.0


class ReadAhead:
    """Events one watcher has read and its workers have not yet handled: :meth:`admit` (the
    watcher, before it hands an event on) counts one and, when ``limit`` are pending, first waits
    until :meth:`done` (a worker, after handling one) has brought them down to ``resume``, or
    ``max_wait`` seconds have passed (workers that handle nothing for that long are stuck, and
    holding the stream back would not help them)."""

    def __init__(
        self, limit: int = READ_AHEAD, resume: int = READ_AHEAD_RESUME, max_wait: float = READ_AHEAD_WAIT_S
    ) -> None:
        if not 0 <= resume < limit:
            raise ValueError(f"resume ({resume}) must be at least 0 and below limit ({limit})")
        self.limit = limit
        self.resume = resume
        self.max_wait = max_wait
        self.pending = 0
        #: how many times the watcher waited, and how many of those ran out of time (for tests)
        self.waits = 0
        self.timeouts = 0
        self._room: asyncio.Future[None] | None = None

    async def admit(self, *, wait: bool = True) -> None:
        """Count one event; with ``wait``, first wait for room if there is none."""
        if wait and self.pending >= self.limit:
            self.waits += 1
            self._room = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._room, self.max_wait)
            except TimeoutError:
                self.timeouts += 1
                log.info(
                    "kopf's workers handled too few of %d events in %.0f s: the watch reads on",
                    self.pending,
                    self.max_wait,
                )
            finally:
                self._room = None
        self.pending += 1

    def done(self) -> None:
        self.pending -= 1
        if self._room is not None and not self._room.done() and self.pending <= self.resume:
            self._room.set_result(None)


#: the bound of the watcher running in this task (set by :func:`_bounded_watcher` for kopf's
#: ``infinite_watch``, which runs in the same task)
_READ_AHEAD: contextvars.ContextVar[ReadAhead | None] = contextvars.ContextVar(
    "shoal_read_ahead", default=None
)

#: what kopf's ``watcher`` and ``worker`` must contain for :func:`bound_read_ahead`: the watcher
#: reads ``watching.infinite_watch`` and puts every object event (not a bookmark) in its object's
#: backlog; the worker hands every event it takes from that backlog to the processor
_WATCHER_MARKERS = (
    "stream = watching.infinite_watch(",
    "if isinstance(raw_event, watching.Bookmark):",
    "if raw_event.get('type') == 'BOOKMARK':",
    "await streams[key].backlog.put(raw_event)",
)
_WORKER_MARKERS = (
    "raw_event = await asyncio.wait_for(backlog.get()",
    "newer_patch_version = await processor(",
)


async def _bounded_watcher(*, processor: Callable[..., Any], **kwargs: Any) -> None:
    """kopf's ``watcher`` with its read-ahead bounded: its stream (through
    :class:`_BoundedWatching`) admits each object event, the processor releases it once handled."""
    gate = ReadAhead(READ_AHEAD, READ_AHEAD_RESUME, READ_AHEAD_WAIT_S)

    async def handled(**event: Any) -> Any:
        try:
            return await processor(**event)
        finally:
            gate.done()

    token = _READ_AHEAD.set(gate)
    try:
        own: Callable[..., Any] = KOPF_OWN["watcher"]
        await own(processor=handled, **kwargs)
    finally:
        _READ_AHEAD.reset(token)


class _BoundedWatching:
    """What kopf's queueing module sees as ``watching``: ``infinite_watch`` counts each object event
    it hands on in the watcher's :class:`ReadAhead`, and once the stream has said LISTED waits for
    room first; everything else is kopf's own module."""

    def __init__(self, real: Any) -> None:
        self._real = real

    async def infinite_watch(self, **kwargs: Any) -> AsyncIterator[Any]:
        gate = _READ_AHEAD.get()
        listed = False
        async for event in self._real.infinite_watch(**kwargs):
            if event is self._real.Bookmark.LISTED:
                listed = True
            elif gate is not None and isinstance(event, dict) and event.get("type") != "BOOKMARK":
                # every object event is counted (each is handled once), waited for only once listed
                await gate.admit(wait=listed)
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def bound_read_ahead() -> bool:
    """Bound how far each kopf watcher reads ahead of its workers (see the module docstring).
    Idempotent; False (and kopf untouched) when kopf's watcher is not the one this was written
    against."""
    if kopf_queueing.watcher is _bounded_watcher:
        return True
    if (
        kopf_queueing.watching is not kopf_watching  # type: ignore[attr-defined]
        or not _matches(kopf_queueing.watcher, _WATCHER_MARKERS)
        or not _matches(kopf_queueing.worker, _WORKER_MARKERS)
    ):
        log.info("kopf's watcher is not the one shoal knows: it reads ahead of its workers unbounded")
        return False
    KOPF_OWN["watcher"] = kopf_queueing.watcher
    kopf_queueing.watching = _BoundedWatching(kopf_watching)  # type: ignore[attr-defined,assignment]
    kopf_queueing.watcher = _bounded_watcher
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
