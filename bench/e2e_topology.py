"""The topology scenario of ``make bench``: topology-aware gangs, shoal and kube-scheduler side by side.

The fleet: 1,024 nodes × 8 GPUs labelled with zones (512 nodes), blocks (128), racks (32) and NVLink
cliques (8); half the racks (seeded) carry background pods bound beforehand on half their nodes, 1
to 7 GPUs each, so the fleet is fragmented the same way for both schedulers. Then gangs of 8, 16
and 64 members (8 GPUs each, a whole node per member), in a seeded order, as native
``scheduling.k8s.io/v1beta1`` PodGroups (``gang.minCount``) whose
``schedulingConstraints.topology[0].key`` requires one clique (8), rack (16) or block (64); the
members link to them with ``spec.schedulingGroup.podGroupName``. kube-scheduler (same release, gates
on) and shoal get the very same objects. Each gang is created once the previous one is bound (or
has timed out), so every gang sees what the previous ones left.

Per scheduler: the fraction of gangs placed inside one domain of their level (``domain_fit``), the
gang latency (last member created -> all bound; median), pods/s (members bound over the summed time
from each gang's first create to its last binding: the pauses of the harness between gangs are not
counted), and the whole racks left free at the end (no GPU in use on any node of the rack).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from bench.harness import Harness
from shoal.plugins.topologyplacement.domains import BLOCK, CLIQUE, RACK, ZONE
from shoal.testing.objects import make_node, make_pod

NODES = 1024
LEVEL = {8: CLIQUE, 16: RACK, 64: BLOCK}
GANGS = (8,) * 6 + (16,) * 4 + (64,) * 2
GANG_TIMEOUT_S = 60.0
API = "scheduling.k8s.io/v1beta1"


def labels_of(i: int) -> dict[str, str]:
    return {
        ZONE: f"zone-{i // 512}",
        BLOCK: f"block-{i // 128}",
        RACK: f"rack-{i // 32}",
        CLIQUE: f"clique-{i // 8}",
    }


def node_name(i: int) -> str:
    return f"gpu-{i:05d}"


def fleet(nodes_count: int = NODES) -> list[dict[str, Any]]:
    nodes = []
    for i in range(nodes_count):
        node = make_node(node_name(i), cpu="96", memory="1Ti", gpus=8, gfd_labels=False)
        node["metadata"]["labels"].update(labels_of(i))
        nodes.append(node)
    return nodes


def background(namespace: str, seed: int = 5, nodes_count: int = NODES) -> list[dict[str, Any]]:
    """Pods bound beforehand: half the racks, half their nodes, 1-7 GPUs each (seeded)."""
    rng = random.Random(seed)
    pods = []
    for rack in range(nodes_count // 32):
        if rng.random() >= 0.5:
            continue
        for i in range(rack * 32, rack * 32 + 32):
            if rng.random() < 0.5:
                name = f"bg-{i:05d}"
                pods.append(
                    make_pod(name, namespace=namespace, gpus=rng.randint(1, 7), node_name=node_name(i))
                )
    return pods


def gang_objects(name: str, members: int, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    """A native PodGroup requiring one domain of its level, and its members."""
    group = {
        "apiVersion": API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": members}},
            "schedulingConstraints": {"topology": [{"key": LEVEL[members]}]},
        },
    }
    pods = []
    for i in range(members):
        pod = make_pod(
            f"{name}-{i:02d}",
            namespace=namespace,
            cpu="8",
            memory="64Gi",
            gpus=8,
            scheduler_name=scheduler_name,
        )
        pod["spec"]["schedulingGroup"] = {"podGroupName": name}
        pods.append(pod)
    return [group, *pods]


def in_one_domain(nodes: list[str], key: str) -> bool:
    return len({labels_of(int(n.removeprefix("gpu-")))[key] for n in nodes}) == 1


def whole_free_racks(used_nodes: set[str], nodes_count: int = NODES) -> int:
    return sum(
        1
        for r in range(nodes_count // 32)
        if not any(node_name(i) in used_nodes for i in range(r * 32, r * 32 + 32))
    )


async def run_gangs(
    b: Harness, namespace: str, seed: int = 9, gangs: tuple[int, ...] = GANGS, nodes_count: int = NODES
) -> dict[str, Any]:
    """Create the gangs one after the other on a started scheduler; measure (see the docstring)."""
    order = list(gangs)
    random.Random(seed).shuffle(order)
    fits, latencies = 0, []
    placed_pods = 0
    busy = 0.0  # per gang: first member created -> all bound (the harness's pauses between gangs excluded)
    for g, size in enumerate(order):
        name = f"gang-{g:02d}-{size}"
        objs = gang_objects(name, size, namespace, b.scheduler_name)
        began = time.monotonic()
        created = await b.create_all(objs, label="topology")
        names = list(created)
        ok = await b.wait_bound(names, GANG_TIMEOUT_S, f"topology {name}")
        bound = b.bound_nodes()
        nodes = [bound[n] for n in names if n in bound]
        if ok:
            placed_pods += len(names)
            times = b.bound_times()
            done = max(times[n] for n in names)
            latencies.append(done - max(created.values()))
            busy += done - began
            fits += in_one_domain(nodes, LEVEL[size])
    used = set(b.bound_nodes().values())
    return {
        "gangs": len(order),
        "gangs_bound": len(latencies),
        "domain_fit": fits / len(order),
        "gang_latency_p50_s": statistics.median(latencies) if latencies else None,
        "pods_per_s": placed_pods / max(busy, 1e-9),
        "free_racks": whole_free_racks(used, nodes_count),
    }
