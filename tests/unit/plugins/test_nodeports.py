import pytest

from shoal.core.state.objects import PodInfo
from shoal.core.state.podrequests import pod_host_ports
from shoal.core.state.status import Code
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


SIDECAR = {
    "name": "proxy",
    "image": "envoy",
    "restartPolicy": "Always",
    "ports": [{"containerPort": 9901, "hostPort": 9901}],
}
PLAIN_INIT = {"name": "setup", "image": "busybox", "ports": [{"containerPort": 9902, "hostPort": 9902}]}


def test_sidecar_host_ports_are_asked_for_and_held() -> None:
    # kube-scheduler's util.GetHostPorts: sidecars (restartable init containers) hold their host
    # ports for the pod's life; plain init containers hold none
    busy = make_pod("mesh", node_name="a")
    busy["spec"]["initContainers"] = [SIDECAR, PLAIN_INIT]
    cache = cache_with([make_node("a"), make_node("b")], [busy])
    table = cache.table
    assert table.ports[table.index["a"]] == {("TCP", "0.0.0.0", 9901): 1}
    plugin = nodeports.NodePorts()
    # the existing pod's sidecar port is taken on "a"
    rej = plugin.filter_nodes(state(), pod("new", host_ports=[9901]), table, table.valid_rows())
    assert feasible(table, rej) == {"b"}
    # its plain init container's port is free again once it has run
    rej = plugin.filter_nodes(state(), pod("other", host_ports=[9902]), table, table.valid_rows())
    assert feasible(table, rej) == {"a", "b"}
    # an incoming pod's sidecar asks for its port too
    incoming = make_pod("incoming")
    incoming["spec"]["initContainers"] = [SIDECAR]
    info = PodInfo.from_dict(incoming)
    assert info.host_ports == (("TCP", "0.0.0.0", 9901),)
    rej = plugin.filter_nodes(state(), info, table, table.valid_rows())
    assert feasible(table, rej) == {"b"}
    assert rej[0].code is Code.UNSCHEDULABLE


def test_pod_host_ports_order_and_defaults() -> None:
    spec = {
        "initContainers": [SIDECAR, PLAIN_INIT],
        "containers": [
            {
                "name": "app",
                "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1", "protocol": "UDP"}],
            },
            {"name": "no-host-port", "ports": [{"containerPort": 81}, {"containerPort": 82, "hostPort": 0}]},
        ],
    }
    assert pod_host_ports(spec) == (("TCP", "0.0.0.0", 9901), ("UDP", "10.0.0.1", 8080))
