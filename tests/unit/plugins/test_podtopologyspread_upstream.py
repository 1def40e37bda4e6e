"""kube-scheduler 1.37's PodTopologySpread tables (tests/data/upstream/podtopologyspread.yaml).

Filter cases run as the runtime runs the plugin: PreFilter (its Skip means Filter is not called and
every node passes), then ``filter_nodes`` over every node of the cache's table, compared per node
(code and reason). Score cases: PreScore over the candidate nodes — the nodes named in
``expect.scores``; the other nodes of the case are in the cluster but failed Filter (upstream's
``failedNodes``) —, then ``score_nodes`` and ``normalize_scores``.

Each case's ``args`` (upstream's PodTopologySpreadArgs) are parsed by the plugin's own args model
and its ``objects`` (the Services and ReplicaSets that select the pod) go into the cache, so the
default-constraint cases run as upstream runs them; none differs. Feature gates a case turns off
(``feature_gates``) are on in 1.37 and in shoal; the table only keeps such a case when the pod uses
none of the gated fields, which the runner checks.

AddPod / RemovePod cases (``change``: a pod added to or removed from the cluster) check that
shoal's fresh PreFilter after the change counts what upstream's PreFilterExtensions count: each
case runs twice, with the change made through the cache (a pod bound, a pod deleted) and through
the accounting preemption's what-ifs use (``ClusterCache.recount`` of a pending pod, as
core/framework/whatif.py counts a nominated pod; ``ClusterCache.uncount``, as
plugins/defaultpreemption/evaluator.py evicts a victim), which must also leave PreFilter's state as it was
once undone. Compared: per constraint, the matching pods per domain (upstream's TpValueToMatchNum), the
counts of upstream's critical paths (the two smallest), and each node's Filter verdict.
"""

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import parse_spread_constraints
from shoal.core.state.status import Code
from shoal.plugins import podtopologyspread
from tests.unit.upstream import (
    Case,
    World,
    build,
    change_cluster,
    check_status,
    load,
    node_verdicts,
    params,
    run_filter,
)

PLUGIN = "podtopologyspread"
MAX_INT32 = 2**31 - 1  # the match number of a critical path no domain fills
GATED_FIELDS = {
    "NodeInclusionPolicyInPodTopologySpread": ("nodeAffinityPolicy", "nodeTaintsPolicy"),
    "MatchLabelKeysInPodTopologySpread": ("matchLabelKeys",),
}


def own_constraints(case: Case) -> list[dict[str, Any]]:
    constraints: list[dict[str, Any]] = (case.pod.get("spec") or {}).get("topologySpreadConstraints") or []
    return constraints


def check_args_and_gates(case: Case) -> None:
    assert not case.differs, "no PodTopologySpread case differs from upstream"
    for gate, on in case.feature_gates.items():
        assert gate in GATED_FIELDS, f"unknown gate {gate}"
        if not on:
            for c in own_constraints(case):
                used = [f for f in GATED_FIELDS[gate] if f in c]
                assert not used, f"{gate} off upstream, yet the pod sets {used}: the case tests the gate"


def run_score(case: Case, world: World, plugin: Any) -> None:
    expect = case.expect
    if "scores" not in expect and "pre_score" not in expect:
        return
    table, pod = world.table, world.pod
    want = expect.get("scores")
    names = list(want) if want is not None else list(table.index)
    rows = np.array([table.index[n] for n in names], dtype=np.int64)
    state = CycleState()
    status = plugin.pre_score(state, pod, rows, table)
    check_status("PreScore", status, expect.get("pre_score"))
    if want is None:
        return
    assert status.ok, "PreScore stopped, yet upstream expects scores"
    raw = plugin.score_nodes(state, pod, table, rows)
    normalised = plugin.normalize_scores(state, pod, raw)
    assert dict(zip(names, (int(s) for s in normalised), strict=True)) == want


@pytest.mark.parametrize("case", [p for p in params(PLUGIN) if p.values[0].change is None])
def test_upstream(case: Case) -> None:
    check_args_and_gates(case)
    world = build(case)
    args = podtopologyspread.ENTRY.parse_args(case.args or {})
    plugin = podtopologyspread.new(args, world.handle)
    run_filter(case, world, plugin, CycleState())
    run_score(case, world, plugin)


def spread_state(plugin: Any, pod: PodInfo) -> tuple[list[dict[str, Any]], CycleState]:
    """A fresh PreFilter; per hard constraint, its key and the matching pods per domain it counts."""
    state = CycleState()
    _, status = plugin.pre_filter(state, pod)
    assert status.ok, f"PreFilter: {status}"
    prepared = state.require(podtopologyspread.FILTER_KEY)
    table = plugin.cache.table
    out = []
    for c, eligible, counts in zip(prepared.items, prepared.eligible, prepared.node_counts, strict=True):
        codes = table.label_column(c.topology_key)
        values = {code: v for v, code in table.label_values(c.topology_key).items()}
        domains: dict[str, int] = {}
        for row in np.flatnonzero(eligible & (codes >= 0)):
            value = values[int(codes[row])]
            domains[value] = domains.get(value, 0) + int(counts[row])
        out.append({"key": c.topology_key, "counts": domains})
    return out, state


def check_state(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [g["key"] for g in got] == [w["key"] for w in want]
    for g, w in zip(got, want, strict=True):
        assert g["counts"] == w["counts"], f"{w['key']}: counts {g['counts']}, upstream {w['counts']}"
        smallest = [*sorted(g["counts"].values()), MAX_INT32, MAX_INT32][:2]
        assert [n for _, n in w["critical"]] == smallest, f"{w['key']}: critical paths {w['critical']}"
        assert all(n == MAX_INT32 or g["counts"][domain] == n for domain, n in w["critical"])


@pytest.mark.parametrize("path", ["cache", "whatif"])
@pytest.mark.parametrize("case", [p for p in params(PLUGIN) if p.values[0].change is not None])
def test_upstream_add_remove(case: Case, path: str) -> None:
    check_args_and_gates(case)
    assert case.change is not None and len(case.change) == 1
    world = build(case)
    plugin = podtopologyspread.new(podtopologyspread.ENTRY.parse_args(case.args or {}), world.handle)
    table, pod = world.table, world.pod
    before, _ = spread_state(plugin, pod)
    undo = change_cluster(world.handle.cache, case.change, whatif=path == "whatif")
    got, state = spread_state(plugin, pod)
    check_state(got, case.expect["state"])
    verdicts = node_verdicts(table, plugin.filter_nodes(state, pod, table, table.valid_rows().copy()))
    assert verdicts == case.expect["filter"]
    undo()
    if path == "whatif":
        assert spread_state(plugin, pod)[0] == before, "the what-if left the counts changed"


def test_cases_name_upstream_file_test_and_case() -> None:
    names = [c.upstream for c in load(PLUGIN)]
    assert names and len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(rf"{PLUGIN}/\w+_test\.go Test\w+: .+", name, re.DOTALL), name


def test_reasons_are_the_plugins() -> None:
    reasons = {
        Code.UNSCHEDULABLE.title: [podtopologyspread.REASON],
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE.title: [podtopologyspread.MISSING_LABEL_REASON],
    }
    for case in load(PLUGIN):
        for verdict in (case.expect.get("filter") or {}).values():
            if verdict != "fits":
                assert verdict["reasons"] == reasons[verdict["code"]], case.upstream


def test_match_label_keys_leave_an_absent_selector_matching_nothing() -> None:
    """Not in upstream's tables with the gate on, but upstream's rule all the same: matchLabelKeys
    are merged into the constraint's selector only when it has one (podtopologyspread/common.go
    ``mergeLabelSetWithSelector`` keeps ``labels.Nothing()``; the API server's pod strategy leaves a
    nil selector alone). No pod is counted and the incoming pod does not match itself."""
    spec = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    labels = {"app": "web"}
    (absent,) = parse_spread_constraints([{**spec, "matchLabelKeys": ["app"]}], labels)
    assert absent.selector is None and not absent.counts(labels) and not absent.self_match(labels)
    (empty,) = parse_spread_constraints([{**spec, "labelSelector": {}, "matchLabelKeys": ["app"]}], labels)
    assert empty.counts(labels) and not empty.counts({"app": "db"})


def test_differences_are_documented() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "differences.md").read_text()
    section = text.split("## Where shoal differs from kube-scheduler on purpose", 1)[1]
    section = " ".join(section.split("\n### PodTopologySpread\n", 1)[1].split("\n#")[0].split())
    for case in load(PLUGIN):
        if case.differs:
            source, name = case.upstream.split(": ", 1)
            assert source.split(" ")[0].split("/")[1] in section and f'"{name}"' in section, case.upstream
