"""kopf as shoal configures it: the watcher's hand-over of new objects without a loop turn each,
and watch lines decoded by pydantic-core."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

import kopf
import pytest
from kopf._cogs.aiokits import aiotasks
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import watching as kopf_watching
from kopf._cogs.structs import references
from kopf._core.reactor import processing as kopf_processing
from kopf._core.reactor import queueing as kopf_queueing

from shoal.kube.informer import Primed
from shoal.operator_app import kopf_glue
from shoal.testing.objects import make_pod


@pytest.fixture
def kopf_spawn() -> Iterator[object]:
    """kopf's own ``Scheduler.spawn`` in place during the test (another test may have run the
    operator in this process) and after it."""
    original = kopf_glue.KOPF_OWN.get("spawn", aiotasks.Scheduler.spawn)
    aiotasks.Scheduler.spawn = original  # type: ignore[method-assign]
    yield original
    aiotasks.Scheduler.spawn = original  # type: ignore[method-assign]


@pytest.fixture
def kopf_fetching() -> Iterator[Any]:
    """kopf's own ``fetching`` module in its watching module during the test and after it."""
    original = kopf_glue.KOPF_OWN.get("fetching", kopf_watching.fetching)  # type: ignore[attr-defined]
    kopf_watching.fetching = original  # type: ignore[attr-defined]
    yield original
    kopf_watching.fetching = original  # type: ignore[attr-defined]


@pytest.fixture
def kopf_json() -> Iterator[Any]:
    """kopf's own ``json`` (its API module decodes watch lines with it) in place during the test
    and after it."""
    original = kopf_glue.KOPF_OWN.get("json", kopf_api.json)  # type: ignore[attr-defined]
    kopf_api.json = original  # type: ignore[attr-defined]
    yield original
    kopf_api.json = original  # type: ignore[attr-defined]


@pytest.fixture
def kopf_processor() -> Iterator[Any]:
    """kopf's own event processor back in place after the test (``configure`` replaces it; its
    own tests are in test_kopf_lean_events.py)."""
    original = kopf_glue.KOPF_OWN.get("process", kopf_processing.process_resource_event)
    yield original
    kopf_processing.process_resource_event = original


@pytest.fixture
def kopf_watcher() -> Iterator[Any]:
    """kopf's own watcher, reading kopf's own watching module, during the test and after it."""
    watcher = kopf_glue.KOPF_OWN.get("watcher", kopf_queueing.watcher)
    kopf_queueing.watcher = watcher
    kopf_queueing.watching = kopf_watching  # type: ignore[attr-defined]
    yield watcher
    kopf_queueing.watcher = watcher
    kopf_queueing.watching = kopf_watching  # type: ignore[attr-defined]


def test_configure_applies_every_change_to_the_installed_kopf(
    kopf_spawn: object,
    kopf_json: object,
    kopf_fetching: object,
    kopf_processor: object,
    kopf_watcher: object,
) -> None:
    """Fails when a kopf upgrade changes Scheduler.spawn, the watch's decoding or how a watch
    begins: each change must then be looked at again."""
    settings = kopf.OperatorSettings()
    primed: dict[tuple[str, str, str], Primed] = {}
    kopf_glue.configure(settings, 300.0, primed=primed)
    assert aiotasks.Scheduler.spawn is kopf_glue._spawn_without_yield
    assert isinstance(kopf_api.json, kopf_glue._KopfJson)  # type: ignore[attr-defined]
    assert isinstance(kopf_watching.fetching, kopf_glue._KopfFetching)  # type: ignore[attr-defined]
    assert kopf_queueing.watcher is kopf_glue._bounded_watcher
    assert isinstance(kopf_queueing.watching, kopf_glue._BoundedWatching)  # type: ignore[attr-defined]
    assert kopf_glue.lean_spawn() and kopf_glue.lean_json() and kopf_glue.bound_read_ahead()  # idempotent
    assert kopf_glue.continue_from_prime(settings, primed)
    assert settings.posting.enabled is False and settings.watching.server_timeout == 300


def test_lean_json_decodes_a_watch_line_as_the_standard_library_does(kopf_json: object) -> None:
    pod = make_pod("p", cpu="500m", memory="1Gi", labels={"app": "é"}, scheduler_name="gpu-scheduler")
    pod["metadata"]["annotations"] = {"big": "12345678901234567890123", "f": "1.5e300"}
    pod["spec"]["priority"] = 2**40
    pod["status"] = {"phase": "Pending", "conditions": [], "ratio": 0.1, "ok": True, "none": None}
    line = (json.dumps({"type": "ADDED", "object": pod}) + "\n").encode()
    assert kopf_glue.lean_json()
    decode: Callable[[str], Any] = kopf_api.json.loads  # type: ignore[attr-defined]
    assert decode(line.decode("utf-8")) == json.loads(line)
    assert kopf_api.json.dumps({"a": 1}) == json.dumps({"a": 1})  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="EOF"):
        decode('{"type": "ADDED", "object": {')


def test_an_unknown_kopf_watch_decoding_is_left_as_it_is(
    kopf_json: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def other(*args: Any, **kwargs: Any) -> Any:
        """A kopf version that decodes its watch some other way."""

    monkeypatch.setattr(kopf_api, "stream", other)
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.lean_json()
    assert kopf_api.json is json  # type: ignore[attr-defined]
    assert "left as it is" in caplog.text


async def test_spawn_hands_over_without_a_loop_turn_and_the_work_still_runs(kopf_spawn: object) -> None:
    """kopf's spawn suspends once per call (its trailing sleep(0)); the lean one never does, and
    every coroutine handed over still runs, started by kopf's spawner task."""
    ran: list[int] = []

    async def work(i: int) -> None:
        ran.append(i)

    def suspends(scheduler: aiotasks.Scheduler, i: int) -> bool:
        step = scheduler.spawn(work(i), name=f"work {i}")
        try:
            step.send(None)
        except StopIteration:
            return False
        step.close()
        return True

    scheduler = aiotasks.Scheduler()
    try:
        assert suspends(scheduler, -1)  # kopf's own method
        assert kopf_glue.lean_spawn()
        assert not any([suspends(scheduler, i) for i in range(100)])
        assert ran == []  # handed over, not started: kopf's spawner task starts them
        await asyncio.wait_for(scheduler.wait(), 5)
        assert sorted(ran) == list(range(-1, 100))
    finally:
        await scheduler.close()


async def test_a_closed_scheduler_refuses_new_work_and_closes_the_coroutine(kopf_spawn: object) -> None:
    assert kopf_glue.lean_spawn()
    scheduler = aiotasks.Scheduler()
    await scheduler.close()

    async def work() -> None:
        raise AssertionError("must not run")

    coro = work()
    with pytest.raises(RuntimeError, match="closed"):
        await scheduler.spawn(coro)
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


def test_an_unknown_kopf_spawn_is_left_as_it_is(kopf_spawn: object, caplog: pytest.LogCaptureFixture) -> None:
    async def other(self: aiotasks.Scheduler, coro: object, *, name: str | None = None) -> None:
        """A kopf version whose spawn does something else."""

    aiotasks.Scheduler.spawn = other  # type: ignore[method-assign]
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.lean_spawn()
    assert aiotasks.Scheduler.spawn is other
    assert "left as it is" in caplog.text


class _Listing:
    """kopf's ``fetching`` module as far as the watch uses it: one listing of two objects."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.chunk_size = 500  # another attribute, read through the wrapper

    async def fetch_objs(self, *, settings: Any, resource: Any, namespace: Any, logger: Any) -> Any:
        self.calls.append((resource.plural, namespace))
        yield [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}], "500"


async def test_a_primed_kind_is_watched_from_its_priming_once_then_listed_as_kopf_does() -> None:
    real = _Listing()
    fetching = kopf_glue._KopfFetching(real)
    settings = kopf.OperatorSettings()
    primed = {("", "v1", "pods"): Primed("120", "")}
    setattr(settings, kopf_glue._PRIMED, primed)
    pods = references.Resource("", "v1", "pods", namespaced=True)
    nodes = references.Resource("", "v1", "nodes")
    log = logging.getLogger("test")

    async def listing(resource: references.Resource, namespace: str | None = None) -> list[tuple[int, str]]:
        return [
            (len(chunk), version)
            async for chunk, version in fetching.fetch_objs(
                settings=settings, resource=resource, namespace=namespace, logger=log
            )
        ]

    assert await listing(pods, "team-a") == [(2, "500")]  # a namespaced watch: kopf's listing
    assert await listing(pods) == [(0, "120")]  # the first cluster-wide watch: from the priming
    assert primed == {} and real.calls == [("pods", "team-a")]
    assert await listing(pods) == [(2, "500")]  # a re-list (after a 410): kopf's own
    assert await listing(nodes) == [(2, "500")]  # a kind not primed: kopf's own
    assert real.calls[1:] == [("pods", None), ("nodes", None)]
    assert fetching.chunk_size == 500
    unprimed = kopf.OperatorSettings()  # an operator configured without a priming
    chunks = fetching.fetch_objs(settings=unprimed, resource=pods, namespace=None, logger=log)
    assert [version async for _, version in chunks] == ["500"]


async def test_a_kind_kopf_selects_otherwise_than_the_priming_is_listed_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The priming's version is used only when kopf's watch selects what the priming listed."""
    real = _Listing()
    fetching = kopf_glue._KopfFetching(real)
    pods = references.Resource("", "v1", "pods", namespaced=True)
    log = logging.getLogger("test")

    async def first_listing(settings: kopf.OperatorSettings, primed_with: str) -> list[str]:
        setattr(settings, kopf_glue._PRIMED, {("", "v1", "pods"): Primed("120", primed_with)})
        chunks = fetching.fetch_objs(settings=settings, resource=pods, namespace=None, logger=log)
        return [version async for _, version in chunks]

    same = kopf.OperatorSettings()
    same.watching.field_selectors["", "v1", "pods"] = "status.phase!=Failed,spec.schedulerName=x"
    assert await first_listing(same, "spec.schedulerName=x,status.phase!=Failed") == ["120"]
    other_field = kopf.OperatorSettings()
    other_field.watching.field_selectors["", "v1", "pods"] = "spec.schedulerName=y"
    labelled = kopf.OperatorSettings()
    labelled.watching.label_selectors["", "v1", "pods"] = "team=a"
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert await first_listing(other_field, "spec.schedulerName=x") == ["500"]
        assert await first_listing(labelled, "") == ["500"]
        assert await first_listing(kopf.OperatorSettings(), "spec.schedulerName=x") == ["500"]
    assert caplog.text.count("other selectors than the priming's") == 3
    assert len(real.calls) == 3


async def test_kopfs_own_watch_goes_on_from_the_priming_then_lists_after_a_410(
    kopf_fetching: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kopf's real ``continuous_watch``, with only the API calls replaced: the first watch of a
    primed kind replays nothing and asks for changes since the priming; after a 410 the next one
    lists through kopf's own listing and watches from that listing's version."""
    settings = kopf.OperatorSettings()
    assert kopf_glue.continue_from_prime(settings, {("", "v1", "pods"): Primed("120", "")})
    watched_since: list[str | None] = []
    listed: list[str | None] = []

    async def fetch_objs(*, settings: Any, resource: Any, namespace: Any, logger: Any) -> Any:
        listed.append(namespace)
        yield [{"metadata": {"name": "listed"}}], "300"

    async def watch_objs(*, since: str | None, **_: Any) -> Any:
        watched_since.append(since)
        yield {"type": "ADDED", "object": {"metadata": {"name": "new", "resourceVersion": "121"}}}
        yield {"type": "ERROR", "object": {"code": 410}}

    monkeypatch.setattr(kopf_fetching, "fetch_objs", fetch_objs)
    monkeypatch.setattr(kopf_watching, "watch_objs", watch_objs)
    pods = references.Resource("", "v1", "pods", namespaced=True)

    async def one_watch() -> list[Any]:
        stream = kopf_watching.continuous_watch(
            settings=settings, resource=pods, namespace=None, operator_pause_waiter=asyncio.Future()
        )
        return [
            e if isinstance(e, kopf_watching.Bookmark) else (e["type"], e["object"]["metadata"]["name"])
            async for e in stream
        ]

    assert await one_watch() == [kopf_watching.Bookmark.LISTED, ("ADDED", "new")]
    assert watched_since == ["120"] and listed == []
    assert await one_watch() == [(None, "listed"), kopf_watching.Bookmark.LISTED, ("ADDED", "new")]
    assert watched_since == ["120", "300"] and listed == [None]


def test_an_unknown_kopf_watch_lists_after_priming_as_before(
    kopf_fetching: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def other(*args: Any, **kwargs: Any) -> Any:
        """A kopf version that begins its watches some other way."""

    monkeypatch.setattr(kopf_watching, "continuous_watch", other)
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.continue_from_prime(
            kopf.OperatorSettings(), {("", "v1", "pods"): Primed("1", "")}
        )
    assert kopf_watching.fetching is kopf_fetching  # type: ignore[attr-defined]
    assert "lists every kind again" in caplog.text


def _watch_line(kind: str, name: str, version: str = "1", **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": version}
    if annotations:
        meta["annotations"] = annotations
    return {"type": kind, "object": {"metadata": meta}}


END = {"k8s.io/initial-events-end": "true"}


async def _relist(
    monkeypatch: pytest.MonkeyPatch,
    lines: list[Any],
    *,
    streamed: bool = True,
    unchanged: kopf_glue.Unchanged | None = None,
) -> tuple[list[tuple[list[str], str]], list[str], _Listing]:
    """One re-list of pods through :class:`kopf_glue._KopfFetching`, kopf's ``api.stream``
    answering ``lines`` (an exception in them is raised there); returns the chunks (names,
    version), the URLs asked for, and the listing fallback."""
    urls: list[str] = []

    async def stream(url: str, **_: Any) -> Any:
        urls.append(url)
        for line in lines:
            if isinstance(line, BaseException):
                raise line
            yield line

    monkeypatch.setattr(kopf_api, "stream", stream)
    real = _Listing()
    settings = kopf.OperatorSettings()
    settings.watching.field_selectors["", "v1", "pods"] = "spec.schedulerName=x"
    setattr(settings, kopf_glue._STREAMED, streamed)
    setattr(settings, kopf_glue._UNCHANGED, unchanged)
    pods = references.Resource("", "v1", "pods", namespaced=True)
    chunks = [
        ([o["metadata"]["name"] for o in chunk], version)
        async for chunk, version in kopf_glue._KopfFetching(real).fetch_objs(
            settings=settings, resource=pods, namespace=None, logger=logging.getLogger("test")
        )
    ]
    return chunks, urls, real


async def test_a_relist_is_streamed_in_chunks_up_to_the_bookmark_that_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kopf_glue, "STREAM_CHUNK", 2)
    lines = [_watch_line("ADDED", n) for n in "abc"] + [
        _watch_line("BOOKMARK", "", "77"),  # a bookmark that does not end the initial events
        _watch_line("ADDED", "d"),
        _watch_line("BOOKMARK", "", "99", **END),
        _watch_line("ADDED", "after"),  # a change after the listing: kopf's watch, from 99
    ]
    chunks, urls, real = await _relist(monkeypatch, lines)
    assert chunks == [(["a", "b"], ""), (["c", "d"], ""), ([], "99")]
    assert real.calls == []
    assert "sendInitialEvents=true" in urls[0] and "resourceVersionMatch=NotOlderThan" in urls[0]
    assert "fieldSelector=spec.schedulerName" in urls[0] and "watch=true" in urls[0]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "kopf's listing"])
async def test_a_relisted_object_the_handlers_already_have_never_reaches_kopf(
    monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """Objects the informer says are unchanged are dropped from the listing kopf replays (no
    per-object queue and worker for them), streamed or listed as kopf does."""
    monkeypatch.setattr(kopf_glue, "STREAM_CHUNK", 2)
    asked: list[tuple[tuple[str, str, str], str]] = []

    def unchanged(key: tuple[str, str, str], obj: Mapping[str, Any]) -> bool:
        asked.append((key, obj["metadata"]["name"]))
        return obj["metadata"]["name"] in {"a", "c"}

    lines = [_watch_line("ADDED", n) for n in "abcd"] + [_watch_line("BOOKMARK", "", "99", **END)]
    chunks, _, _ = await _relist(monkeypatch, lines, streamed=streamed, unchanged=unchanged)
    if streamed:
        assert chunks == [(["b", "d"], ""), ([], "99")]
        assert asked == [(("", "v1", "pods"), n) for n in "abcd"]
    else:  # kopf's own listing (_Listing) answers a and b
        assert chunks == [(["b"], "500")]
        assert asked == [(("", "v1", "pods"), n) for n in "ab"]


@pytest.mark.parametrize(
    "lines",
    [
        [_watch_line("ADDED", "a"), {"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
        [_watch_line("ADDED", "a")],  # the stream ended without the end bookmark
        [RuntimeError("never raised: replaced below")],
    ],
    ids=["error event", "no end bookmark", "refused"],
)
async def test_a_relist_the_server_does_not_stream_is_listed_as_kopf_does(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, lines: list[Any]
) -> None:
    from kopf._cogs.clients import errors as kopf_errors

    if isinstance(lines[0], RuntimeError):
        lines = [kopf_errors.APIClientError("unknown parameter", status=400, headers={})]
    with caplog.at_level("INFO", logger="shoal.kopf"):
        chunks, _, real = await _relist(monkeypatch, lines)
    assert chunks[-1] == (["a", "b"], "500")  # kopf's own listing, with its version
    assert real.calls == [("pods", None)]
    assert "listed instead of streamed" in caplog.text


async def test_relists_are_kopfs_own_unless_streaming_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks, urls, real = await _relist(monkeypatch, [], streamed=False)
    assert chunks == [(["a", "b"], "500")] and urls == [] and real.calls == [("pods", None)]


def test_configure_streams_relists(kopf_fetching: Any) -> None:
    settings = kopf.OperatorSettings()
    kopf_glue.configure(settings, 300.0)
    assert getattr(settings, kopf_glue._STREAMED) is True
    assert isinstance(kopf_watching.fetching, kopf_glue._KopfFetching)  # type: ignore[attr-defined]


async def test_a_kind_watched_with_shard_selectors_is_listed_as_kopf_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The streamed listing sends no shard selector: such a kind keeps kopf's own listing."""
    original = kopf.OperatorSettings

    def sharded() -> kopf.OperatorSettings:
        settings = original()
        settings.watching.shard_selectors["", "v1", "pods"] = "shard-a"
        return settings

    monkeypatch.setattr(kopf, "OperatorSettings", sharded)
    chunks, urls, real = await _relist(monkeypatch, [_watch_line("BOOKMARK", "", "9", **END)])
    assert chunks == [(["a", "b"], "500")] and urls == [] and real.calls == [("pods", None)]


async def test_read_ahead_waits_at_its_limit_until_brought_down_to_resume() -> None:
    gate = kopf_glue.ReadAhead(limit=3, resume=1)
    for _ in range(3):
        await gate.admit()
    fourth = asyncio.ensure_future(gate.admit())
    await asyncio.sleep(0)
    assert not fourth.done() and gate.waits == 1
    gate.done()  # 2 pending: not yet down to resume
    await asyncio.sleep(0)
    assert not fourth.done()
    gate.done()  # 1 pending
    await fourth
    assert gate.pending == 2
    await gate.admit(wait=False)
    await gate.admit(wait=False)  # over the limit without waiting: counted all the same
    assert gate.pending == 4 and gate.waits == 1
    with pytest.raises(ValueError, match="resume"):
        kopf_glue.ReadAhead(limit=2, resume=2)


async def test_read_ahead_reads_on_when_its_workers_handle_nothing_in_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kopf's watch stream is inside its inactivity timeout while the watcher waits: a wait for
    stuck workers must end first, or that timeout would cancel the watcher."""
    gate = kopf_glue.ReadAhead(limit=2, resume=1, max_wait=0.05)
    await gate.admit()
    await gate.admit()
    with caplog.at_level("INFO", logger="shoal.kopf"):
        await asyncio.wait_for(gate.admit(), 5)
    assert gate.pending == 3 and gate.waits == 1 and gate.timeouts == 1
    assert "the watch reads on" in caplog.text
    gate.done()  # a late worker: nothing waits, nothing breaks
    assert gate.pending == 2


PODS = references.Resource("", "v1", "pods", namespaced=True)


async def _watch_through_kopf(
    monkeypatch: pytest.MonkeyPatch, events: Iterable[Any], handle: Callable[[Any], Any]
) -> tuple[list[tuple[str, int]], int]:
    """kopf's real watcher (as shoal configures it, or not) over ``events``, each handled by
    ``handle``; returns the (object, resourceVersion) handled, in order, and the most events the
    stream had given that were not handled yet."""
    read = 0
    handled: list[tuple[str, int]] = []
    most = 0

    async def infinite_watch(**_: Any) -> AsyncIterator[Any]:
        nonlocal read, most
        for event in events:
            if isinstance(event, dict):
                read += 1
                most = max(most, read - len(handled))
            yield event

    async def processor(*, raw_event: Any, **_: Any) -> None:
        await handle(raw_event)
        meta = raw_event["object"]["metadata"]
        handled.append((meta["name"], int(meta["resourceVersion"])))

    monkeypatch.setattr(kopf_watching, "infinite_watch", infinite_watch)
    await asyncio.wait_for(
        kopf_queueing.watcher(
            namespace=None, settings=kopf.OperatorSettings(), resource=PODS, processor=processor
        ),
        10,
    )
    return handled, most


def _pod_event(name: str, version: int = 1) -> dict[str, Any]:
    meta = {"name": name, "uid": name, "resourceVersion": str(version)}
    return {"type": "MODIFIED", "object": {"metadata": meta}}


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "kopf's own"])
async def test_a_watcher_reads_no_further_ahead_of_its_workers_than_the_bound(
    kopf_watcher: Any, kopf_spawn: object, monkeypatch: pytest.MonkeyPatch, bounded: bool
) -> None:
    """A backlog of 200 events for 50 objects, each handled slowly: bounded, the watcher never has
    more than ``READ_AHEAD`` read and unhandled, and every event is still handled in its object's
    order; kopf's own reads the whole backlog first."""
    monkeypatch.setattr(kopf_glue, "READ_AHEAD", 8)
    monkeypatch.setattr(kopf_glue, "READ_AHEAD_RESUME", 4)
    if bounded:
        assert kopf_glue.bound_read_ahead()
    sent = [(f"p{i % 50}", i) for i in range(200)]
    events = [kopf_watching.Bookmark.LISTED, *(_pod_event(n, v) for n, v in sent)]

    async def slowly(_: Any) -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    handled, most = await _watch_through_kopf(monkeypatch, events, slowly)
    assert sorted(handled) == sorted(sent)
    for name in {n for n, _ in sent}:  # one object's events in the order sent
        versions = [v for n, v in handled if n == name]
        assert versions == sorted(versions)
    if bounded:  # the limit, and the one event the watcher holds while it waits
        assert most <= 8 + 1
    else:
        assert most > 100


async def test_events_before_a_stream_is_listed_are_never_held_back(
    kopf_watcher: Any, kopf_spawn: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handlers may wait for every kind to be listed (kopf's indices): a listing longer than the
    bound is read whole up to LISTED, whatever its workers do meanwhile."""
    monkeypatch.setattr(kopf_glue, "READ_AHEAD", 2)
    monkeypatch.setattr(kopf_glue, "READ_AHEAD_RESUME", 1)
    monkeypatch.setattr(kopf_glue, "READ_AHEAD_WAIT_S", 60.0)  # a held listing must not end by time
    assert kopf_glue.bound_read_ahead()
    listed = asyncio.Event()

    async def after_listed(event: Any) -> None:
        if event["object"]["metadata"]["name"].startswith("l"):
            await listed.wait()

    def stream() -> Iterator[Any]:
        yield from (_pod_event(f"l{i}") for i in range(10))
        listed.set()
        yield kopf_watching.Bookmark.LISTED
        yield from (_pod_event(f"w{i}") for i in range(10))

    handled, _ = await _watch_through_kopf(monkeypatch, stream(), after_listed)
    names = [name for name, _ in handled]
    assert sorted(names) == sorted([f"l{i}" for i in range(10)] + [f"w{i}" for i in range(10)])


def test_an_unknown_kopf_watcher_is_left_as_it_is(
    kopf_watcher: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def other(**kwargs: Any) -> None:
        """A kopf version whose watcher reads its stream some other way."""

    monkeypatch.setattr(kopf_queueing, "watcher", other)
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.bound_read_ahead()
    assert kopf_queueing.watcher is other
    assert kopf_queueing.watching is kopf_watching  # type: ignore[attr-defined]
    assert "reads ahead of its workers unbounded" in caplog.text
