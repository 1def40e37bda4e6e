"""Preemption on the real API server, with KWOK playing the kubelets (pods run, a deleted pod goes):
a high-priority pod evicts a lower-priority one and binds where it was nominated; a pod whose
PriorityClass says ``preemptionPolicy: Never`` evicts nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from bench import e2e_preemption
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane, python_env
from shoal.testing.kwok import KWOK_ANNOTATION, KwokProcess
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_profile

pytestmark = pytest.mark.slow


def fake_node(name: str, cpu: str) -> dict[str, Any]:
    node = make_node(name, cpu=cpu, gpus=0)
    node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
    return node


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": policy,
    }


async def setup(api: client.ApiClient, run: str) -> str:
    """One 2-cpu node, the three classes, a profile; returns its schedulerName."""
    await create(api, fake_node("n1", "2"))
    for obj in (
        priority_class(f"low-{run}", 10),
        priority_class(f"mid-{run}", 500),
        priority_class(f"high-{run}", 1000),
        priority_class(f"polite-{run}", 1000, "Never"),
    ):
        await create(api, obj)
    sched = f"s-{run}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    return sched


async def running(core: Any, name: str, namespace: str) -> bool:
    pod = await core.read_namespaced_pod(name, namespace)
    return bool(pod.spec.node_name == "n1" and pod.status.phase == "Running")


async def notes(core: Any, namespace: str, name: str, reason: str) -> list[str]:
    events: Any = client.EventsV1Api(core.api_client)
    found = await events.list_namespaced_event(namespace)
    return [e.note or "" for e in found.items if e.regarding.name == name and e.reason == reason]


def terminating(pod: dict[str, Any], grace: int, at_least: int = 1) -> None:
    """A victim that takes time to stop, as a real one: kwok removes it ``at_least`` seconds after
    its deletion, at the latest when its grace period ends."""
    pod["spec"]["terminationGracePeriodSeconds"] = grace
    pod["metadata"].setdefault("annotations", {})["pod-delete.stage.kwok.x-k8s.io/delay"] = f"{at_least}s"


async def start_low(api: client.ApiClient, namespace: str, sched: str, run: str) -> Any:
    core: Any = client.CoreV1Api(api)
    low = make_pod(
        "low", namespace=namespace, cpu="2", memory=None, scheduler_name=sched, priority_class=f"low-{run}"
    )
    terminating(low, 10, 5)
    await create(api, low)
    await wait_for(lambda: running(core, "low", namespace), 60, what="low running on n1 (kwok)")
    return core


async def test_high_priority_pod_preempts_and_binds_to_the_nominated_node(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess, kwok: KwokProcess
) -> None:
    run = uuid.uuid4().hex[:6]
    sched = await setup(clean, run)
    core = await start_low(clean, namespace, sched, run)
    high = make_pod(
        "high", namespace=namespace, cpu="2", memory=None, scheduler_name=sched, priority_class=f"high-{run}"
    )
    created = await create(clean, high)
    found = "preemption: found a potential placement for pod on node n1, preempting 1 victims"

    async def preempting() -> bool:
        return any(n.endswith(found) for n in await notes(core, namespace, "high", "FailedScheduling"))

    await wait_for(preempting, 30, what="high preempting low")

    async def nominated() -> bool:
        return bool((await core.read_namespaced_pod("high", namespace)).status.nominated_node_name == "n1")

    await wait_for(nominated, 5, what="high's status.nominatedNodeName while low terminates")
    # low is terminating (at least 5 s): a pod of lower priority than high must leave its room alone
    mid = make_pod(
        "mid", namespace=namespace, cpu="2", memory=None, scheduler_name=sched, priority_class=f"mid-{run}"
    )
    await create(clean, mid)
    await wait_for(lambda: notes(core, namespace, "mid", "FailedScheduling"), 30, what="mid refused")

    async def low_gone() -> bool:
        names = [p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items]
        return "low" not in names

    await wait_for(low_gone, 60, what="the victim deleted (kwok completes the deletion)")
    await wait_for(lambda: running(core, "high", namespace), 60, what="high bound to n1 and running")
    preempted = await wait_for(lambda: notes(core, namespace, "low", "Preempted"), 30, what="Preempted event")
    assert preempted == [f"Preempted by pod {created['metadata']['uid']} on node n1"]
    mid_notes = await notes(core, namespace, "mid", "FailedScheduling")
    assert not any("found a potential placement" in n for n in mid_notes), mid_notes
    assert (await core.read_namespaced_pod("mid", namespace)).spec.node_name is None


async def test_a_never_preempting_pod_evicts_nothing(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess, kwok: KwokProcess, crds: ControlPlane
) -> None:
    kubeconfig = str(crds.kubeconfig)
    run = uuid.uuid4().hex[:6]
    sched = await setup(clean, run)
    core = await start_low(clean, namespace, sched, run)
    polite = make_pod(
        "polite",
        namespace=namespace,
        cpu="2",
        memory=None,
        scheduler_name=sched,
        priority_class=f"polite-{run}",
    )
    await create(clean, polite)
    failed = await wait_for(
        lambda: notes(core, namespace, "polite", "FailedScheduling"), 30, what="polite's FailedScheduling"
    )
    assert all(n.endswith("preemption: not eligible due to preemptionPolicy=Never.") for n in failed), failed

    def explain() -> subprocess.CompletedProcess[str]:
        argv = [
            sys.executable,
            "-m",
            "shoal.cli",
            "explain",
            f"{namespace}/polite",
            "--kubeconfig",
            kubeconfig,
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=python_env())

    out = await asyncio.to_thread(explain)
    assert out.returncode == 0, out.stderr
    assert "preemption: not eligible due to preemptionPolicy=Never." in out.stdout
    assert await running(core, "low", namespace)
    assert (await core.read_namespaced_pod("polite", namespace)).spec.node_name is None


async def test_a_gang_preempts_only_what_it_needs_and_binds_whole(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess, kwok: KwokProcess
) -> None:
    run = uuid.uuid4().hex[:6]
    core: Any = client.CoreV1Api(clean)
    sched = await setup(clean, run)  # n1, 2 cpu
    for name in ("n2", "n3", "n4"):
        await create(clean, fake_node(name, "2"))
    fill = []
    for i, node in enumerate(["n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"]):
        obj = make_pod(f"low-{i}", namespace=namespace, cpu="1", memory=None, priority_class=f"low-{run}")
        obj["spec"]["nodeName"] = node
        terminating(obj, 2)
        fill.append(obj)
    await create_many(clean, fill)

    async def phase(prefix: str, phase: str, count: int) -> bool:
        pods = (await core.list_namespaced_pod(namespace)).items
        return sum(1 for p in pods if p.metadata.name.startswith(prefix) and p.status.phase == phase) == count

    await wait_for(lambda: phase("low-", "Running", 8), 60, what="8 low pods running (kwok)")
    await create(clean, make_pod_group("train", namespace=namespace, min_member=4))
    members = [
        make_pod(
            f"train-{i}",
            namespace=namespace,
            cpu="1",
            memory=None,
            scheduler_name=sched,
            priority_class=f"high-{run}",
            pod_group="train",
        )
        for i in range(4)
    ]
    await create_many(clean, members)
    await wait_for(lambda: phase("train-", "Running", 4), 90, what="the gang bound whole and running")
    left = [p.metadata.name for p in (await core.list_namespaced_pod(namespace)).items]
    assert sum(1 for n in left if n.startswith("low-")) == 4, left  # 4 cpus needed, 4 pods evicted


async def seen_by_shoal(core: Any, namespace: str, sched: str) -> None:
    """Wait until shoal's pod watch has reached the pods created so far: a sentinel pod created
    now (one no node can take, so it preempts nothing) gets shoal's PodScheduled=False once shoal
    has seen it, and the watch delivers a kind's events in order. Under load the watch may lag
    the API's listings by seconds; a gang tried before the victims are known would not preempt."""
    sentinel = make_pod("sentinel", namespace=namespace, scheduler_name=sched)
    sentinel["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "no-such-node"}
    await core.create_namespaced_pod(namespace, sentinel)

    async def refused() -> bool:
        pod = await core.read_namespaced_pod("sentinel", namespace)
        return any(c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or ())

    await wait_for(refused, 60, what="shoal's verdict on a sentinel pod (its watch caught up)")
    await core.delete_namespaced_pod("sentinel", namespace, grace_period_seconds=0)


async def test_a_gang_required_in_one_rack_preempts_the_cheapest_rack_and_its_nominations_hold(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess, kwok: KwokProcess
) -> None:
    """bench/e2e_preemption.py's fleet on KWOK nodes (4 racks of 4 full nodes): a native gang of 4
    required in one rack evicts rack-1's 4 pods (the fewest and lowest-priority victims; rack-3
    looks as cheap only if the victim gang ``vg`` is broken, and it is not), its members are
    nominated there while the victims terminate gracefully, and a lower-priority pod created
    meanwhile leaves that room alone."""
    run = uuid.uuid4().hex[:6]
    core: Any = client.CoreV1Api(clean)
    sched = f"s-{run}"
    await create(clean, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))

    def renamed(obj: dict[str, Any]) -> dict[str, Any]:
        """The fleet's PriorityClasses with this run's names (they are cluster-wide)."""
        if obj["kind"] == "PriorityClass":
            obj["metadata"]["name"] += f"-{run}"
        elif obj["spec"].get("priorityClassName"):
            obj["spec"]["priorityClassName"] += f"-{run}"
        return obj

    await create_many(clean, [renamed(c) for c in e2e_preemption.topo_priority_classes()])
    nodes = e2e_preemption.topo_nodes()
    for node in nodes:
        node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
    await create_many(clean, nodes)
    victims = [renamed(o) for o in e2e_preemption.topo_victims(namespace, grace_s=30)]
    for obj in victims:
        if obj["kind"] == "Pod":
            terminating(obj, 30, 8)  # each victim takes 8 s to go
    await create_many(clean, victims)
    victim_names = {o["metadata"]["name"] for o in victims if o["kind"] == "Pod"}

    async def pods() -> dict[str, Any]:
        return {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}

    async def running(names: set[str]) -> bool:
        now = await pods()
        return all(n in now and now[n].status.phase == "Running" for n in names)

    await wait_for(lambda: running(victim_names), 60, what="the 24 victims running (kwok)")
    await seen_by_shoal(core, namespace, sched)
    gang = [renamed(o) for o in e2e_preemption.topo_preemptors(namespace, sched)]
    await create_many(clean, gang)
    members = {o["metadata"]["name"] for o in gang if o["kind"] == "Pod"}
    rack1 = {f"tnode-{i:02d}" for i in range(4, 8)}

    async def nominated_in_rack1() -> bool:
        now = await pods()
        return all(n in now and now[n].status.nominated_node_name in rack1 for n in members)

    await wait_for(nominated_in_rack1, 30, what="the gang's members nominated to rack-1's nodes")
    now = await pods()
    terminating_now = {n for n in victim_names if n in now and now[n].metadata.deletion_timestamp}
    assert terminating_now == {f"tv-{i:02d}" for i in range(4, 8)}, terminating_now
    # a pod of lower priority than the gang that rack-1's freed nodes would hold, and that can
    # evict nothing itself (nothing runs below its priority; vg has the same)
    thief = make_pod(
        "thief",
        namespace=namespace,
        cpu="4",
        memory=None,
        scheduler_name=sched,
        priority_class=f"topo-p5-{run}",
    )
    await create(clean, thief)
    await wait_for(lambda: notes(core, namespace, "thief", "FailedScheduling"), 30, what="the thief refused")
    await wait_for(lambda: running(members), 90, what="the gang bound whole and running")
    now = await pods()
    assert {now[n].spec.node_name for n in members} == rack1
    assert now["thief"].spec.node_name is None
    gone = victim_names - set(now)
    assert gone == {f"tv-{i:02d}" for i in range(4, 8)}, gone  # 4 victims; vg whole
