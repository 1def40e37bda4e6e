"""Nodes as real kubelets write them (tests/data/real/nodes.yaml) go into the node table whole.

Every kubelet reports ``hugepages-1Gi`` / ``hugepages-2Mi``, and device plugins add resources such as
``vpc.amazonaws.com/efa``: the table grows a resource row for each, and the write lands in the grown
array (it used to go into the discarded one and raise IndexError, leaving the node half-recorded).
"""

from __future__ import annotations

from pathlib import Path

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.sim.cluster import load_objects
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import NoBinder

REAL = Path(__file__).resolve().parents[2] / "data" / "real"


def real_nodes() -> list[NodeSpec]:
    return [NodeSpec.from_dict(o) for o in load_objects(REAL / "nodes.yaml")]


def test_every_real_node_is_recorded_whole() -> None:
    table = NodeTable(capacity=8)
    specs = real_nodes()
    for spec in specs:
        table.set_node(spec)
    assert len(table) == len(specs) == 4
    gpu = table.index["ip-10-0-12-34.ec2.internal"]
    col = {r: int(table.allocatable[table.resource_row(r), gpu]) for r in table.resources}
    assert col["cpu"] == 95690
    assert col["memory"] == 1176637900 * 1024
    assert col["hugepages-2Mi"] == 2 * 1024**3
    assert col["hugepages-1Gi"] == 0
    assert col["vpc.amazonaws.com/efa"] == 4
    assert col["nvidia.com/gpu"] == 8
    assert table.taint_sets[int(table.taint_set[gpu])] == specs[0].taints
    info = table.node_info(gpu)
    assert info.allocatable == specs[0].allocatable


def test_new_resources_after_many_nodes_keep_every_column() -> None:
    """Growing the rows after the table has grown its columns keeps what was written."""
    table = NodeTable(capacity=8)
    for i in range(20):
        table.set_node(NodeSpec.from_dict(make_node(f"n{i}", cpu="4")))
    for spec in real_nodes():
        table.set_node(spec)
    assert int(table.allocatable[0, table.index["n0"]]) == 4000
    assert int(table.allocatable[0, table.index["n19"]]) == 4000
    assert int(table.allocatable[table.resource_row("hugepages-2Mi"), table.index["n3"]]) == 0


def test_a_pod_asking_for_a_resource_no_node_has_is_accounted() -> None:
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n", cpu="8")))
    obj = make_pod("hp", cpu="1", node_name="n")
    obj["spec"]["containers"][0]["resources"]["requests"]["hugepages-1Gi"] = "2Gi"
    obj["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
    pod = PodInfo.from_dict(obj)
    cache.upsert_pod(pod)
    table = cache.table
    row = table.index["n"]
    assert int(table.requested[table.resource_row("hugepages-1Gi"), row]) == 2 * 1024**3
    assert int(table.requested[table.resource_row("example.com/fpga"), row]) == 1
    assert int(table.requested[0, row]) == 1000
    cache.remove_pod(pod.uid)
    assert not table.requested[:, row].any()


def test_an_update_after_a_new_resource_is_not_dropped_as_unchanged() -> None:
    """The scheduler compares a node with what it recorded: the first write must be complete."""
    sched = Scheduler({}, NoBinder())
    obj = load_objects(REAL / "nodes.yaml")[0]
    sched.on_node(NodeSpec.from_dict(obj))
    name = obj["metadata"]["name"]
    row = sched.cache.table.index[name]
    assert int(sched.cache.table.allocatable[1, row]) == 1176637900 * 1024
    obj["spec"]["unschedulable"] = True
    sched.on_node(NodeSpec.from_dict(obj))
    assert bool(sched.cache.table.unschedulable[row])
