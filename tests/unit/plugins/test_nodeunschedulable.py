import pytest

from shoal.core.status import Code
from shoal.plugins import nodeunschedulable
from shoal.testing.objects import make_node
from tests.unit.helpers import cache_with, feasible, pod, state


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param((), {"ok"}, id="cordoned-node-rejected"),
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},),
            {"ok", "cordoned"},
            id="toleration-admits-cordoned",
        ),
        pytest.param(({"operator": "Exists"},), {"ok", "cordoned"}, id="tolerate-everything"),
    ],
)
def test_filter(tolerations: tuple[dict[str, str], ...], expected: set[str]) -> None:
    cache = cache_with([make_node("ok"), make_node("cordoned", unschedulable=True)])
    table = cache.table
    rej = nodeunschedulable.NodeUnschedulable().filter_nodes(
        state(), pod(tolerations=tolerations), table, table.valid_rows()
    )
    assert feasible(table, rej) == expected
    for r in rej:
        assert r.reason == "node(s) were unschedulable"
        assert r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
