"""kube-scheduler 1.37's DynamicResources tables (tests/data/upstream/dynamicresources.yaml):
computeScore over claims and per-node allocations, NormalizeScore, TestPlugin's scoring cases run
through PreFilter, Filter, Score and NormalizeScore over the node table, and TestPlugin's other
cases run as upstream's testPlugin runs them: PreEnqueue, PreFilter, Filter per node, then PostFilter
when no node fits (where the case expects it), or Reserve on the node picked, then (Unreserve or)
PreBind, whose writes a recording ClaimWriter applies to the case's claims (and to the plugin's
store, as the watch would bring them back: PreBind waits there for binding conditions)."""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Diagnosis
from shoal.core.framework.invoker import PluginFailed
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.core.state.workloads import native_pod_group
from shoal.kube.dra import allocation_body
from shoal.plugins.dynamicresources.binding import Args, parse_duration
from shoal.plugins.dynamicresources.objects import DRA_DECODERS, AllocatedDevice, DeviceId, ResourceClaimInfo
from shoal.plugins.dynamicresources.plugin import DynamicResources
from shoal.plugins.dynamicresources.ports import CLAIM_WRITER, DELETE_PROTECTION
from shoal.plugins.dynamicresources.scoring import compute_score
from shoal.plugins.dynamicresources.store import DraStore
from tests.unit.helpers import cache_with, handle_for
from tests.unit.upstream import DATA, FITS, check_status, node_verdicts

PLUGIN = "dynamicresources"


def cases() -> list[dict[str, Any]]:
    doc = yaml.safe_load((DATA / f"{PLUGIN}.yaml").read_text())
    out: list[dict[str, Any]] = doc["cases"]
    return out


def params(test: str) -> list[Any]:
    return [
        pytest.param(c, id=c["upstream"].split(": ", 1)[1]) for c in cases() if f" {test}: " in c["upstream"]
    ]


#: TestPlugin's scoring cases, and the others (PreEnqueue .. PreBind)
SCORING = [p for p in params("TestPlugin") if "raw_scores" in p.values[0]["expect"]]
STEPWISE = [p for p in params("TestPlugin") if "raw_scores" not in p.values[0]["expect"]]


@pytest.mark.parametrize("case", params("Test_computesScore"))
def test_compute_score(case: dict[str, Any]) -> None:
    claims = [ResourceClaimInfo.from_dict(c) for c in case["claims"]]
    allocated = [c for c in claims if c.allocated is not None]
    to_allocate = [c for c in claims if c.allocated is None]
    found = [
        tuple(AllocatedDevice(r, DeviceId("d", "p", f"dev-{i}")) for i, r in enumerate(names))
        for names in case["allocations"]
    ]
    want = case["expect"]
    if "error" in want:
        with pytest.raises(ValueError, match=re.escape(want["error"])):
            compute_score(allocated, to_allocate, found)
    else:
        assert compute_score(allocated, to_allocate, found) == want["score"]


def plugin_for(
    objects: list[dict[str, Any]], nodes: list[dict[str, Any]], args: dict[str, Any] | None = None
) -> DynamicResources:
    cache = cache_with(nodes)
    for obj in objects:
        if obj["kind"] == "PodGroup":  # a native one, whose claims its members share
            cache.set_pod_group(native_pod_group(obj))
        else:
            cache.store(DraStore).apply(DRA_DECODERS[obj["kind"]](obj))
    return DynamicResources(handle_for(cache), Args.model_validate(args) if args else None)


@pytest.mark.parametrize("case", params("TestNormalizeScore"))
def test_normalize_score(case: dict[str, Any]) -> None:
    plugin = plugin_for([], [])
    raw = np.array(list(case["raw_scores"].values()), dtype=np.int64)
    got = plugin.normalize_scores(CycleState(), PodInfo.from_dict({}), raw)
    assert dict(zip(case["raw_scores"], (int(s) for s in got), strict=True)) == case["expect"]["scores"]


@pytest.mark.parametrize("case", SCORING)
def test_plugin_scoring(case: dict[str, Any]) -> None:
    plugin = plugin_for(case["objects"], case["nodes"])
    table = plugin.cache.table
    pod = PodInfo.from_dict(case["pod"])
    state = CycleState()
    _, status = plugin.pre_filter(state, pod)
    assert status.ok, status
    got = node_verdicts(table, plugin.filter_nodes(state, pod, table, table.valid_rows().copy()))
    want = case["expect"]
    assert got == {name: want.get("filter", {}).get(name, FITS) for name in table.index}
    rows = np.array(sorted(table.index[n] for n, v in got.items() if v == FITS), dtype=np.int64)
    raw = plugin.score_nodes(state, pod, table, rows)
    assert {table.name(int(r)): int(s) for r, s in zip(rows, raw, strict=True)} == want["raw_scores"]
    normalised = plugin.normalize_scores(state, pod, raw)
    assert {table.name(int(r)): int(s) for r, s in zip(rows, normalised, strict=True)} == want["scores"]


KEYS = {"upstream", "pod", "nodes", "objects", "args", "in_flight", "note", "expect"}
STEPS = {
    "pre_enqueue",
    "pre_filter",
    "filter",
    "post_filter",
    "reserve",
    "unreserve_before_pre_bind",
    "pre_bind",
}
#: an allocation's ``allocationTimestamp`` as the expectations write it: set, whatever its value
#: (upstream's test replaces every one with the zero time before comparing)
STAMPED = "set"


class RecordingClaimWriter:
    """DynamicResources' PreBind writes (the core ClaimWriter protocol), applied to the case's claim
    objects as the API server would store them: the delete-protection finalizer on a claim shoal
    allocated, then ``status.allocation`` (as ``kube/dra.py`` builds it) and the pod in
    ``status.reservedFor``; PostFilter's deallocation. Each write reaches ``store`` too, as the
    watch brings it back. No client, no server: what reaches the wire is covered by
    tests/integration/test_dra.py on the real API server."""

    def __init__(self, objects: list[dict[str, Any]], store: DraStore) -> None:
        self.store = store
        self.claims = {
            o["metadata"]["name"]: copy.deepcopy(o) for o in objects if o["kind"] == "ResourceClaim"
        }

    def _watched(self, stored: dict[str, Any]) -> Status:
        self.store.apply(ResourceClaimInfo.from_dict(copy.deepcopy(stored)))
        return Status()

    async def reserve_claim(
        self, claim: ResourceClaimInfo, allocation: ResourceClaimInfo | None, consumer: Mapping[str, str]
    ) -> Status:
        stored = self.claims[claim.name]
        if allocation is not None and DELETE_PROTECTION not in claim.finalizers:
            stored["metadata"]["finalizers"] = [*claim.finalizers, DELETE_PROTECTION]
        status: dict[str, Any] = {"reservedFor": [*(dict(c) for c in claim.consumers), dict(consumer)]}
        if allocation is not None:
            status["allocation"] = allocation_body(allocation)
        stored["status"] = {**(stored.get("status") or {}), **status}
        return self._watched(stored)

    async def deallocate(self, claim: ResourceClaimInfo) -> Status:
        stored = self.claims[claim.name]
        status = stored.get("status") or {}
        stored["status"] = {
            k: v for k, v in status.items() if k not in ("allocation", "reservedFor", "devices")
        }
        return self._watched(stored)


def _dated(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with each allocation's ``allocationTimestampAgo`` (a duration) made its
    ``allocationTimestamp``, that long before now, as the API writes one (RFC 3339, seconds)."""
    now = datetime.now(UTC)
    out = copy.deepcopy(objects)
    for obj in out:
        allocation = (obj.get("status") or {}).get("allocation")
        if isinstance(allocation, dict) and "allocationTimestampAgo" in allocation:
            ago = timedelta(seconds=parse_duration(allocation.pop("allocationTimestampAgo")))
            allocation["allocationTimestamp"] = (now - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


def _stamped(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """``status`` with its allocation's ``allocationTimestamp`` (a valid RFC 3339 time) as STAMPED."""
    allocation = (status or {}).get("allocation")
    if not isinstance(allocation, dict) or "allocationTimestamp" not in allocation:
        return status
    stamp = str(allocation["allocationTimestamp"])
    datetime.fromisoformat(stamp.replace("Z", "+00:00"))  # ValueError when it is no timestamp
    return {**(status or {}), "allocation": {**allocation, "allocationTimestamp": STAMPED}}


def _check_written(
    what: str, api: RecordingClaimWriter, before: dict[str, Any], want: dict[str, Any]
) -> None:
    """The claims a step changed (finalizers and status afterwards) against ``want["claims"]``."""
    changed = {n: o for n, o in api.claims.items() if _without_version(o) != _without_version(before[n])}
    expected = {c["name"]: c for c in want.get("claims", ())}
    assert set(changed) == set(expected), f"{what} wrote {sorted(changed)}, upstream {sorted(expected)}"
    for name, obj in changed.items():
        assert obj["metadata"].get("finalizers", []) == expected[name]["finalizers"], name
        assert _stamped(obj.get("status")) == expected[name]["status"], name


def _check_outcome(what: str, got: Status, want: dict[str, Any] | str | None) -> None:
    """As check_status; ``message`` (upstream's, for an Error) must be in shoal's, as upstream's
    verify checks an error (ErrorContains)."""
    if isinstance(want, dict) and "message" in want:
        check_status(what, got, want["code"])
        assert want["message"] in got.message, f"{what}: {got.message!r} lacks {want['message']!r}"
    else:
        check_status(what, got, want)


def _held(raw: dict[str, Any]) -> ResourceClaimInfo:
    """An in-flight claim ({name, allocation}) as the store holds it."""
    status = {"allocation": raw["allocation"]}
    return ResourceClaimInfo.from_dict({"metadata": {"name": raw["name"]}, "status": status})


def _allocated(raws: list[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    """In-flight claims ({name, allocation}) as name, devices, node."""
    return sorted((c.name, c.allocated, c.allocated_node) for c in map(_held, raws))


def _in_flight(plugin: DynamicResources) -> list[tuple[str, Any, str]]:
    return sorted(
        (c.name, c.allocated, c.allocated_node) for c in plugin.cache.store(DraStore).assumed.values()
    )


def _check_verdict(node: str, got: Any, want: Any, case: dict[str, Any]) -> None:
    """``want``: FITS or {code, and reasons (exact), message (upstream's, which shoal's must
    contain, as upstream's verify checks), or upstream_message (shoal's words differ on purpose:
    the case's note says how; the code is compared)}."""
    if want == FITS or got == FITS:
        assert got == want, f"Filter on {node}: got {got}, want {want}"
        return
    assert got["code"] == want["code"], f"Filter on {node}: got {got}, want {want}"
    if "reasons" in want:
        assert got["reasons"] == want["reasons"], f"Filter on {node}: got {got}, want {want}"
    elif "message" in want:
        assert any(want["message"] in r for r in got["reasons"]), f"Filter on {node}: got {got}"
    else:
        assert "upstream_message" in want and case.get("note"), "shoal's other words need a note"


def _filter(case: dict[str, Any], plugin: DynamicResources, state: CycleState, pod: PodInfo) -> list[str]:
    """Filter over every node, compared; the nodes that fit, in order ([] after an Error)."""
    table = plugin.cache.table
    want = case["expect"].get("filter", {})
    try:
        got = node_verdicts(table, plugin.filter_nodes(state, pod, table, table.valid_rows().copy()))
    except PluginFailed as exc:  # an Error aborts the cycle, as upstream's Filter returning Error does
        errors = {n: v for n, v in want.items() if v != FITS and v["code"] == "Error"}
        assert len(errors) == 1, f"Filter failed ({exc.status.message}), upstream expects {want}"
        [(node, verdict)] = errors.items()
        _check_verdict(node, {"code": "Error", "reasons": list(exc.status.reasons)}, verdict, case)
        return []
    for name in table.index:
        _check_verdict(name, got[name], want.get(name, FITS), case)
    return [n for n in table.index if got[n] == FITS]


def _pick(plugin: DynamicResources, state: CycleState, pod: PodInfo, feasible: list[str]) -> str:
    """As upstream's run: the one node that fits, else the first with the highest score."""
    if len(feasible) == 1:
        return feasible[0]
    table = plugin.cache.table
    rows = np.array([table.index[n] for n in feasible], dtype=np.int64)
    scores = [int(s) for s in plugin.score_nodes(state, pod, table, rows)]
    return feasible[scores.index(max(scores))]


@pytest.mark.parametrize("case", STEPWISE)
def test_plugin(case: dict[str, Any]) -> None:
    assert set(case) <= KEYS and set(case["expect"]) <= STEPS, case["upstream"]
    objects = _dated(case["objects"])
    plugin = plugin_for(objects, case["nodes"], case.get("args"))
    for raw in case.get("in_flight", ()):  # another pod's Reserve holds these (upstream's inFlightClaims)
        plugin.cache.store(DraStore).assume(_held(raw))
    api = RecordingClaimWriter(objects, plugin.cache.store(DraStore))
    plugin.handle.extras[CLAIM_WRITER] = api
    want = case["expect"]
    pod = PodInfo.from_dict(case["pod"])
    status = plugin.pre_enqueue(pod)
    check_status("PreEnqueue", status, want.get("pre_enqueue"))
    state = CycleState()
    if status.ok:
        _, status = plugin.pre_filter(state, pod)
        check_status("PreFilter", status, want.get("pre_filter"))
    if status.is_skip:  # the framework calls no Filter after Skip: every node passes this plugin
        feasible = list(plugin.cache.table.index)
    else:
        feasible = _filter(case, plugin, state, pod) if status.ok else []
    if not feasible:
        assert not (STEPS - {"pre_enqueue", "pre_filter", "filter", "post_filter"}) & set(want), (
            "upstream reserves a node"
        )
        if "post_filter" in want:
            before = copy.deepcopy(api.claims)
            status = asyncio.run(_post_filter(plugin, state, pod))
            _check_outcome("PostFilter", status, want["post_filter"].get("status"))
            _check_written("PostFilter", api, before, want["post_filter"])
        return
    node = _pick(plugin, state, pod, feasible)
    check_status("Reserve", plugin.reserve(state, pod, node), None)
    assert _in_flight(plugin) == _allocated(want.get("reserve", {}).get("in_flight", []))
    if "unreserve_before_pre_bind" in want:  # another plugin's PreBind failed
        plugin.unreserve(state, pod, node)
        assert _in_flight(plugin) == _allocated(want["unreserve_before_pre_bind"]["in_flight"])
        return
    before = copy.deepcopy(api.claims)
    pre_bind = want.get("pre_bind", {})
    _check_outcome("PreBind", asyncio.run(plugin.pre_bind(state, pod, node)), pre_bind.get("status"))
    _check_written("PreBind", api, before, pre_bind)


async def _post_filter(plugin: DynamicResources, state: CycleState, pod: PodInfo) -> Status:
    """PostFilter, then the writes it started (without waiting, as in the scheduler) carried out."""
    status = plugin.post_filter(state, pod, Diagnosis())
    await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
    return status


def _without_version(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("resourceVersion", None)
    return out


def test_cases_name_upstream_file_test_and_case() -> None:
    names = [c["upstream"] for c in cases()]
    assert names and len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(rf"{PLUGIN}/\w+_test\.go Test\w+: .+", name, re.DOTALL), name
    assert Path(DATA / f"{PLUGIN}.yaml").read_text().startswith("# kube-scheduler's DynamicResources")
