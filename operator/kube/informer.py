"""The informer: watch events and listings become typed events for handlers.

kube-scheduler's informers list, then watch, and say when they are synced; kopf watches (and
re-lists after a 410) but gives no "synced" signal and never says which objects vanished while
it was not watching. This module closes both gaps in one place, for every watched kind:

* :meth:`Informer.prime` lists each kind once, in the order declared, before anything is
  scheduled (as kube-scheduler waits for its caches to sync); the objects reach the handlers as
  ``PRIMED`` events. kopf's first watch of each kind then starts from the priming's
  resourceVersion instead of listing everything again (``kopf_glue.continue_from_prime``), as
  client-go's informers watch from their listing: each object reaches the handlers once at
  start-up, not twice (a later re-list, after a 410, is kopf's own, replayed as ``LISTED``);
* kopf's events reach the same handlers (:meth:`Informer.install`), as ``ADDED`` / ``MODIFIED`` /
  ``DELETED`` or ``LISTED`` (kopf's initial listing or a re-list);
* for a kind declared with an ``identity``, a listing is followed (``relist_delay`` later) by a
  check against a fresh listing, and ``gone`` is called for what the API no longer has
  (:meth:`Informer.run`, one long-lived task; no task per listing).

Adding a watched kind: declare a :class:`Kind` (see ``kube/kinds.py``) and call
:meth:`Informer.watch` with its handler. Events carry the raw object and decode it lazily into the
kind's typed object (``PodInfo``, ``NodeSpec``, ...), so a handler that needs only the raw body
(the scheduler parses nodes itself) costs no second parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar
from urllib.parse import urlencode

import aiohttp
import kopf

from shoal.kube.listing import ListError, list_each, list_retrying
from shoal.kube.rest import RawClient, StreamError, message_of
from shoal.kube.wire import Resource

log = logging.getLogger("shoal.informer")

T = TypeVar("T")

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
#: kopf's initial listing and its re-lists after a watch expired (kopf's event type None)
LISTED = "LISTED"
#: listed by :meth:`Informer.prime`, before kopf watches
PRIMED = "PRIMED"
#: set (True) on a kopf event handler that reads nothing but kopf's ``event`` argument and
#: writes nothing through kopf (no patch, no result): ``operator_app.kopf_glue.lean_events`` may
#: hand it the watch event without building kopf's per-event cause around it
EVENT_ONLY = "shoal_event_only"


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A watched kind: where it lives, how an object becomes typed, how it is identified."""

    resource: Resource
    decode: Callable[[Mapping[str, Any]], T]
    #: identity for the re-list check, read from ``metadata`` alone (the check lists metadata only);
    #: None: not checked, handlers see DELETED only
    identity: Callable[[Mapping[str, Any]], str] | None = None
    #: server-side field selector of the watch, the priming and the re-list check
    field_selector: str | None = None
    #: a CRD that may not be installed, or an API the server may not serve: a refused listing is
    #: logged, not raised (kopf watches it once it appears)
    optional: bool = False
    #: the kind's name in logs and counts when its plural is not unique (``podgroups.scheduling.k8s.io``)
    alias: str = ""

    @property
    def name(self) -> str:
        return self.alias or self.resource.plural


class Primed(NamedTuple):
    """Where a kind's priming listing stood: its resourceVersion and the field selector it used."""

    resource_version: str
    field_selector: str


class Event(Generic[T]):
    """One object seen: ``type`` (ADDED, MODIFIED, DELETED, LISTED, PRIMED), ``raw`` and ``obj``."""

    __slots__ = ("_obj", "kind", "raw", "type")

    def __init__(self, kind: Kind[T], type: str, raw: Mapping[str, Any]) -> None:
        self.kind = kind
        self.type = type
        self.raw = raw
        self._obj: T | None = None

    @property
    def obj(self) -> T:
        """The typed object, decoded on first use."""
        if self._obj is None:
            self._obj = self.kind.decode(self.raw)
        return self._obj

    @property
    def deleted(self) -> bool:
        return self.type == DELETED


Handler = Callable[[Event[T]], Awaitable[None]]


@dataclass
class _Watch(Generic[T]):
    kind: Kind[T]
    handler: Handler[T]
    gone: Callable[[str], None] | None
    #: identity -> the re-list check's round in which it was last seen (kinds with an identity only)
    seen: dict[str, int] = field(default_factory=dict)
    #: identity -> the resourceVersion it was last seen at
    versions: dict[str, str] = field(default_factory=dict)


class Informer:
    def __init__(self, relist_delay: float = 2.0) -> None:
        self.relist_delay = relist_delay
        self._watches: list[_Watch[Any]] = []
        #: (group, version, plural) -> the watches of that kind, for lookups per re-listed object
        self._by_key: dict[tuple[str, str, str], list[_Watch[Any]]] = {}
        self._listed = asyncio.Event()
        #: the re-list check's round: an object seen is stamped with it, a check starts a new one.
        #: One shared int, not a time per object: re-listing an unchanged object allocates nothing
        #: that stays (a new timestamp per object, made among the listing's short-lived objects,
        #: kept scattered over memory the listing had taken: see ``kube.listing.list_each``).
        self._round = 0
        #: (group, version, plural) -> the resourceVersion each kind was primed at and the field
        #: selector it was listed with, until kopf's first watch of the kind takes it
        #: (``kopf_glue.continue_from_prime``): the watch goes on from the priming instead of
        #: listing every object again
        self.primed_versions: dict[tuple[str, str, str], Primed] = {}

    def watch(self, kind: Kind[T], handler: Handler[T], *, gone: Callable[[str], None] | None = None) -> None:
        """Send ``kind``'s events to ``handler``; ``gone(identity)`` for objects found vanished."""
        w = _Watch(kind, handler, gone)
        self._watches.append(w)
        self._by_key.setdefault(_key(kind), []).append(w)

    @property
    def kinds(self) -> list[Kind[Any]]:
        return [w.kind for w in self._watches]

    # -- kopf ----------------------------------------------------------------------------------
    def install(self, registry: kopf.OperatorRegistry) -> None:
        """One ``@kopf.on.event`` per kind: no annotation, finalizer or status written by kopf."""
        for w in self._watches:
            res = w.kind.resource
            kopf.on.event(res.group, res.version, res.plural, registry=registry, id=f"watch-{w.kind.name}")(
                self._kopf_handler(w)
            )

    def configure(self, settings: kopf.OperatorSettings) -> None:
        for w in self._watches:
            res = w.kind.resource
            if w.kind.field_selector:  # the same selector as the decorator's (group, version, plural)
                settings.watching.field_selectors[res.group, res.version, res.plural] = w.kind.field_selector

    def _kopf_handler(self, w: _Watch[Any]) -> Callable[..., Awaitable[None]]:
        async def on_event(event: Mapping[str, Any], **_: Any) -> None:
            await self.dispatch(w, event.get("type") or LISTED, event["object"])

        setattr(on_event, EVENT_ONLY, True)
        return on_event

    async def dispatch(self, w: _Watch[T], type: str, raw: Mapping[str, Any]) -> None:
        """Track what was seen (for the re-list check) and call the handler."""
        if w.kind.identity is not None:
            ident = w.kind.identity(raw)
            if type == DELETED:
                w.seen.pop(ident, None)
                w.versions.pop(ident, None)
            else:
                version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
                w.seen[ident] = self._round
                unchanged = bool(version) and w.versions.get(ident) == version
                if not unchanged:
                    w.versions[ident] = version
                if type == LISTED:
                    self._listed.set()
                    if unchanged:
                        # a re-list replays every object: one at the version the handler already
                        # has is unchanged, and is not decoded and stored again (kube-scheduler
                        # bypasses an update carrying an identical object the same way)
                        return
        await w.handler(Event(w.kind, type, raw))

    def replayed_unchanged(self, key: tuple[str, str, str], raw: Mapping[str, Any]) -> bool:
        """Whether a re-listed object of the kind at ``key`` (group, version, plural) is at the
        resourceVersion every watch of it already has: it is then marked seen, as :meth:`dispatch`
        marks a replayed object, and the caller may drop it before kopf makes a queue and a worker
        for it (``kopf_glue.stream_relists``). False for a kind not watched with an identity."""
        watches = self._by_key.get(key)
        if not watches or any(w.kind.identity is None for w in watches):
            return False
        version = (raw.get("metadata") or {}).get("resourceVersion")
        if not version:
            return False
        idents = [w.kind.identity(raw) for w in watches if w.kind.identity is not None]
        if any(w.versions.get(i) != version for w, i in zip(watches, idents, strict=True)):
            return False
        for w, ident in zip(watches, idents, strict=True):
            w.seen[ident] = self._round
        self._listed.set()
        return True

    async def deliver(self, kind: Kind[T], type: str, raw: Mapping[str, Any]) -> None:
        """Feed one event of ``kind`` as if it came from the watch (tests, simulations)."""
        for w in self._watches:
            if w.kind is kind:
                await self.dispatch(w, type, raw)

    # -- listings ------------------------------------------------------------------------------
    async def prime(self, raw: RawClient) -> dict[str, int]:
        """List every kind once, in declaration order, into the handlers. Returns counts per kind.
        A listing that meets what may pass (429, 5xx, a cut connection) is asked again until it
        succeeds (``/readyz`` stays not ready meanwhile, and the log says what it waits for); an
        optional kind the server does not serve (404) or forbids is skipped, saying so."""
        counts: dict[str, int] = {}
        self.primed_versions.clear()  # a start-up retried: only this priming's versions count
        for w in self._watches:
            res = w.kind.resource
            try:
                objs = await list_retrying(
                    raw, res.path(), what=w.kind.name, field_selector=w.kind.field_selector
                )
            except ListError as exc:
                if not w.kind.optional:
                    raise
                why = "not served by this API server" if exc.code == 404 else "refused"
                log.info("not priming %s (%s): HTTP %s, %s", w.kind.name, w.kind.resource.api, exc.code, why)
                continue
            for obj in objs:
                await self.dispatch(w, PRIMED, obj)
            counts[w.kind.name] = len(objs)
            if objs.resource_version:
                self.primed_versions[_key(w.kind)] = Primed(
                    objs.resource_version, w.kind.field_selector or ""
                )
        return counts

    async def run(self, raw: RawClient) -> None:
        """Forever: ``relist_delay`` after the last listing kopf replayed, check for vanished objects."""
        while True:
            await self._listed.wait()
            self._listed.clear()
            with contextlib.suppress(TimeoutError):
                while True:  # until relist_delay passes without another listed object
                    await asyncio.wait_for(self._listed.wait(), self.relist_delay)
                    self._listed.clear()
            try:
                await self.relist_check(raw)
            except Exception:  # the check is an optimisation: its trouble must not end the loop
                log.exception("re-list check failed")

    async def relist_check(self, raw: RawClient) -> dict[str, int]:
        """Call ``gone`` for objects the API no longer has. Returns how many per kind.

        Only objects last seen *before* the listing started (in an earlier round) are gone, so an
        object created while the list was being read is never dropped by mistake. The listing asks
        for metadata only (a kind's ``identity`` reads nothing else): under a backlog of pods,
        listing them whole cost 6–7 % of shoal's CPU.
        """
        forgotten: dict[str, int] = {}
        for w in self._watches:
            if w.kind.identity is None or w.gone is None:
                continue
            self._round += 1
            started = self._round
            try:
                live = await self._identities(raw, w.kind)
            except (ListError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning("re-list check failed (%s); will try at the next listing", exc)
                return forgotten
            gone = [i for i, seen in w.seen.items() if i not in live and seen < started]
            for ident in gone:
                w.seen.pop(ident, None)
                w.versions.pop(ident, None)
                w.gone(ident)
            forgotten[w.kind.name] = len(gone)
        if any(forgotten.values()):
            log.info("after a re-list: forgot %s deleted meanwhile", _counts(forgotten))
        return forgotten

    @staticmethod
    async def _identities(raw: RawClient, kind: Kind[Any]) -> set[str]:
        """The identities of ``kind``'s objects the API has, from a metadata-only listing read a
        page at a time (only the identities are kept)."""
        assert kind.identity is not None
        identity, live = kind.identity, set[str]()
        await list_each(
            raw,
            kind.resource.path(),
            lambda obj: live.add(identity(obj)),
            field_selector=kind.field_selector,
            metadata_only=True,
        )
        return live


async def stream(
    raw: RawClient, kind: Kind[T], *, namespace: str = "", timeout: int = 3600
) -> AsyncIterator[Event[T]]:
    """Watch one kind without kopf (the benchmarks' client-side view): ADDED / MODIFIED / DELETED
    events from now on, re-watching from the last resourceVersion when the server ends a watch;
    bookmarks are skipped. Raises :class:`~shoal.kube.listing.ListError` or
    :class:`~shoal.kube.rest.StreamError` if refused (410 included: no re-list here)."""
    path = kind.resource.path(namespace=namespace)
    code, body = await raw.request("GET", f"{path}?limit=1")
    if code >= 300 or not isinstance(body, dict):
        raise ListError(path, code, message_of(body))
    version = str((body.get("metadata") or {}).get("resourceVersion") or "")
    while True:
        params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": str(timeout)}
        params["allowWatchBookmarks"] = "true"
        if kind.field_selector:
            params["fieldSelector"] = kind.field_selector
        async for event in raw.stream(f"{path}?{urlencode(params)}", timeout=timeout + 100):
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                raise StreamError(f"watching {path}: {message_of(obj)}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event.get("type") != "BOOKMARK":
                yield Event(kind, str(event.get("type")), obj)


def _key(kind: Kind[Any]) -> tuple[str, str, str]:
    res = kind.resource
    return res.group, res.version, res.plural


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
