"""kube-scheduler 1.37's SchedulingGates table (tests/data/upstream/schedulinggates.yaml)."""

import pytest

from shoal.core.state.objects import PodInfo
from shoal.plugins import schedulinggates
from tests.unit.helpers import cache_with, handle_for
from tests.unit.upstream import Case, check_status, params


@pytest.mark.parametrize("case", params("schedulinggates"))
def test_upstream(case: Case) -> None:
    plugin = schedulinggates.new(None, handle_for(cache_with([])))
    status = plugin.pre_enqueue(PodInfo.from_dict(case.pod))
    check_status("PreEnqueue", status, case.expect.get("pre_enqueue"))
