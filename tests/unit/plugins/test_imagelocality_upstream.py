"""kube-scheduler 1.37's ImageLocality tables (tests/data/upstream/imagelocality.yaml).

Upstream's ImageLocality is a Score plugin without NormalizeScore: each case's scores are Score's
own values. shoal's plugin is run as the runtime runs it: PreScore (a Skip would mean every node
scores 0), then ``score_nodes`` over every node of the cache's table.
"""

import re

import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.plugins import imagelocality
from tests.unit.helpers import all_rows, scores_by_name
from tests.unit.upstream import Case, build, load, params

PLUGIN = "imagelocality"


@pytest.mark.parametrize("case", params(PLUGIN))
def test_upstream(case: Case) -> None:
    world = build(case)
    table, pod = world.table, world.pod
    plugin = imagelocality.new(None, world.handle)
    if "images" in case.expect:
        assert list(pod.images) == case.expect["images"]
    rows = all_rows(table)
    state = CycleState()
    status = plugin.pre_score(state, pod, rows, table)
    if status.is_skip:
        got = dict.fromkeys(table.index, 0)
    else:
        assert status.ok, status
        got = scores_by_name(table, plugin.score_nodes(state, pod, table, rows))
    assert got == case.expect["scores"]


def test_cases_name_upstream_file_test_and_case() -> None:
    names = [c.upstream for c in load(PLUGIN)]
    assert names and len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(rf"{PLUGIN}/\w+_test\.go Test\w+: .+", name, re.DOTALL), name
