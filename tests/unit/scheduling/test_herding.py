"""GPU-memory herding: a burst of pods never piles onto one node past its free memory."""

from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod


async def test_ten_pods_of_10gb_onto_40_30_20() -> None:
    nodes = [
        make_node(n, gpus=8, gpu_memory_free_gb=gb, gfd_labels=False)
        for n, gb in (("a", 40), ("b", 30), ("c", 20))
    ]
    pods = [make_pod(f"p{i}", gpus=0, gpu_memory_gb=10) for i in range(10)]
    s = Simulation(InMemoryCluster([*nodes, *pods]))
    outcomes = await s.run()
    per_node: dict[str, int] = {}
    for node in s.placements().values():
        if node:
            per_node[node] = per_node.get(node, 0) + 10
    assert per_node == {"a": 40, "b": 30, "c": 20}
    pending = [o for o in outcomes.values() if o.node is None]
    assert len(pending) == 1
    assert pending[0].message == (
        "0/3 nodes are available: 3 Insufficient GPU memory."
        " preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
