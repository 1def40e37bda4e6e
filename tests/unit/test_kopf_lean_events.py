"""kopf's processor of watch events as shoal configures it (``kopf_glue.lean_events``): a kind
whose only handlers are the informer's goes straight to them; any other kind takes kopf's path.
Every test drives kopf's real processor module, registry, indexers, memories and toggles."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator, Mapping
from typing import Any, cast

import kopf
import pytest
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, queueing
from kopf._core.reactor import processing as kopf_processing

from shoal.kube.informer import EVENT_ONLY, LISTED, Event, Informer, Kind
from shoal.kube.wire import Resource
from shoal.operator_app import kopf_glue

PODS = references.Resource("", "v1", "pods", namespaced=True)
NODES = references.Resource("", "v1", "nodes", namespaced=False)


@pytest.fixture
def kopf_process() -> Iterator[Any]:
    """kopf's own processor in place before the test (another test may have run the operator in
    this process), the lean one applied, and kopf's own again after it."""
    original = kopf_glue.KOPF_OWN.get("process", kopf_processing.process_resource_event)
    kopf_processing.process_resource_event = original
    assert kopf_glue.lean_events()
    yield original
    kopf_processing.process_resource_event = original


def pod(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    meta["resourceVersion"] = "7"
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}}


class Seen:
    """An informer watching pods and nodes; what each handler was given."""

    def __init__(self) -> None:
        self.informer = Informer()
        self.events: list[tuple[str, str, str]] = []
        for plural in ("pods", "nodes"):
            kind: Kind[Mapping[str, Any]] = Kind(Resource("", "v1", plural, plural == "pods"), dict)
            self.informer.watch(kind, self.record)

    async def record(self, event: Event[Mapping[str, Any]]) -> None:
        self.events.append((event.kind.name, event.type, event.raw["metadata"]["name"]))

    def registry(self) -> kopf.OperatorRegistry:
        reg = kopf.OperatorRegistry()
        self.informer.install(reg)
        return reg


def processor(reg: kopf.OperatorRegistry, resource: references.Resource) -> Any:
    """kopf's processor as kopf's running module binds it, looked up in kopf's module now."""
    return functools.partial(
        kopf_processing.process_resource_event,
        lifecycle=kopf.lifecycles.all_at_once,
        registry=reg,
        settings=kopf.OperatorSettings(),
        indexers=indexing.OperatorIndexers(),
        memories=inventory.ResourceMemories(),
        memobase=cast(Any, ephemera.Memo()),  # kopf types it as a TypeVar
        event_queue=asyncio.Queue(),
        resource=resource,
    )


def test_configure_applies_the_lean_processor(kopf_process: Any) -> None:
    """Fails when a kopf upgrade changes how an event is processed: the change must then be
    looked at again."""
    kopf_processing.process_resource_event = kopf_process
    kopf_glue.configure(kopf.OperatorSettings(), 300.0)
    assert kopf_processing.process_resource_event is kopf_glue._process_event
    assert kopf_glue.lean_events()  # idempotent
    assert kopf_glue.KOPF_OWN["process"] is kopf_process


def test_the_informers_handlers_are_lean_and_any_other_handler_is_kopfs() -> None:
    seen = Seen()
    reg = seen.registry()
    pods = kopf_glue._lean_handlers(reg, PODS)
    assert pods is not None and [h.id for h in pods] == ["watch-pods"]
    assert all(getattr(h.fn, EVENT_ONLY) for h in pods)
    assert kopf_glue._lean_handlers(reg, references.Resource("", "v1", "services")) is None

    async def plain(**_: Any) -> None:
        """A handler that may read any of kopf's arguments."""

    async def marked(**_: Any) -> None:
        """Marked, but kopf must filter its events."""

    setattr(marked, EVENT_ONLY, True)
    assert kopf_glue._lean_handlers(reg, NODES) is not None
    kopf.on.event("", "v1", "nodes", registry=reg, labels={"tier": "gpu"}, id="gpu-nodes")(marked)
    assert kopf_glue._lean_handlers(reg, NODES) is None  # re-planned: a handler came since
    assert kopf_glue._lean_handlers(reg, PODS) is not None

    def blocking(**_: Any) -> None:
        """Marked, but a plain function: kopf runs it in a thread."""

    setattr(blocking, EVENT_ONLY, True)
    threaded = seen.registry()
    kopf.on.event("", "v1", "nodes", registry=threaded, id="blocking")(blocking)
    assert kopf_glue._lean_handlers(threaded, NODES) is None

    other = seen.registry()
    kopf.on.event("", "v1", "pods", registry=other, id="plain")(plain)
    assert kopf_glue._lean_handlers(other, PODS) is None
    assert kopf_glue._lean_handlers(other, NODES) is not None

    changing = seen.registry()
    kopf.on.create("", "v1", "nodes", registry=changing, id="create")(plain)
    assert kopf_glue._lean_handlers(changing, NODES) is None

    indexed = seen.registry()
    kopf.index("", "v1", "pods", registry=indexed, id="by-name")(plain)
    assert kopf_glue._lean_handlers(indexed, PODS) is None


async def test_a_lean_kind_reaches_its_handler_with_no_per_object_memory(kopf_process: Any) -> None:
    seen = Seen()
    reg = seen.registry()
    process = processor(reg, PODS)
    assert await process(raw_event={"type": None, "object": pod("a")}) is None
    assert await process(raw_event={"type": "MODIFIED", "object": pod("a")}) is None
    assert not process.keywords["memories"]._items  # kopf's own path keeps one until DELETED
    assert await process(raw_event={"type": "DELETED", "object": pod("a")}) is None
    assert seen.events == [("pods", LISTED, "a"), ("pods", "MODIFIED", "a"), ("pods", "DELETED", "a")]


async def test_a_kind_kopf_must_filter_takes_kopfs_own_path(kopf_process: Any) -> None:
    """A labels filter: kopf's processor runs (a memory per object) and filters as it did."""
    got: list[str] = []

    async def gpu(event: Mapping[str, Any], **_: Any) -> None:
        got.append(event["object"]["metadata"]["name"])

    setattr(gpu, EVENT_ONLY, True)
    reg = kopf.OperatorRegistry()
    kopf.on.event("", "v1", "pods", registry=reg, labels={"tier": "gpu"}, id="gpu")(gpu)
    process = processor(reg, PODS)
    await process(raw_event={"type": "ADDED", "object": pod("cpu", {"tier": "cpu"})})
    await process(raw_event={"type": "ADDED", "object": pod("gpu", {"tier": "gpu"})})
    assert got == ["gpu"]
    assert len(process.keywords["memories"]._items) == 2


async def test_a_failing_handler_is_logged_and_the_next_event_handled(
    kopf_process: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The failing handler comes first: the informer's, after it, still gets every event."""
    seen = Seen()
    reg = kopf.OperatorRegistry()

    async def broken(event: Mapping[str, Any], **_: Any) -> None:
        if event["object"]["metadata"]["name"] == "bad":
            raise ValueError("no such field")

    setattr(broken, EVENT_ONLY, True)
    kopf.on.event("", "v1", "pods", registry=reg, id="broken")(broken)
    seen.informer.install(reg)
    process = processor(reg, PODS)
    with caplog.at_level(logging.ERROR, logger="shoal.kopf"):
        assert await process(raw_event={"type": "ADDED", "object": pod("bad")}) is None
        assert await process(raw_event={"type": "ADDED", "object": pod("good")}) is None
    assert seen.events == [("pods", "ADDED", "bad"), ("pods", "ADDED", "good")]
    assert "'broken' failed on pods default/bad" in caplog.text and "no such field" in caplog.text
    assert "will ignore it" in caplog.text


async def test_a_lean_kind_waits_for_kopfs_indices_as_kopfs_path_does(kopf_process: Any) -> None:
    """kopf holds every handler until each object of every indexed kind is indexed: this
    object's toggle is dropped at once, and its handler waits for the others'."""
    seen = Seen()
    process = processor(seen.registry(), PODS)
    indexed = aiotoggles.ToggleSet(all)
    this = await indexed.make_toggle(name="this pod")
    other = await indexed.make_toggle(name="another kind's object")
    dropped = asyncio.Event()
    kopfs_drop = indexed.drop_toggle

    async def drop(toggle: aiotoggles.Toggle) -> None:
        await kopfs_drop(toggle)
        dropped.set()

    indexed.drop_toggle = drop  # type: ignore[method-assign]
    task = asyncio.create_task(
        process(raw_event={"type": None, "object": pod("a")}, resource_indexed=this, operator_indexed=indexed)
    )
    try:
        await asyncio.wait_for(dropped.wait(), 5)  # the lean path drops this object's toggle first
        assert this not in indexed and other in indexed
        assert not task.done() and seen.events == []
        await other.turn_to(True)
        assert await asyncio.wait_for(task, 5) is None
        assert seen.events == [("pods", LISTED, "a")]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def through_kopfs_worker(reg: kopf.OperatorRegistry, events: list[Any]) -> None:
    """``events`` of one object through kopf's own per-object worker, as its watcher hands them
    over (the worker passes the stream's pressure, the indices' toggles and its consistency time)."""
    key: queueing.ObjectRef = (PODS, cast(Any, "uid-a"))
    stream = queueing.Stream(backlog=asyncio.Queue(), pressure=asyncio.Event())
    for event in events:
        stream.backlog.put_nowait(event)
    stream.backlog.put_nowait(queueing.EOS.token)
    streams: dict[queueing.ObjectRef, queueing.Stream] = {key: stream}
    await asyncio.wait_for(
        queueing.worker(
            signaller=asyncio.Condition(),
            settings=kopf.OperatorSettings(),
            processor=processor(reg, PODS),
            streams=streams,
            key=key,
        ),
        10,
    )
    assert not streams  # the worker ended at the end of its stream, as kopf's do


async def test_kopfs_worker_gives_the_informer_the_same_events_either_way(kopf_process: Any) -> None:
    """The same listing, change and deletion of one pod through kopf's worker: kopf's own
    processor and the lean one give the informer's handler the same events, in order."""
    events = [
        {"type": None, "object": pod("a")},
        {"type": "MODIFIED", "object": pod("a", {"tier": "gpu"})},
        {"type": "DELETED", "object": pod("a")},
    ]
    lean, own = Seen(), Seen()
    await through_kopfs_worker(lean.registry(), events)
    kopf_processing.process_resource_event = kopf_process  # kopf's own, as before lean_events
    await through_kopfs_worker(own.registry(), events)
    assert (
        lean.events
        == own.events
        == [("pods", LISTED, "a"), ("pods", "MODIFIED", "a"), ("pods", "DELETED", "a")]
    )


async def test_kopfs_worker_falls_back_to_kopfs_processor_with_all_it_passes(
    kopf_process: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kind kopf must filter, through kopf's worker: kopf's processor gets every argument
    the worker and kopf's partial pass, and filters as it did."""
    got: list[str] = []
    passed: list[set[str]] = []

    async def gpu(event: Mapping[str, Any], **_: Any) -> None:
        got.append(event["type"])

    async def kopfs_own(**kwargs: Any) -> Any:
        passed.append(set(kwargs))
        return await kopf_process(**kwargs)

    monkeypatch.setitem(kopf_glue.KOPF_OWN, "process", kopfs_own)
    reg = kopf.OperatorRegistry()
    kopf.on.event("", "v1", "pods", registry=reg, labels={"tier": "gpu"}, id="gpu")(gpu)
    await through_kopfs_worker(
        reg,
        [{"type": "ADDED", "object": pod("a")}, {"type": "MODIFIED", "object": pod("a", {"tier": "gpu"})}],
    )
    assert got == ["MODIFIED"]
    worker = {"raw_event", "stream_pressure", "resource_indexed", "operator_indexed", "consistency_time"}
    bound = {
        "lifecycle",
        "registry",
        "settings",
        "indexers",
        "memories",
        "memobase",
        "event_queue",
        "resource",
    }
    assert passed == [worker | bound] * 2


def test_an_unknown_kopf_processor_is_left_as_it_is(
    kopf_process: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def other(**kwargs: Any) -> None:
        """A kopf version that processes events some other way."""

    monkeypatch.setattr(kopf_processing, "process_resource_event", other)
    with caplog.at_level("INFO", logger="shoal.kopf"):
        assert not kopf_glue.lean_events()
    assert kopf_processing.process_resource_event is other
    assert "process_resource_event is not the one shoal knows" in caplog.text
