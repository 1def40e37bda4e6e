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
            # the members' priority class: kube-scheduler refuses a gang whose members' priority
            # is not its PodGroup's (without it, the PodGroup's priority is 0)
            "spec": {"schedulingPolicy": {"gang": {"minCount": GANG_MEMBERS}}, "priorityClassName": HIGH},
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


# -- a gang required in one rack preempts (bench/e2e_next.py races it against 1.38) ----------------
#: 4 racks of 4 nodes of 4 cpu, every node full; the preemptor: a native gang of 4 members of 4 cpu
#: required in one rack. The cheapest rack is rack-1 (4 pods of priority 10). rack-3 looks as cheap
#: to a scheduler blind to victim gangs (2 members of the priority-5 gang ``vg`` + 2 pods of
#: priority 10: a lower priority sum) but evicting there breaks ``vg``, whose other 2 members run in
#: rack-2, below its minCount: done right it costs 6 victims.
TOPO_RACK_KEY = "topology.kubernetes.io/rack"
TOPO_RACKS, TOPO_PER_RACK = 4, 4
TOPO_MEMBERS = 4
TOPO_MIN_VICTIMS = 4
TOPO_BEST_RACK = "rack-1"
TOPO_CLASSES = {"topo-p5": 5, "topo-p10": 10, "topo-p100": 100}


def topo_priority_classes() -> list[dict[str, Any]]:
    return [make_priority_class(n, v) for n, v in TOPO_CLASSES.items()] + [make_priority_class(HIGH, 9999999)]


def topo_nodes() -> list[dict[str, Any]]:
    out = []
    for i in range(TOPO_RACKS * TOPO_PER_RACK):
        node = make_node(f"tnode-{i:02d}", cpu="4", memory="32Gi", gfd_labels=False)
        node["metadata"]["labels"][TOPO_RACK_KEY] = f"rack-{i // TOPO_PER_RACK}"
        out.append(node)
    return out


def native_group(name: str, namespace: str, min_count: int, klass: str, rack: bool = False) -> dict[str, Any]:
    """A native PodGroup of priority class ``klass`` (1.38 refuses a gang whose members' priority
    is not its own)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}, "priorityClassName": klass}
    if rack:
        spec["schedulingConstraints"] = {"topology": [{"key": TOPO_RACK_KEY}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def topo_victims(namespace: str, grace_s: int = 0) -> list[dict[str, Any]]:
    """Bound beforehand (see above); ``grace_s``: their terminationGracePeriodSeconds (a kubelet,
    KWOK here, lets them terminate gracefully)."""

    def pod(name: str, node: int, cpu: str, klass: str, group: str | None = None) -> dict[str, Any]:
        p = _pod(name, namespace, cpu, klass, node_name=f"tnode-{node:02d}", scheduling_group=group)
        p["spec"]["terminationGracePeriodSeconds"] = grace_s
        return p

    out: list[dict[str, Any]] = [native_group("vg", namespace, 4, "topo-p5")]
    for n in range(0, 4):  # rack-0: 2 pods of 2 cpu per node
        out += [pod(f"tv-{n:02d}-{j}", n, "2", "topo-p10") for j in range(2)]
    for n in range(4, 8):  # rack-1: the cheapest, 4 pods of priority 10
        out.append(pod(f"tv-{n:02d}", n, "4", "topo-p10"))
    for n in (8, 9, 12, 13):  # the victim gang, across rack-2 and rack-3
        out.append(pod(f"vg-{n:02d}", n, "4", "topo-p5", group="vg"))
    for n in (10, 11):  # rack-2's others: priority 100
        out.append(pod(f"tv-{n:02d}", n, "4", "topo-p100"))
    for n in (14, 15):  # rack-3's others: priority 10
        out.append(pod(f"tv-{n:02d}", n, "4", "topo-p10"))
    return out


def topo_preemptors(namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    pods = [
        _pod(f"tg-{i}", namespace, "4", HIGH, scheduler_name=scheduler_name, scheduling_group="tg")
        for i in range(TOPO_MEMBERS)
    ]
    return [native_group("tg", namespace, TOPO_MEMBERS, HIGH, rack=True), *pods]


def topo_outcome(victims: list[str], remaining: set[str], bound: dict[str, str]) -> dict[str, Any]:
    """What a run did: victims evicted (beyond the minimum), whether ``vg`` was left partial, and
    the racks the gang's members went to."""
    evicted = [v for v in victims if v not in remaining]
    vg = [v for v in victims if v.startswith("vg-")]
    vg_gone = sum(v not in remaining for v in vg)
    racks = sorted({f"rack-{int(n.removeprefix('tnode-')) // TOPO_PER_RACK}" for n in bound.values()})
    whole = len(bound) == TOPO_MEMBERS
    return {
        "all_bound": whole,
        "bound": len(bound),
        "evicted": len(evicted),
        "minimum": TOPO_MIN_VICTIMS,
        "excess_victims": len(evicted) - TOPO_MIN_VICTIMS if whole else None,
        "partial_victim_gangs": int(0 < vg_gone < len(vg)),
        "racks": racks,
        "one_rack": whole and len(racks) == 1,
        "best_rack": racks == [TOPO_BEST_RACK],
    }


async def run_topology_gang(b: Harness, namespace: str, timeout: float = 90.0) -> dict[str, Any]:
    victims = [o["metadata"]["name"] for o in topo_victims(namespace) if o["kind"] == "Pod"]
    objs = topo_preemptors(namespace, b.scheduler_name)
    created = await b.create_all(objs, label="topology gang preemption")
    names = list(created)
    await b.wait_bound(names, timeout, "topology gang preemption")
    bound = {n: node for n, node in b.bound_nodes().items() if n in created}
    return topo_outcome(victims, await b.pod_names(), bound)
