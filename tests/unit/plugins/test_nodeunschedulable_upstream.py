"""kube-scheduler 1.37's NodeUnschedulable tables (tests/data/upstream/nodeunschedulable.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import nodeunschedulable
from tests.unit.upstream import Case, build, params, run_filter


@pytest.mark.parametrize("case", params("nodeunschedulable"))
def test_upstream(case: Case) -> None:
    world = build(case)
    run_filter(
        case,
        world,
        nodeunschedulable.new(nodeunschedulable.ENTRY.parse_args(case.args or {}), world.handle),
        CycleState(),
    )
