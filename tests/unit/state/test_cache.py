import pytest

from shoal.core.state.cache import CacheError, ClusterCache
from shoal.core.state.nodetable import PODS
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import pod


def cpu_requested(cache: ClusterCache, node: str) -> int:
    return int(cache.table.requested[0, cache.table.index[node]])


def test_pods_of_every_scheduler_are_counted() -> None:
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    other = PodInfo.from_dict(make_pod("o", cpu="2", scheduler_name="default-scheduler", node_name="n"))
    other.uid = "o"
    cache.upsert_pod(other)
    assert cpu_requested(cache, "n") == 2000
    assert int(cache.table.requested[PODS, 0]) == 1


def test_pod_before_node_is_counted_when_node_arrives() -> None:
    cache = ClusterCache()
    early = pod("early", cpu="1", node_name="late-node")
    cache.upsert_pod(early)
    cache.set_node(NodeSpec.from_dict(make_node("late-node")))
    assert cpu_requested(cache, "late-node") == 1000


def test_assume_confirm_forget() -> None:
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    p = pod("a", cpu="1")
    cache.assume(p, "n")
    assert cpu_requested(cache, "n") == 1000 and cache.is_assumed(p.uid)
    with pytest.raises(CacheError):
        cache.assume(p, "n")
    # the watch shows the pod bound: confirmed, counted once
    bound = pod("a", cpu="1", node_name="n")
    cache.upsert_pod(bound)
    assert not cache.is_assumed(p.uid) and cpu_requested(cache, "n") == 1000
    cache.forget(p.uid)  # no-op once confirmed
    assert cpu_requested(cache, "n") == 1000


def test_forget_releases_and_is_idempotent() -> None:
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    p = pod("a", cpu="1", gpu_memory_gb=10)
    cache.assume(p, "n")
    cache.forget(p.uid)
    cache.forget(p.uid)
    assert cpu_requested(cache, "n") == 0 and cache.table.gpu_memory_used[0] == 0


def test_bound_elsewhere_by_someone_else_moves_accounting() -> None:
    cache = ClusterCache()
    for n in ("a", "b"):
        cache.set_node(NodeSpec.from_dict(make_node(n)))
    cache.assume(pod("x", cpu="1"), "a")
    cache.upsert_pod(pod("x", cpu="1", node_name="b"))
    assert cpu_requested(cache, "a") == 0 and cpu_requested(cache, "b") == 1000


def test_expiry_of_unconfirmed_assumptions() -> None:
    now = [0.0]
    cache = ClusterCache(assumed_ttl=30, clock=lambda: now[0])
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    cache.assume(pod("a", cpu="1"), "n")
    now[0] = 100
    assert cache.cleanup_expired() == []  # binding not finished: never expires
    cache.finish_binding("uid-a")
    now[0] = 129
    assert cache.cleanup_expired() == []
    now[0] = 130
    assert cache.cleanup_expired() == ["uid-a"]
    assert cpu_requested(cache, "n") == 0


def test_terminated_pods_release_resources() -> None:
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    cache.upsert_pod(pod("a", cpu="1", node_name="n"))
    done = pod("a", cpu="1", node_name="n")
    done.phase = "Succeeded"
    cache.upsert_pod(done)
    assert cpu_requested(cache, "n") == 0 and "uid-a" not in cache.pods


def test_node_removed_and_row_reused() -> None:
    cache = ClusterCache()
    for i in range(3):
        cache.set_node(NodeSpec.from_dict(make_node(f"n{i}")))
    cache.remove_node("n1")
    assert "n1" not in cache.table and not cache.table.valid[1]
    cache.set_node(NodeSpec.from_dict(make_node("n3")))
    assert cache.table.index["n3"] == 1 and cache.table.valid[1]


def test_table_grows_past_capacity() -> None:
    cache = ClusterCache()
    for i in range(200):
        cache.set_node(NodeSpec.from_dict(make_node(f"n{i}", gpus=8, labels={"idx": str(i)})))
    assert len(cache.table) == 200
    col = cache.table.label_column("idx")
    assert col.shape == (200,)
    assert int(cache.table.allocatable[cache.table.resource_row("nvidia.com/gpu"), 199]) == 8


def test_nonzero_requested_follows_the_pods_nonzero_values() -> None:
    """nonzero_requested (what Least/MostAllocated score) is the sum of the pods' own non-zero
    figures: defaults only where a container leaves cpu/memory out, an explicit "0" stays 0."""
    cache = ClusterCache()
    cache.set_node(NodeSpec.from_dict(make_node("n")))
    explicit_zero = pod("zero", cpu="1", memory="0", node_name="n")
    no_memory = pod("nomem", cpu="1", memory=None, node_name="n")
    assert (explicit_zero.nonzero_cpu, explicit_zero.nonzero_memory) == (1000, 0)
    assert (no_memory.nonzero_cpu, no_memory.nonzero_memory) == (1000, 200 * 1024 * 1024)
    cache.upsert_pod(explicit_zero)
    cache.upsert_pod(no_memory)
    row = cache.table.index["n"]
    assert cache.table.nonzero_requested[:, row].tolist() == [2000, 200 * 1024 * 1024]
    cache.remove_pod(no_memory.uid)
    assert cache.table.nonzero_requested[:, row].tolist() == [1000, 0]
    cache.remove_pod(explicit_zero.uid)
    assert cache.table.nonzero_requested[:, row].tolist() == [0, 0]
