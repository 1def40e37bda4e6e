"""The node table under churn: what a deleted node leaves behind is freed, and decisions read
the same codes after a compaction as before."""

from __future__ import annotations

from shoal.core.state.nodetable import COMPACT_AT, NodeTable
from shoal.core.state.objects import NodeSpec
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def spec(name: str, zone: str = "z1", taint: str | None = None) -> NodeSpec:
    taints = [{"key": "maintenance", "value": taint, "effect": "NoSchedule"}] if taint else []
    return NodeSpec.from_dict(make_node(name, zone=zone, taints=taints))


def consistent(table: NodeTable) -> None:
    """Every live row's codes and taint set say what its node carries."""
    for key in (HOSTNAME, ZONE):
        col = table.label_column(key)
        values = table.label_values(key)
        for row in table.index.values():
            node = table.specs[row]
            assert node is not None
            assert col[row] == values[node.labels[key]] == table.label_code(key, node.labels[key])
        assert sorted(values.values()) == list(range(len(values)))  # dense codes
    for row in table.index.values():
        node = table.specs[row]
        assert node is not None
        assert table.taint_sets[int(table.taint_set[row])] == node.taints


def test_an_autoscalers_churn_leaves_no_codes_behind() -> None:
    """10,000 nodes with new names come and go, 40 alive at any time: the hostnames interned stay
    within a small multiple of the live nodes (they grew to 10,000 before), and so do the
    taint sets of unique maintenance values."""
    table = NodeTable()
    table.label_column(HOSTNAME), table.label_column(ZONE)  # columns built, as plugins ask for them
    versions = []
    for i in range(10_000):
        table.set_node(spec(f"auto-{i:05d}", zone=f"z{i % 3}", taint=f"ticket-{i}" if i % 2 else None))
        if i >= 40:
            table.remove_node(f"auto-{i - 40:05d}")
        versions.append(table.version)
        if i % 997 == 0:
            consistent(table)
    consistent(table)
    assert len(table) == 40
    assert len(table.label_values(HOSTNAME)) <= 2 * COMPACT_AT + 40
    assert len(table.label_values(ZONE)) == 3
    assert len(table.taint_sets) <= 2 * COMPACT_AT + 40
    assert table.label_code(HOSTNAME, "auto-00000") == -2  # a deleted node's name matches nothing
    assert versions == sorted(versions)


def test_compaction_keeps_the_order_of_the_live_values() -> None:
    """Orderings by code (a domain tie-break) do not change when dead codes are freed."""
    table = NodeTable()
    table.label_column(HOSTNAME)
    for i in range(300):
        table.set_node(spec(f"n{i:03d}"))
    before = [table.label_code(HOSTNAME, f"n{i:03d}") for i in range(250, 300)]
    for i in range(250):
        table.remove_node(f"n{i:03d}")
    after = [table.label_code(HOSTNAME, f"n{i:03d}") for i in range(250, 300)]
    assert before == list(range(250, 300))
    assert after[0] < before[0]  # renumbered: the dead codes outnumbered the live ones, and freed
    assert after == sorted(after) and len(set(after)) == 50
    assert len(table.label_values(HOSTNAME)) <= 50 + COMPACT_AT


def test_a_scheduler_decides_the_same_after_churn() -> None:
    """Through the scheduler: after hundreds of nodes came and went, a pod pinned by hostname
    (node affinity reads the codes) lands on its node, one pinned to a gone node nowhere."""
    sim = Simulation(InMemoryCluster([make_node("keep", zone="z1")]))
    for i in range(500):
        sim.scheduler.on_node(NodeSpec.from_dict(make_node(f"tmp-{i}", zone="z2")))
        sim.scheduler.on_node_deleted(f"tmp-{i}")
    table = sim.scheduler.cache.table
    assert len(table.label_values(HOSTNAME)) <= 2 * COMPACT_AT + 1
    pinned = make_pod("pinned", node_selector={HOSTNAME: "keep"})
    lost = make_pod("lost", node_selector={HOSTNAME: "tmp-3"})
    sim.submit(pinned)
    sim.submit(lost)
    out = sim.run_sync()
    by_name = {o.pod: o for o in out.values()}
    assert by_name["default/pinned"].node == "keep"
    assert by_name["default/lost"].node is None
    assert "didn't match Pod's node affinity/selector" in by_name["default/lost"].message
