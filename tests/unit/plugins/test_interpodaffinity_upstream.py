"""kube-scheduler 1.37.2's InterPodAffinity unit-test tables, run against shoal's plugin.

The cases are data (tests/data/upstream/interpodaffinity.yaml, whose header says how they were
translated). Each runs as the runtime would: PreFilter, then Filter over the node table unless
PreFilter skipped; or PreScore, then Score over every node and NormalizeScore unless PreScore
skipped. A Filter outcome is compared per node (fits, or the rejection's code and reason).

A case with a ``change`` (upstream's PreFilterExtensions tables: a pod added to or removed from
the cluster) runs twice, the change made through the cache and through the accounting
preemption's what-ifs use (tests/unit/upstream.py ``change_cluster``); a fresh PreFilter must then
count what upstream's AddPod / RemovePod count (``expect.state``: the topology-pair counts of the
incoming pod's affinity and anti-affinity terms and of placed pods' anti-affinity terms that
match it), Filter must give ``expect.filter``, and an undone what-if must leave the counts as
they were.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Rejection
from shoal.core.state.cache import ClusterCache
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins import interpodaffinity
from tests.unit.helpers import all_rows, handle_for, scores_by_name, state
from tests.unit.upstream import change_cluster

DATA = Path(__file__).resolve().parents[2] / "data" / "upstream" / "interpodaffinity.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["cases"]


def _case_id(case: dict[str, Any]) -> str:
    up = case["upstream"]
    return f"{up['test']}/{up['case']}"


def _cluster(case: dict[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    for node in case["nodes"]:
        cache.set_node(NodeSpec.from_dict({"metadata": {"name": node["name"], "labels": node["labels"]}}))
    for i, obj in enumerate(case["pods"]):
        meta = obj["metadata"]
        info = PodInfo.from_dict({**obj, "metadata": {"name": f"existing-{i}", **meta}})
        info.uid = f"uid-{i}"
        cache.upsert_pod(info)
    for name, labels in (case.get("namespaces") or {}).items():
        cache.set_namespace(name, dict(labels))
    return cache


def _incoming(case: dict[str, Any]) -> PodInfo:
    obj = case["pod"]
    info = PodInfo.from_dict({**obj, "metadata": {"name": "incoming", **obj["metadata"]}})
    info.uid = "uid-incoming"
    return info


def _code(name: str) -> Code:
    return Code[re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()]


def _assert_status(got: Status, want: Any, where: str) -> None:
    if want == "Skip":
        assert got.is_skip, f"{where}: want Skip, got {got}"
        return
    assert got.code is _code(want["code"]), f"{where}: want {want['code']}, got {got}"
    # upstream's parse errors are Go's wording; shoal's must name the same thing: the message's
    # leading part ("parsing pod") and every offending value upstream quotes
    reason = want.get("reason", "")
    fragments = [reason.split(": ")[0], *re.findall(r'Invalid value: "[^"]*"', reason)]
    for fragment in fragments:
        assert fragment in got.message, f"{where}: {fragment!r} not in {got.message!r}"


def _per_node(table: Any, rejections: list[Rejection]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in sorted(table.index.values()):
        hits = [r for r in rejections if r.mask[row]]
        assert len(hits) <= 1, f"node {table.name(row)} rejected twice: {[r.reason for r in hits]}"
        out[table.name(row)] = {"code": hits[0].code.name, "reason": hits[0].reason} if hits else "fits"
    return out


def _expected_filter(want: dict[str, Any]) -> dict[str, Any]:
    return {
        node: v if v == "fits" else {"code": _code(v["code"]).name, "reason": v["reason"]}
        for node, v in want.items()
    }


def _params(changes: bool = False) -> list[Any]:
    """One per case; a ``differs`` case (a deliberate difference, docs/differences.md) is a strict
    xfail, so it fails loudly the day shoal agrees with upstream and the mark can go."""
    return [
        pytest.param(
            c,
            id=_case_id(c),
            marks=[pytest.mark.xfail(strict=True, reason=c["differs"])] if c.get("differs") else [],
        )
        for c in CASES
        if ("change" in c) is changes
    ]


@pytest.mark.parametrize("case", _params())
def test_upstream_case(case: dict[str, Any]) -> None:
    expect = case["expect"]
    cache = _cluster(case)
    table = cache.table
    args = interpodaffinity.Args.model_validate(case["args"])
    plugin = interpodaffinity.new(args, handle_for(cache))
    pod = _incoming(case)

    if "pre_filter" in expect or "filter" in expect:
        st = state()
        _, status = plugin.pre_filter(st, pod)
        if "pre_filter" in expect:
            _assert_status(status, expect["pre_filter"], "PreFilter")
        else:
            assert status.ok, f"PreFilter: want Success, got {status}"
        if "filter" in expect:
            assert not status.is_skip
            rejections = list(plugin.filter_nodes(st, pod, table, table.valid_rows()))
            got = _per_node(table, rejections)
            want = _expected_filter(expect["filter"])
            # upstream may filter only some of the nodes
            assert {n: got[n] for n in want} == want

    if "pre_score" in expect or "scores" in expect:
        st = state()
        rows = all_rows(table)
        status = plugin.pre_score(st, pod, rows, table)
        if "pre_score" in expect:
            _assert_status(status, expect["pre_score"], "PreScore")
        else:
            assert status.ok, f"PreScore: want Success, got {status}"
        if "scores" in expect:
            assert status.ok
            raw = plugin.score_nodes(st, pod, table, rows)
            scores = plugin.normalize_scores(st, pod, raw)
            assert scores_by_name(table, scores) == expect["scores"]


def _affinity_state(plugin: Any, pod: PodInfo) -> tuple[dict[str, Any], CycleState]:
    """A fresh PreFilter; its counts as upstream's topology pairs: key -> value -> count (> 0)."""
    st = state()
    _, status = plugin.pre_filter(st, pod)
    assert status.ok, f"PreFilter: {status}"
    got = st.require(interpodaffinity.FILTER_KEY)
    table = plugin.cache.table

    def named(counts: dict[str, dict[int, int]]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for key, per_code in counts.items():
            values = {code: value for value, code in table.label_values(key).items()}
            pairs = {values[code]: n for code, n in per_code.items() if n}
            if pairs:
                out[key] = pairs
        return out

    counts = {"affinity": got.affinity, "anti": got.anti, "existing_anti": got.existing_anti}
    return {name: named(c) for name, c in counts.items()}, st


@pytest.mark.parametrize("path", ["cache", "whatif"])
@pytest.mark.parametrize("case", _params(changes=True))
def test_upstream_add_remove(case: dict[str, Any], path: str) -> None:
    cache = _cluster(case)
    table = cache.table
    plugin = interpodaffinity.new(interpodaffinity.Args.model_validate(case["args"]), handle_for(cache))
    pod = _incoming(case)
    before, _ = _affinity_state(plugin, pod)
    undo = change_cluster(cache, case["change"], whatif=path == "whatif")
    got, st = _affinity_state(plugin, pod)
    if "state" in case["expect"]:
        assert got == case["expect"]["state"]
    rejections = list(plugin.filter_nodes(st, pod, table, table.valid_rows()))
    assert _per_node(table, rejections) == _expected_filter(case["expect"]["filter"])
    undo()
    if path == "whatif":
        assert _affinity_state(plugin, pod)[0] == before, "the what-if left the counts changed"
