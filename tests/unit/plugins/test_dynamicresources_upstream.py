"""kube-scheduler 1.37's DynamicResources Score tables (tests/data/upstream/dynamicresources.yaml):
computeScore over claims and per-node allocations, NormalizeScore, and TestPlugin's scoring cases
run through PreFilter, Filter, Score and NormalizeScore over the node table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.cyclestate import CycleState
from shoal.core.dra import DRA_DECODERS, AllocatedDevice, DeviceId, ResourceClaimInfo
from shoal.core.drascore import compute_score
from shoal.core.objects import PodInfo
from shoal.plugins.dynamicresources import DynamicResources
from tests.unit.helpers import cache_with, handle_for
from tests.unit.upstream import DATA, FITS, node_verdicts

PLUGIN = "dynamicresources"


def cases() -> list[dict[str, Any]]:
    doc = yaml.safe_load((DATA / f"{PLUGIN}.yaml").read_text())
    out: list[dict[str, Any]] = doc["cases"]
    return out


def params(test: str) -> list[Any]:
    return [
        pytest.param(c, id=c["upstream"].split(": ", 1)[1]) for c in cases() if f" {test}: " in c["upstream"]
    ]


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


def plugin_for(objects: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> DynamicResources:
    cache = cache_with(nodes)
    for obj in objects:
        cache.dra.apply(DRA_DECODERS[obj["kind"]](obj))
    return DynamicResources(handle_for(cache))


@pytest.mark.parametrize("case", params("TestNormalizeScore"))
def test_normalize_score(case: dict[str, Any]) -> None:
    plugin = plugin_for([], [])
    raw = np.array(list(case["raw_scores"].values()), dtype=np.int64)
    got = plugin.normalize_scores(CycleState(), PodInfo.from_dict({}), raw)
    assert dict(zip(case["raw_scores"], (int(s) for s in got), strict=True)) == case["expect"]["scores"]


@pytest.mark.parametrize("case", params("TestPlugin"))
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


def test_cases_name_upstream_file_test_and_case() -> None:
    names = [c["upstream"] for c in cases()]
    assert names and len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(rf"{PLUGIN}/\w+_test\.go Test\w+: .+", name, re.DOTALL), name
    assert Path(DATA / f"{PLUGIN}.yaml").read_text().startswith("# kube-scheduler's DynamicResources")
