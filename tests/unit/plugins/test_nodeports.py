import pytest

from shoal.core.status import Code
from shoal.plugins import nodeports
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import cache_with, feasible, pod, state


@pytest.mark.parametrize(
    ("wanted", "used", "conflict"),
    [
        pytest.param([("TCP", "0.0.0.0", 80)], [("TCP", "0.0.0.0", 80)], True, id="same-port"),
        pytest.param([("TCP", "0.0.0.0", 80)], [("UDP", "0.0.0.0", 80)], False, id="other-protocol"),
        pytest.param([("TCP", "10.0.0.1", 80)], [("TCP", "10.0.0.2", 80)], False, id="different-host-ips"),
        pytest.param([("TCP", "10.0.0.1", 80)], [("TCP", "0.0.0.0", 80)], True, id="wildcard-ip-conflicts"),
        pytest.param([("TCP", "0.0.0.0", 81)], [("TCP", "0.0.0.0", 80)], False, id="other-port"),
    ],
)
def test_conflicts(wanted: list[nodeports.Port], used: list[nodeports.Port], conflict: bool) -> None:
    assert nodeports.conflicts(wanted, used) is conflict


def test_filter_rejects_node_with_port_in_use() -> None:
    busy = make_pod("web", host_ports=[8080], node_name="a")
    cache = cache_with([make_node("a"), make_node("b")], [busy])
    table = cache.table
    plugin = nodeports.NodePorts()
    rej = plugin.filter_nodes(state(), pod("new", host_ports=[8080]), table, table.valid_rows())
    assert feasible(table, rej) == {"b"}
    assert rej[0].reason == nodeports.REASON
    # a pod without host ports is skipped at PreFilter and never rejected
    _, status = plugin.pre_filter(state(), pod("plain"))
    assert status.code is Code.SKIP
    assert plugin.filter_nodes(state(), pod("plain"), table, table.valid_rows()) == ()


def test_port_freed_when_pod_leaves() -> None:
    busy = make_pod("web", host_ports=[8080], node_name="a")
    cache = cache_with([make_node("a")], [busy])
    uid = next(iter(cache.pods))
    cache.remove_pod(uid)
    table = cache.table
    rej = nodeports.NodePorts().filter_nodes(
        state(), pod("new", host_ports=[8080]), table, table.valid_rows()
    )
    assert feasible(table, rej) == {"a"}
