"""Differential preemption: kube-scheduler 1.37 and shoal on the same seeded priority mix.

Four KWOK nodes of 4 cpu are filled with 16 running 1-cpu pods bound in advance (the same layout
for both schedulers), each with its own priority; then preemptors of mixed priority and size
(1-3 cpu) are created one at a time, each settled (bound, or refused with preemption's verdict)
before the next. Every priority is distinct and every pod takes whole cpus, so each step has one
right answer (the fewest lowest-priority victims, on the node whose highest victim is lowest):
both schedulers must bind the same preemptors to the same nodes and leave the same pods running,
so no pod is preempted that kube-scheduler would have spared.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import PREEMPTION_RACE_ARGS, KubeSchedulerProcess
from shoal.testing.kwok import KWOK_ANNOTATION, KwokProcess
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

SEED = 15
NODES = [f"n{i}" for i in range(4)]


def mix() -> tuple[list[tuple[str, str, int]], list[tuple[str, int, int]]]:
    """(fill pods: name, node, priority), (preemptors: name, priority, cpus), all priorities distinct."""
    rng = random.Random(SEED)
    values = rng.sample(range(10, 400), 16 + 6)
    fill = [(f"fill-{n}-{i}", n, values[4 * k + i]) for k, n in enumerate(NODES) for i in range(4)]
    preemptors = [(f"pre-{j}", values[16 + j], rng.choice([1, 2, 3])) for j in range(6)]
    # below every running pod: preemption cannot help it
    return fill, [*preemptors, ("pre-last", 5, 1)]


def kwok_node(name: str) -> dict[str, Any]:
    node = make_node(name, cpu="4", memory="64Gi", gpus=0)
    node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
    return node


async def settled(core: Any, events: Any, namespace: str, name: str) -> str | None:
    """The preemptor's node, "pending" once preemption said it cannot help, else None."""
    pod = await core.read_namespaced_pod(name, namespace)
    if pod.spec.node_name and pod.status.phase == "Running":
        terminating = [
            p for p in (await core.list_namespaced_pod(namespace)).items if p.metadata.deletion_timestamp
        ]
        return None if terminating else str(pod.spec.node_name)
    for e in await list_all(events.list_namespaced_event, namespace):
        note = e.get("note") or ""
        # "not eligible due to a terminating pod on the nominated node" is a pod waiting for its
        # victims (shoal retries it meanwhile); only "no node can be made to fit" settles it
        if e["regarding"]["name"] == name and "preemption: 0/" in note:
            return "pending"
    return None


async def run(
    api: client.ApiClient, namespace: str, scheduler: str, run_id: str
) -> tuple[list[str], dict[str, str]]:
    """Fill, then preempt step by step; (each preemptor's outcome, the pods left and their nodes)."""
    core: Any = client.CoreV1Api(api)
    events: Any = client.EventsV1Api(api)
    fill, preemptors = mix()
    pods = []
    for name, node, prio in fill:
        obj = make_pod(
            name,
            namespace=namespace,
            cpu="1",
            memory=None,
            scheduler_name=scheduler,
            priority_class=f"pc-{prio}-{run_id}",
        )
        obj["spec"]["nodeName"] = node
        obj["spec"]["terminationGracePeriodSeconds"] = 2  # kwok removes it within 1-2 s of its deletion
        pods.append(obj)
    await create_many(api, pods)

    async def all_running() -> bool:
        got = await list_all(core.list_namespaced_pod, namespace)
        return len(got) == 16 and all((p.get("status") or {}).get("phase") == "Running" for p in got)

    await wait_for(all_running, 60, what="the fill pods running (kwok)")
    outcomes = []
    for name, prio, cpus in preemptors:
        obj = make_pod(
            name,
            namespace=namespace,
            cpu=str(cpus),
            memory=None,
            scheduler_name=scheduler,
            priority_class=f"pc-{prio}-{run_id}",
        )
        obj["spec"]["terminationGracePeriodSeconds"] = 2  # a later preemptor may evict it
        await create(api, obj)

        async def step(pod: str = name) -> str | None:
            return await settled(core, events, namespace, pod)

        outcomes.append(await wait_for(step, 60, what=f"{name} settled"))
    left = {
        p["metadata"]["name"]: p["spec"].get("nodeName") or ""
        for p in await list_all(core.list_namespaced_pod, namespace)
    }
    return outcomes, left


async def test_same_preemptions_as_kube_scheduler(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, kwok: KwokProcess, tmp_path: Path
) -> None:
    api = clean
    run_id = uuid.uuid4().hex[:6]
    await create_many(api, [kwok_node(n) for n in NODES])
    fill, preemptors = mix()
    for prio in {p for _, _, p in fill} | {p for _, p, _ in preemptors}:
        await create(
            api,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"pc-{prio}-{run_id}"},
                "value": prio,
            },
        )
    namespaces = [f"pre-kube-{run_id}", f"pre-shoal-{run_id}"]
    for ns in namespaces:
        await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    core: Any = client.CoreV1Api(api)

    # its preemptors retried 10 s after a park by kube-scheduler's async-preemption race
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler", args=PREEMPTION_RACE_ARGS):
        kube = await run(api, namespaces[0], "default-scheduler", run_id)
    await core.delete_collection_namespaced_pod(namespaces[0])

    async def emptied() -> bool:
        return not await list_all(core.list_namespaced_pod, namespaces[0])

    await wait_for(emptied, 60, what="kube-scheduler's pods gone")
    sched = f"s-{run_id}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await run(api, namespaces[1], sched, run_id)

    assert "pending" in kube[0] and any(o != "pending" for o in kube[0]), (
        f"the mix should exercise both: {kube[0]}"
    )
    assert shoal[0] == kube[0], f"each preemptor where kube-scheduler put it: {kube} vs {shoal}"
    assert shoal[1] == kube[1], "the same pods left running, on the same nodes"
