"""kube-scheduler 1.37's NodePorts tables (tests/data/upstream/nodeports.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import nodeports
from tests.unit.upstream import Case, build, params, run_filter


@pytest.mark.parametrize("case", params("nodeports"))
def test_upstream(case: Case) -> None:
    world = build(case)
    run_filter(
        case, world, nodeports.new(nodeports.ENTRY.parse_args(case.args or {}), world.handle), CycleState()
    )
