import pytest

from shoal.core.state.status import Code
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
        # upstream's own case: no operator means Equal, and the taint's value is empty
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},),
            {"ok", "cordoned"},
            id="equal-empty-value",
        ),
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},),
            {"ok", "cordoned"},
            id="any-effect",
        ),
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"},),
            {"ok"},
            id="other-effect",
        ),
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "value": "true", "effect": "NoSchedule"},),
            {"ok"},
            id="wrong-value",
        ),
        # read as Equal, these would match the taint's empty value; upstream they tolerate nothing
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "operator": "Gt"},), {"ok"}, id="gt-gate-off"
        ),
        pytest.param(
            ({"key": "node.kubernetes.io/unschedulable", "operator": "Equals"},),
            {"ok"},
            id="unknown-operator",
        ),
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
