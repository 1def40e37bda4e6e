"""kube-scheduler 1.37's TaintToleration tables (tests/data/upstream/tainttoleration.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import tainttoleration
from tests.unit.upstream import Case, build, params, run_filter, run_score


@pytest.mark.parametrize("case", params("tainttoleration"))
def test_upstream(case: Case) -> None:
    world = build(case)
    plugin = tainttoleration.new(tainttoleration.ENTRY.parse_args(case.args or {}), world.handle)
    run_filter(case, world, plugin, CycleState())
    run_score(case, world, plugin, CycleState())
