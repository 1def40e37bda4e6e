"""The informer (kube/informer.py) without a server: priming, typed events, the re-list check."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kopf
import pytest

from shoal.core.state.objects import PodInfo
from shoal.kube.informer import (
    ADDED,
    DELETED,
    LISTED,
    MODIFIED,
    PRIMED,
    Event,
    Informer,
    Kind,
    Primed,
    stream,
)
from shoal.kube.kinds import KIND_NODES, KIND_PODGROUPS, KIND_PODS, KIND_PROFILES
from shoal.kube.listing import list_each
from shoal.kube.rest import RawClient
from shoal.kube.wire import LIVE_PODS_SELECTOR
from shoal.testing.objects import make_node, make_pod


class FakeRaw:
    """GETs of collections: ``objects[path]`` (a missing path is a 404), in pages of two."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.queries: list[tuple[str, dict[str, list[str]]]] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        self.queries.append((parts.path, query))
        if parts.path not in self.objects:
            return 404, {"message": "not found"}
        start = int(query.get("continue", ["0"])[0])
        items = self.objects[parts.path][start : start + 2]
        more = start + 2 < len(self.objects[parts.path])
        meta = {"continue": str(start + 2) if more else "", "resourceVersion": f"{100 + len(self.queries)}"}
        return 200, {"items": items, "metadata": meta}


def raw(objects: dict[str, list[dict[str, Any]]]) -> RawClient:
    return FakeRaw(objects)  # type: ignore[return-value]


def recording(informer: Informer, seen: list[tuple[str, str, str]]) -> None:
    for kind in (KIND_PROFILES, KIND_PODGROUPS, KIND_NODES, KIND_PODS):

        async def handler(event: Event[Any], kind: str = kind.name) -> None:
            seen.append((kind, event.type, str(event.raw["metadata"]["name"])))

        informer.watch(kind, handler)


async def test_prime_lists_in_declaration_order_pages_through_and_skips_missing_crds() -> None:
    fake = FakeRaw(
        {
            "/api/v1/nodes": [make_node("n1"), make_node("n2"), make_node("n3")],
            "/api/v1/pods": [make_pod("p1")],
        }
    )
    informer = Informer()
    seen: list[tuple[str, str, str]] = []
    recording(informer, seen)
    counts = await informer.prime(fake)  # type: ignore[arg-type]
    assert counts == {"nodes": 3, "pods": 1}  # the CRDs answered 404: not primed, not fatal
    assert seen == [
        ("nodes", PRIMED, "n1"),
        ("nodes", PRIMED, "n2"),
        ("nodes", PRIMED, "n3"),
        ("pods", PRIMED, "p1"),
    ]
    pod_queries = [q for path, q in fake.queries if path == "/api/v1/pods"]
    assert pod_queries[0]["fieldSelector"] == [LIVE_PODS_SELECTOR]


async def test_a_required_kind_that_cannot_be_listed_fails_priming() -> None:
    informer = Informer()
    recording(informer, [])
    with pytest.raises(Exception, match="HTTP 404"):
        await informer.prime(raw({}))


async def test_events_decode_once_and_only_when_asked() -> None:
    decoded: list[str] = []

    def decode(obj: Mapping[str, Any]) -> PodInfo:
        decoded.append(obj["metadata"]["name"])
        return PodInfo.from_dict(obj)

    event = Event(Kind(KIND_PODS.resource, decode), LISTED, make_pod("p1"))
    assert decoded == []
    assert isinstance(event.obj, PodInfo) and event.obj.name == "p1"
    assert event.obj is event.obj and decoded == ["p1"]


async def test_the_relist_check_forgets_only_what_vanished_before_the_listing() -> None:
    informer = Informer(relist_delay=0.05)
    gone: list[str] = []

    async def ignore(event: Event[Any]) -> None:
        pass

    informer.watch(KIND_NODES, ignore, gone=gone.append)
    for name in ("n1", "n2"):
        await informer.deliver(KIND_NODES, LISTED, make_node(name))
    await informer.deliver(KIND_NODES, DELETED, make_node("n1"))  # deleted while watched: not "gone"
    fake = raw({"/api/v1/nodes": [make_node("n3")]})
    task = asyncio.create_task(informer.run(fake))
    try:
        for _ in range(1000):  # up to 10 s on a loaded machine; done in ~0.05 s
            if gone:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert gone == ["n2"]
    assert await informer.relist_check(fake) == {"nodes": 0}


async def test_a_relist_replays_only_objects_whose_version_changed() -> None:
    """kopf's re-list after a 410 replays every object; one at the resourceVersion the handler
    already has is skipped (as kube-scheduler bypasses an update carrying an identical object),
    a changed one is delivered, and both count as seen for the re-list check."""
    informer = Informer()
    got: list[tuple[str, str]] = []
    gone: list[str] = []

    async def record(event: Event[Any]) -> None:
        got.append((event.type, event.raw["metadata"]["name"]))

    informer.watch(KIND_NODES, record, gone=gone.append)

    def node(name: str, version: str) -> dict[str, Any]:
        obj = make_node(name)
        obj["metadata"]["resourceVersion"] = version
        return obj

    await informer.deliver(KIND_NODES, PRIMED, node("n1", "10"))
    await informer.deliver(KIND_NODES, MODIFIED, node("n2", "11"))
    await informer.deliver(KIND_NODES, LISTED, node("n1", "10"))  # unchanged
    await informer.deliver(KIND_NODES, LISTED, node("n2", "12"))  # changed while not watched
    await informer.deliver(KIND_NODES, LISTED, node("n3", "13"))  # new
    await informer.deliver(KIND_NODES, LISTED, make_node("n4"))  # no version: always delivered
    await informer.deliver(KIND_NODES, LISTED, make_node("n4"))
    assert got == [
        ("PRIMED", "n1"),
        ("MODIFIED", "n2"),
        ("LISTED", "n2"),
        ("LISTED", "n3"),
        ("LISTED", "n4"),
        ("LISTED", "n4"),
    ]
    fake = raw({"/api/v1/nodes": [node("n2", "12"), node("n3", "13"), make_node("n4")]})
    assert await informer.relist_check(fake) == {"nodes": 1}
    assert gone == ["n1"]


def test_field_selectors_reach_kopf() -> None:
    informer = Informer()
    recording(informer, [])
    settings = kopf.OperatorSettings()
    informer.configure(settings)
    assert list(settings.watching.field_selectors.values()) == [LIVE_PODS_SELECTOR]
    registry = kopf.OperatorRegistry()
    informer.install(registry)


class FakeWatch(FakeRaw):
    """A list answering resourceVersion 7, then two watches that the server ends."""

    def __init__(self, watches: list[list[dict[str, Any]]]) -> None:
        super().__init__({"/api/v1/namespaces/ns/pods": []})
        self.watches = watches
        self.watched: list[dict[str, list[str]]] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        return 200, {"items": [], "metadata": {"resourceVersion": "7"}}

    async def stream(self, path: str, *, timeout: float) -> Any:
        self.watched.append(parse_qs(urlsplit(path).query))
        for event in self.watches.pop(0) if self.watches else []:
            yield event
        if not self.watches:
            await asyncio.sleep(3600)


async def test_stream_rewatches_from_the_last_version_and_skips_bookmarks() -> None:
    pod = make_pod("p1", namespace="ns")
    pod["metadata"]["resourceVersion"] = "8"
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
    fake = FakeWatch([[{"type": "ADDED", "object": pod}, bookmark], []])
    events = stream(fake, KIND_PODS, namespace="ns")  # type: ignore[arg-type]
    first = await anext(events)
    assert first.type == "ADDED" and first.obj.name == "p1"
    pending = asyncio.ensure_future(anext(events))
    for _ in range(1000):  # the second watch starts once the first ends: wait for it, up to 10 s
        if len(fake.watched) == 2:
            break
        await asyncio.sleep(0.01)
    pending.cancel()
    assert [w["resourceVersion"] for w in fake.watched] == [["7"], ["9"]]
    assert fake.watched[0]["fieldSelector"] == [LIVE_PODS_SELECTOR]


async def test_prime_keeps_where_each_listed_kind_stood_for_kopfs_first_watch() -> None:
    """Each kind listed leaves its resourceVersion and field selector; a kind not served leaves
    none, and a second priming (a start-up retried) forgets what the first one left."""
    informer = Informer()
    recording(informer, [])
    profiles = KIND_PROFILES.resource
    served = {"/api/v1/nodes": [make_node("n1")], "/api/v1/pods": [make_pod("p1")], profiles.path(): []}
    fake = FakeRaw(served)
    await informer.prime(fake)  # type: ignore[arg-type]
    at = {path: str(101 + i) for i, (path, _) in enumerate(fake.queries)}  # each listing's version
    assert informer.primed_versions == {
        (profiles.group, profiles.version, profiles.plural): Primed(at[profiles.path()], ""),
        ("", "v1", "nodes"): Primed(at["/api/v1/nodes"], ""),
        ("", "v1", "pods"): Primed(at["/api/v1/pods"], LIVE_PODS_SELECTOR),
    }
    del served[profiles.path()]  # the CRD is gone when the start-up is retried
    await informer.prime(raw(served))
    assert set(informer.primed_versions) == {("", "v1", "nodes"), ("", "v1", "pods")}


async def test_the_podgroup_apis_are_primed_and_watched_apart(caplog: pytest.LogCaptureFixture) -> None:
    """Three kinds of one plural: their own names in counts and logs, their own kopf handler ids;
    the native and Volcano ones are optional (a server without them answers 404: logged, not fatal)."""
    from shoal.kube.kinds import KIND_NATIVE_PODGROUPS, KIND_VOLCANO_PODGROUPS, POD_GROUP_KINDS
    from shoal.testing.objects import make_native_pod_group, make_pod_group, make_volcano_pod_group

    volcano = "podgroups.scheduling.volcano.sh"
    assert [k.name for k in POD_GROUP_KINDS] == ["podgroups", "podgroups.scheduling.k8s.io", volcano]
    seen: list[str] = []

    async def handler(event: Event[Any]) -> None:
        seen.append(event.obj.key)

    informer = Informer()
    for kind in POD_GROUP_KINDS:
        informer.watch(kind, handler)
    both = {
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups": [make_pod_group("train", min_member=2)],
        "/apis/scheduling.k8s.io/v1beta1/podgroups": [make_native_pod_group("train", min_count=2)],
        "/apis/scheduling.volcano.sh/v1beta1/podgroups": [make_volcano_pod_group("train", min_member=2)],
    }
    primed = await informer.prime(raw(both))
    assert primed == {"podgroups": 1, "podgroups.scheduling.k8s.io": 1, volcano: 1}
    assert seen == ["default/train", "default/train@scheduling.k8s.io", "default/train@scheduling.volcano.sh"]
    del both["/apis/scheduling.k8s.io/v1beta1/podgroups"]
    del both["/apis/scheduling.volcano.sh/v1beta1/podgroups"]
    with caplog.at_level("INFO", logger="shoal.informer"):
        assert await informer.prime(raw(both)) == {"podgroups": 1}
    assert "not priming podgroups.scheduling.k8s.io" in caplog.text and "not served" in caplog.text
    assert f"not priming {volcano}" in caplog.text
    registry = kopf.OperatorRegistry()
    informer.install(registry)
    ids = {h.id for h in registry._watching.get_all_handlers()}
    assert {"watch-podgroups", "watch-podgroups.scheduling.k8s.io", f"watch-{volcano}"} <= ids
    assert KIND_NATIVE_PODGROUPS.optional and KIND_VOLCANO_PODGROUPS.optional


class _Page(dict[str, Any]):
    """A page body that can be watched for being let go (a plain dict takes no weak reference)."""


async def test_a_listing_lets_each_page_go_before_asking_for_the_next() -> None:
    """``list_each`` keeps nothing of a page once ``each`` has seen its objects: a listing of
    every pod is never held whole while other tasks allocate what they keep."""
    nodes = [make_node(f"n{i}") for i in range(5)]
    inner = FakeRaw({"/api/v1/nodes": nodes})
    pages: list[weakref.ref[_Page]] = []
    alive_at_next_request: list[bool] = []

    class Pages:
        async def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
            gc.collect()
            alive_at_next_request.extend(ref() is not None for ref in pages)
            code, answer = await inner.request(method, path, body, **kwargs)
            page = _Page(answer)
            pages.append(weakref.ref(page))
            return code, page

    names: list[str] = []
    version = await list_each(Pages(), "/api/v1/nodes", lambda obj: names.append(obj["metadata"]["name"]))  # type: ignore[arg-type]
    assert names == [f"n{i}" for i in range(5)] and len(pages) == 3
    assert version == "101"  # the first page's: every page is served at it
    assert alive_at_next_request == [False, False, False]  # page 1 at request 2; 1 and 2 at request 3


async def test_re_listing_unchanged_objects_keeps_nothing_new() -> None:
    """A re-list replays every object; for one at the version already held, the informer keeps
    no new object (a new timestamp per object, made among the listing's short-lived ones, pinned
    the memory the listing had taken: the soak's RSS stepped up at each first re-list)."""
    informer = Informer()

    async def ignore(event: Event[Any]) -> None:
        pass

    informer.watch(KIND_NODES, ignore, gone=lambda _: None)
    count = 3000

    def listing() -> list[dict[str, Any]]:
        objs = [make_node(f"n{i}") for i in range(count)]
        for i, obj in enumerate(objs):
            obj["metadata"]["resourceVersion"] = str(1000 + i)
        return objs

    for obj in listing():
        await informer.deliver(KIND_NODES, PRIMED, obj)
    tracemalloc.start()
    try:
        relisted = listing()  # as a re-list decodes it: the objects and their resourceVersions
        for obj in relisted:
            await informer.deliver(KIND_NODES, LISTED, obj)
        del relisted, obj
        gc.collect()
        kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    finally:
        tracemalloc.stop()
    # what the re-list left alive (it kept each object's new resourceVersion string)
    assert sum(stat.count for stat in kept.statistics("filename")) < count // 10
    fake = raw({"/api/v1/nodes": listing()[1:]})
    assert await informer.relist_check(fake) == {"nodes": 1}  # and the check still tells what vanished


async def test_an_object_seen_while_the_check_lists_is_not_taken_for_vanished() -> None:
    informer = Informer()
    gone: list[str] = []

    async def ignore(event: Event[Any]) -> None:
        pass

    informer.watch(KIND_NODES, ignore, gone=gone.append)
    await informer.deliver(KIND_NODES, LISTED, make_node("old"))
    inner = FakeRaw({"/api/v1/nodes": []})

    class CreatedMeanwhile:
        async def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
            answer = await inner.request(method, path, body, **kwargs)  # listed before "new" was made
            await informer.deliver(KIND_NODES, ADDED, make_node("new"))
            return answer

    assert await informer.relist_check(CreatedMeanwhile()) == {"nodes": 1}  # type: ignore[arg-type]
    assert gone == ["old"]
    assert await informer.relist_check(raw({"/api/v1/nodes": []})) == {"nodes": 1}
    assert gone == ["old", "new"]


async def test_a_replayed_object_at_the_version_held_may_be_dropped_and_still_counts_as_seen() -> None:
    """``replayed_unchanged`` lets kopf's listing drop an object before kopf's per-object machinery:
    only when every watch of the kind has it at that resourceVersion, and it is then seen (the
    re-list check does not take it for vanished) and the check is scheduled."""
    informer = Informer()
    got: list[tuple[str, str]] = []

    async def handler(event: Event[Any]) -> None:
        got.append((event.type, event.raw["metadata"]["name"]))

    informer.watch(KIND_NODES, handler, gone=lambda _: None)
    informer.watch(KIND_PROFILES, handler)  # no identity: never dropped
    nodes = ("", "v1", "nodes")
    a, b = make_node("a"), make_node("b")
    a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"] = "5", "6"
    await informer.deliver(KIND_NODES, PRIMED, a)
    await informer.deliver(KIND_NODES, PRIMED, b)
    assert informer.replayed_unchanged(nodes, {"metadata": {"name": "a", "resourceVersion": "5"}})
    assert informer._listed.is_set()  # the re-list check follows
    assert not informer.replayed_unchanged(nodes, {"metadata": {"name": "b", "resourceVersion": "7"}})
    assert not informer.replayed_unchanged(nodes, {"metadata": {"name": "c", "resourceVersion": "5"}})
    assert not informer.replayed_unchanged(nodes, {"metadata": {"name": "a"}})  # no version: handed on
    profile = {"metadata": {"name": "p", "resourceVersion": "1"}}
    await informer.deliver(KIND_PROFILES, PRIMED, profile)
    res = KIND_PROFILES.resource
    assert not informer.replayed_unchanged((res.group, res.version, res.plural), profile)
    assert got == [("PRIMED", "a"), ("PRIMED", "b"), ("PRIMED", "p")]  # dropping calls no handler
    forgotten: list[str] = []
    informer._watches[0].gone = forgotten.append
    inner = FakeRaw({"/api/v1/nodes": []})

    class ReplayedMeanwhile:
        """The check's listing has neither node; kopf's re-list replays ``a``, unchanged, meanwhile."""

        async def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
            assert informer.replayed_unchanged(nodes, {"metadata": {"name": "a", "resourceVersion": "5"}})
            return await inner.request(method, path, body, **kwargs)

    assert await informer.relist_check(ReplayedMeanwhile()) == {"nodes": 1}  # type: ignore[arg-type]
    assert forgotten == ["b"]  # a, seen while the check listed, is not taken for vanished
