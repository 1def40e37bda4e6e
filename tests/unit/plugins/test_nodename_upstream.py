"""kube-scheduler 1.37's NodeName tables (tests/data/upstream/nodename.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import nodename
from tests.unit.upstream import Case, build, params, run_filter


@pytest.mark.parametrize("case", params("nodename"))
def test_upstream(case: Case) -> None:
    world = build(case)
    run_filter(
        case, world, nodename.new(nodename.ENTRY.parse_args(case.args or {}), world.handle), CycleState()
    )
