import pytest

from shoal.plugins import nodename
from shoal.testing.objects import make_node
from tests.unit.helpers import cache_with, feasible, pod, state


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        pytest.param("", {"a", "b"}, id="no-node-name-all-fit"),
        pytest.param("b", {"b"}, id="only-named-node"),
        pytest.param("missing", set(), id="unknown-node-none-fit"),
    ],
)
def test_filter(wanted: str, expected: set[str]) -> None:
    cache = cache_with([make_node("a"), make_node("b")])
    p = pod()
    p.node_name = wanted
    table = cache.table
    rej = nodename.NodeName().filter_nodes(state(), p, table, table.valid_rows())
    assert feasible(table, rej) == expected
    if expected != {"a", "b"}:
        assert all(r.reason == nodename.REASON for r in rej)


def test_fits_helper() -> None:
    assert nodename.fits("", "x")
    assert nodename.fits("x", "x")
    assert not nodename.fits("y", "x")
