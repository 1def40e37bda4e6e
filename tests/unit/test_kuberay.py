"""KubeRay's objects as its controller writes them (shoal.testing.thirdparty), and how shoal reads
them: the PodGroup's size and resources for each integration, the pods' links, and a Ray cluster
placed whole by a profile that lists KubeRay's schedulerName as an alias."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from shoal.core.state.objects import PodInfo
from shoal.core.state.workloads import decode_pod_group
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim.cluster import InMemoryCluster, Simulation, load_objects
from shoal.testing.objects import make_node
from shoal.testing.thirdparty import SCHEDULER_PLUGINS, VOLCANO, ray_pod_group, ray_pods

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def cluster(uid: str = "0f4c1a52-7d3e-4b8a-9c61-2e5d8f0a9b13") -> dict[str, Any]:
    obj = copy.deepcopy(load_objects(REAL / "raycluster.yaml")[0])
    obj["metadata"]["uid"] = uid
    return obj


def test_the_scheduler_plugins_podgroup_is_sized_as_kuberay_sizes_it() -> None:
    ray = cluster()
    group = ray_pod_group(ray, SCHEDULER_PLUGINS)
    assert group["metadata"]["name"] == "llm-tune"
    assert group["metadata"]["ownerReferences"] == [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "llm-tune", "uid": ray["metadata"]["uid"]}
    ]
    # head + 2 workers; resources: the head's requests + 2 x a worker's
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "17000m", "memory": str(136 * 2**30), "nvidia.com/gpu": "16"},
    }
    info = decode_pod_group(group)
    assert (info.key, info.min_member, info.min_resources["nvidia.com/gpu"]) == ("default/llm-tune", 3, 16)
    # replicas above maxReplicas are capped for minMember, as CalculateDesiredReplicas does
    ray["spec"]["workerGroupSpecs"][0].update(replicas=9)
    assert ray_pod_group(ray, SCHEDULER_PLUGINS)["spec"]["minMember"] == 5


def test_the_pods_carry_the_label_schedulername_and_owner_kuberay_gives_them() -> None:
    pods = ray_pods(cluster(), SCHEDULER_PLUGINS)
    assert [p["metadata"]["generateName"] for p in pods] == [
        "llm-tune-head-",
        "llm-tune-gpu-workers-worker-",
        "llm-tune-gpu-workers-worker-",
    ]
    for obj in pods:
        meta = obj["metadata"]
        assert meta["labels"]["scheduling.x-k8s.io/pod-group"] == "llm-tune"
        assert meta["labels"]["ray.io/cluster"] == "llm-tune"
        assert meta["ownerReferences"][0]["controller"] is True
        assert obj["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        obj["metadata"]["name"] = meta["generateName"] + "x"
        assert PodInfo.from_dict(obj).group_key == "default/llm-tune"
    # without the gang label, KubeRay still sets the schedulerName but no pod-group label
    plain = cluster()
    del plain["metadata"]["labels"]["ray.io/gang-scheduling-enabled"]
    assert all(
        "scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"]
        for p in ray_pods(plain, "scheduler-plugins")
    )


def test_the_volcano_integration_uses_min_replicas_and_the_annotation() -> None:
    ray = cluster()
    ray["metadata"]["labels"]["volcano.sh/queue-name"] = "default"
    ray["spec"]["workerGroupSpecs"][0].update(replicas=3)  # minReplicas stays 2
    group = ray_pod_group(ray, VOLCANO)
    assert group["metadata"]["name"] == "ray-llm-tune-pg"
    assert group["spec"]["minMember"] == 3 and group["spec"]["queue"] == "default"
    assert group["spec"]["minResources"]["nvidia.com/gpu"] == "16"
    pods = ray_pods(ray, VOLCANO)
    assert len(pods) == 4  # desired replicas are created; the quorum is the minimum
    for obj in pods:
        assert obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "ray-llm-tune-pg"
        assert obj["spec"]["schedulerName"] == "volcano"
        obj["metadata"]["name"] = "x"
        assert PodInfo.from_dict(obj).group_key == "default/ray-llm-tune-pg@scheduling.volcano.sh"


def named(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, obj in enumerate(pods):
        obj["metadata"]["name"] = f"{obj['metadata']['generateName']}{i}"
    return pods


async def test_a_ray_cluster_is_placed_whole_or_not_at_all() -> None:
    # the operator runs a profile's alias as a profile of that name (the real API server's test
    # tests/integration/test_kuberay.py uses the alias itself)
    profile = {**DEFAULT_PROFILE_SPEC, "schedulerName": "scheduler-plugins-scheduler"}
    ray = cluster()
    objects = [ray_pod_group(ray, SCHEDULER_PLUGINS), *named(ray_pods(ray, SCHEDULER_PLUGINS))]
    nodes = [make_node(f"g{i}", gpus=8) for i in range(2)]
    fits = Simulation(InMemoryCluster([*nodes, *objects]), [profile], initial_backoff=0.01, max_backoff=0.05)
    out = await fits.run()
    assert all(fits.placements().values()), [o.message for o in out.values()]
    short = Simulation(
        InMemoryCluster([nodes[0], *objects]), [profile], initial_backoff=0.01, max_backoff=0.05
    )
    await short.run()
    assert not any(short.placements().values())
