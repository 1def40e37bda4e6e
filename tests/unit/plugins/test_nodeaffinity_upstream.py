"""kube-scheduler 1.37's NodeAffinity tables (tests/data/upstream/nodeaffinity.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import nodeaffinity
from tests.unit.upstream import Case, build, params, run_filter, run_score


@pytest.mark.parametrize("case", params("nodeaffinity"))
def test_upstream(case: Case) -> None:
    world = build(case)
    plugin = nodeaffinity.new(nodeaffinity.ENTRY.parse_args(case.args or {}), world.handle)
    run_filter(case, world, plugin, CycleState())
    run_score(case, world, plugin, CycleState())
