"""The preemption scenarios of ``make bench``, shoal and kube-scheduler side by side.

* **preemption** — scheduler_perf's PreemptionBasic: nodes of 4 cpu each hold 4 low-priority pods of
  900m (bound before the scheduler starts, the same for both), then high-priority pods of 3970m
  arrive; each evicts the 4 pods of one node and binds there. Both templates set
  ``terminationGracePeriodSeconds: 0``, so a deleted victim is gone at once (no kubelet here, as in
  scheduler_perf). Measured: high-priority pods bound per second, first created to last bound.
* **gang preemption** — 16 nodes of 4 cpu: 8 hold one low-priority pod of 2 cpu, 8 hold two; a
  high-priority gang of 8 members of 4 cpu each needs 8 whole nodes, and the fewest victims that
  make room are the 8 single pods. Measured: pods evicted beyond that minimum. kube-scheduler (its
  workload-aware preemption is behind a gate that is off in 1.37) preempts per member; shoal as one.
"""

from __future__ import annotations

import time
from typing import Any

from bench.harness import Harness
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_priority_class

LOW, HIGH = "bench-low", "bench-high"
GANG_NODES = 16
GANG_MEMBERS = 8
GANG_MIN_VICTIMS = 8


def priority_classes() -> list[dict[str, Any]]:
    return [make_priority_class(LOW, 0), make_priority_class(HIGH, 9999999)]


def _pod(name: str, namespace: str, cpu: str, klass: str, **kw: Any) -> dict[str, Any]:
    pod = make_pod(name, namespace=namespace, cpu=cpu, memory="500Mi", priority_class=klass, **kw)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


def basic_nodes(count: int) -> list[dict[str, Any]]:
    return [
        make_node(f"node-{i:05d}", cpu="4", memory="32Gi", pods=110, gfd_labels=False) for i in range(count)
    ]


def basic_victims(nodes: int, namespace: str) -> list[dict[str, Any]]:
    """4 low-priority pods of 900m on every node, bound beforehand."""
    return [
        _pod(f"low-{i:05d}-{j}", namespace, "900m", LOW, node_name=f"node-{i:05d}")
        for i in range(nodes)
        for j in range(4)
    ]


def basic_preemptors(count: int, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    return [
        _pod(f"high-{i:05d}", namespace, "3970m", HIGH, scheduler_name=scheduler_name) for i in range(count)
    ]


def gang_nodes() -> list[dict[str, Any]]:
    return [make_node(f"gnode-{i:02d}", cpu="4", memory="32Gi", gfd_labels=False) for i in range(GANG_NODES)]


def gang_victims(namespace: str) -> list[dict[str, Any]]:
    """Nodes 0-7: one pod of 2 cpu; nodes 8-15: two. The minimum for 8 whole nodes: the 8 singles."""
    out = []
    for i in range(GANG_NODES):
        for j in range(1 if i < GANG_NODES // 2 else 2):
            out.append(_pod(f"glow-{i:02d}-{j}", namespace, "2", LOW, node_name=f"gnode-{i:02d}"))
    return out


def gang_preemptors(namespace: str, scheduler_name: str, native: bool) -> list[dict[str, Any]]:
    """The gang: a native PodGroup for kube-scheduler (its gang scheduling), scheduler-plugins' for shoal."""
    pods = []
    for i in range(GANG_MEMBERS):
        pod = _pod(f"gang-{i}", namespace, "4", HIGH, scheduler_name=scheduler_name)
        if native:
            pod["spec"]["schedulingGroup"] = {"podGroupName": "gang"}
        else:
            pod["metadata"].setdefault("labels", {})["scheduling.x-k8s.io/pod-group"] = "gang"
        pods.append(pod)
    if native:
        group: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": GANG_MEMBERS}}},
        }
    else:
        group = make_pod_group("gang", namespace=namespace, min_member=GANG_MEMBERS)
    return [group, *pods]


async def run_basic(
    b: Harness, namespace: str, nodes: int, preemptors: int, timeout: float
) -> dict[str, Any]:
    """The preemptors created at once on a started scheduler; all bound, or the timeout."""
    objs = basic_preemptors(preemptors, namespace, b.scheduler_name)
    first = time.monotonic()
    created = await b.create_all(objs, label="preemption")
    names = list(created)
    ok = await b.wait_bound(names, timeout, "preemption")
    times = b.bound_times()
    bound = [times[n] for n in names if n in times]
    last = max(bound) if bound else time.monotonic()
    remaining = sum(1 for n in await b.pod_names() if n.startswith("low-"))
    return {
        "nodes": nodes,
        "preemptors": preemptors,
        "all_bound": ok,
        "bound": len(bound),
        "seconds": last - first,
        "pods_per_s": len(bound) / max(last - first, 1e-9),
        "victims": nodes * 4 - remaining,
    }


async def run_gang(b: Harness, namespace: str, native: bool, timeout: float = 90.0) -> dict[str, Any]:
    objs = gang_preemptors(namespace, b.scheduler_name, native)
    created = await b.create_all(objs, label="gang preemption")
    names = list(created)
    ok = await b.wait_bound(names, timeout, "gang preemption")
    remaining = sum(1 for n in await b.pod_names() if n.startswith("glow-"))
    evicted = len(gang_victims(namespace)) - remaining
    return {
        "all_bound": ok,
        "bound": sum(1 for n in names if n in b.bound_times()),
        "evicted": evicted,
        "minimum": GANG_MIN_VICTIMS,
        "excess_victims": evicted - GANG_MIN_VICTIMS if ok else None,
    }
