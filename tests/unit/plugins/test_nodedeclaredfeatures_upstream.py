"""kube-scheduler 1.37's NodeDeclaredFeatures tables (tests/data/upstream/nodedeclaredfeatures.yaml)."""

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import nodedeclaredfeatures
from tests.unit.upstream import Case, build, params, run_filter


@pytest.mark.parametrize("case", params("nodedeclaredfeatures"))
def test_upstream(case: Case) -> None:
    world = build(case)
    plugin = nodedeclaredfeatures.new(nodedeclaredfeatures.ENTRY.parse_args(case.args or {}), world.handle)
    state = CycleState()
    if not case.expect.get("run_pre_filter", True):
        # Filter alone: upstream's Error status is, in shoal, a raise the runtime makes one
        assert {v["code"] for v in case.expect["filter"].values()} == {"Error"}
        table = world.table
        with pytest.raises(LookupError):
            plugin.filter_nodes(state, world.pod, table, table.valid_rows().copy())
        return
    run_filter(case, world, plugin, state)
    if "pre_filter_state" in case.expect:
        assert state.read(nodedeclaredfeatures.STATE_KEY) == frozenset(case.expect["pre_filter_state"])
