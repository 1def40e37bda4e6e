"""kube-scheduler's NodeResourcesFit / BalancedAllocation unit-test tables, run through shoal.

The cases live in ``tests/data/upstream/noderesources.yaml`` (facts and numbers from
kubernetes/kubernetes 1.37). Each runs through the plugin's vectorised methods on a node table
built by the cache, as in production. A case marked ``differs`` is a deliberate difference, listed
by its tag in docs/differences.md; it is reported as skipped with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code
from shoal.plugins import noderesources
from tests.unit.helpers import all_rows, cache_with, handle_for, scores_by_name, state

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "upstream" / "noderesources.yaml"
DIFFERENCES = ROOT / "docs" / "differences.md"
FILTER_NODE = "node"


def _load() -> list[dict[str, Any]]:
    tables: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["tables"]
    cases = []
    for table in tables:
        for case in table["cases"]:
            prefix = f"{table['file']} {table['function']}: "
            assert case["upstream"].startswith(prefix), case["upstream"]
            cases.append({"table": table, **case})
    return cases


CASES = _load()


def _container(i: int, requests: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    req = {str(k): str(v) for k, v in requests.items() if k != "restartPolicy"}
    out: dict[str, Any] = {"name": f"{prefix}{i}", "image": "registry.k8s.io/pause:3.10"}
    if req:
        out["resources"] = {"requests": req}
    if "restartPolicy" in requests:
        out["restartPolicy"] = requests["restartPolicy"]
    return out


def make_pod(name: str, spec: Mapping[str, Any], node: str | None = None) -> dict[str, Any]:
    """A Pod manifest from the tables' compact form (containers / initContainers / overhead / resources)."""
    body: dict[str, Any] = {
        "containers": [_container(i, c or {}, "c") for i, c in enumerate(spec.get("containers") or ())],
    }
    if spec.get("initContainers"):
        init = spec["initContainers"]
        body["initContainers"] = [_container(i, c or {}, "init") for i, c in enumerate(init)]
    if spec.get("overhead"):
        body["overhead"] = {str(k): str(v) for k, v in spec["overhead"].items()}
    if spec.get("resources"):
        body["resources"] = {"requests": {str(k): str(v) for k, v in spec["resources"].items()}}
    if node:
        body["nodeName"] = node
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def make_node(name: str, allocatable: Mapping[str, Any]) -> dict[str, Any]:
    resources = {str(k): str(v) for k, v in allocatable.items()}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def _setup(case: Mapping[str, Any]) -> tuple[Any, PodInfo, noderesources.NodeResourcesFit]:
    table = case["table"]
    if table["kind"] == "filter":
        nodes = [make_node(FILTER_NODE, case.get("node", table.get("node")) or {})]
        default_node = FILTER_NODE
    else:
        nodes = [make_node(n["name"], n.get("allocatable") or {}) for n in case["nodes"]]
        default_node = None
    existing = [
        make_pod(f"existing-{i}", e, e.get("node") or default_node)
        for i, e in enumerate(case.get("existing") or ())
    ]
    cache = cache_with(nodes, existing)
    pod = PodInfo.from_dict(make_pod("incoming", case.get("pod") or {}))
    pod.uid = "uid-incoming"
    assert not pod.problems, pod.problems
    args = noderesources.Args.model_validate(case.get("args", table.get("args") or {}))
    return cache, pod, noderesources.new(args, handle_for(cache))


def _filter(case: Mapping[str, Any]) -> None:
    cache, pod, plugin = _setup(case)
    table = cache.table
    st = state()
    _, status = plugin.pre_filter(st, pod)
    assert status.ok
    rejections = plugin.filter_nodes(st, pod, table, table.valid_rows())
    row = table.index[FILTER_NODE]
    hits = [rej for rej in rejections if rej.mask[row]]
    want = case["want"]
    if want.get("fits"):
        assert [r.reason for r in hits] == []
        return
    if want.get("fits") is False:  # upstream says only that the pod does not fit (TestIsFit)
        assert hits
        return
    # the node's status, as upstream builds it: every reason, unresolvable if any reason is
    code = (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if any(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in hits)
        else Code.UNSCHEDULABLE
    )
    assert (code.title, [r.reason for r in hits]) == (want["code"], want["reasons"])


def _score(case: Mapping[str, Any]) -> None:
    want = case["want"]
    if want.get("argsError"):
        with pytest.raises(ValidationError):
            noderesources.Args.model_validate(case["args"])
        return
    cache, pod, plugin = _setup(case)
    table = cache.table
    rows = all_rows(table)
    st = state()
    if case.get("preScore", True):
        status = plugin.pre_score(st, pod, rows, table)
        if want.get("preScore") == "Skip":
            assert status.is_skip
            return
        assert status.ok
    got = scores_by_name(table, plugin.score_nodes(st, pod, table, rows))
    assert got == want["scores"]


@pytest.mark.parametrize("case", CASES, ids=[c["upstream"].split(" ", 1)[1] for c in CASES])
def test_upstream_case(case: dict[str, Any]) -> None:
    if case.get("differs"):
        pytest.skip(f"differs on purpose: {case['differs']}")
    if case["table"]["kind"] == "filter":
        _filter(case)
    else:
        _score(case)


def test_every_difference_is_documented() -> None:
    """A ``differs`` tag is listed under "Where shoal differs from kube-scheduler on purpose"."""
    text = DIFFERENCES.read_text()
    heading = "## Where shoal differs from kube-scheduler on purpose"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    tags = {c["differs"].split(":", 1)[0] for c in CASES if c.get("differs")}
    assert tags
    missing = sorted(t for t in tags if f"**{t}**" not in section)
    assert not missing, f"undocumented differences: {missing}"


def test_tables_are_all_there() -> None:
    """Guard against a table silently losing cases (counts as translated from upstream 1.37)."""
    counts: dict[str, int] = {}
    for c in CASES:
        key = c["table"]["function"]
        counts[key] = counts.get(key, 0) + 1
    assert counts == {
        "TestEnoughRequests": 49,
        "TestNotEnoughRequests": 4,
        "TestStorageRequests": 4,
        "TestRestartableInitContainers": 4,
        "TestIsFit": 6,
        "TestFitScore": 11,
        "TestLeastAllocatedScoringStrategy": 16,
        "TestMostAllocatedScoringStrategy": 14,
        "TestRequestedToCapacityRatioScoringStrategy": 3,
        "TestResourceBinPackingSingleExtended": 4,
        "TestResourceBinPackingMultipleExtended": 4,
        "TestNodeResourcesBalancedAllocation": 11,
    }
