"""NodeResourcesBalancedAllocation: kube-scheduler 1.37's balanced_allocation_test.go table
(tests/data/upstream/noderesources.yaml, TestNodeResourcesBalancedAllocation) run through the
plugin of its own, with the args upstream gives it; its args' validation; and a profile that
scores balance and packing at once, as kube-scheduler's default profile does."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shoal.core.framework.profile import ProfileError, validate_profile
from shoal.plugins import balancedallocation
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry
from tests.unit.helpers import all_rows, handle_for, scores_by_name, state
from tests.unit.plugins import test_noderesources_upstream as upstream

BALANCED = [
    c
    for c in upstream.CASES
    if c["table"]["function"] == "TestNodeResourcesBalancedAllocation" and not c.get("differs")
]


@pytest.mark.parametrize("case", BALANCED, ids=[c["upstream"].split(": ", 1)[1] for c in BALANCED])
def test_upstream_balanced_allocation_table(case: dict[str, Any]) -> None:
    cache, pod, _ = upstream._setup(case)
    strategy = (case.get("args") or case["table"]["args"])["scoringStrategy"]
    args = balancedallocation.Args.model_validate({"resources": strategy["resources"]})
    plugin = balancedallocation.new(args, handle_for(cache))
    table, rows, st = cache.table, all_rows(cache.table), state()
    want = case["want"]
    if case.get("preScore", True):
        status = plugin.pre_score(st, pod, rows, table)
        if want.get("preScore") == "Skip":
            assert status.is_skip
            return
        assert status.ok
    assert scores_by_name(table, plugin.score_nodes(st, pod, table, rows)) == want["scores"]


def test_there_are_upstream_cases() -> None:
    assert len(BALANCED) >= 6


def test_args_as_upstream_validates_them() -> None:
    assert [(r.name, r.weight) for r in balancedallocation.Args().resources] == [("cpu", 1), ("memory", 1)]
    zero = balancedallocation.Args.model_validate({"resources": [{"name": "cpu", "weight": 0}]})
    assert [(r.name, r.weight) for r in zero.resources] == [("cpu", 1)]  # 0 reads as 1
    for bad in (
        {"resources": [{"name": "cpu", "weight": 2}]},
        {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
    ):
        with pytest.raises(ValidationError):
            balancedallocation.Args.model_validate(bad)


def test_a_profile_scores_balance_and_packing_together() -> None:
    spec = {
        "schedulerName": "kube-like",
        "plugins": {
            "score": [
                {"name": "NodeResourcesFit", "weight": 1},
                {"name": "NodeResourcesBalancedAllocation", "weight": 1},
            ]
        },
    }
    validated = validate_profile(spec, load_registry(), DEFAULT_PLUGINS)
    assert [r.name for r in validated.points["score"]] == [
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
    ]
    with pytest.raises(ProfileError, match="NodeResourcesBalancedAllocation"):
        validate_profile(
            {"schedulerName": "s", "plugins": {"filter": [{"name": "NodeResourcesBalancedAllocation"}]}},
            load_registry(),
            DEFAULT_PLUGINS,
        )


def test_a_pod_requesting_none_of_the_resources_scores_nothing_even_without_pre_score() -> None:
    """Upstream skips such a pod at PreScore; a profile that leaves the plugin out of preScore
    must not score it either (zeros add nothing, as a skip)."""
    from shoal.testing.objects import make_node, make_pod
    from tests.unit.helpers import cache_with, pod

    cache = cache_with(
        [make_node("a", cpu="8"), make_node("b", cpu="8")], [make_pod("busy", cpu="6", node_name="a")]
    )
    plugin = balancedallocation.new(None, handle_for(cache))
    rows = all_rows(cache.table)
    best_effort = pod("be", cpu=None, memory=None)
    assert plugin.pre_score(state(), best_effort, rows, cache.table).is_skip
    assert plugin.score_nodes(state(), best_effort, cache.table, rows).tolist() == [0, 0]
    assert plugin.score_nodes(state(), pod("p", cpu="1"), cache.table, rows).tolist() != [0, 0]
