"""NodeAffinityArgs.addedAffinity on the real API server, with kube-scheduler 1.37 as the reference:
a profile confined to one node pool places its pods there only, and a pod that asks for a node
outside the pool waits with the scheduler's own reason ("node(s) didn't match scheduler-enforced
node affinity"), for both schedulers; the args pass through the SchedulingProfile CRD as written."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.cluster import (
    OperatorProcess,
    create,
    create_many,
    failed_scheduling_note,
    node_of,
    wait_for,
)
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

POOL = "example.com/pool"
ADDED = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL, "operator": "In", "values": ["train"]}]}]
    },
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {
            "weight": 50,
            "preference": {"matchExpressions": [{"key": "example.com/fast", "operator": "Exists"}]},
        }
    ],
}
ARGS = [{"name": "NodeAffinity", "args": {"addedAffinity": ADDED}}]
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"


async def run(api: client.ApiClient, scheduler: str) -> tuple[str | None, str]:
    """(where a plain pod goes, the FailedScheduling note of a pod pinned outside the pool)."""
    core: Any = client.CoreV1Api(api)
    ns = f"added-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create(api, make_pod("plain", namespace=ns, scheduler_name=scheduler))
    pinned = make_pod("pinned", namespace=ns, scheduler_name=scheduler, node_selector={POOL: "serve"})
    await create(api, pinned)

    node = await wait_for(lambda: node_of(api, ns, "plain"), 60, what=f"{scheduler}: plain pod placed")
    note = await wait_for(
        lambda: failed_scheduling_note(api, ns, "pinned"), 60, what=f"{scheduler}: pinned pod refused"
    )
    assert not (await core.read_namespaced_pod("pinned", ns)).spec.node_name
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return node, note


async def test_added_affinity_confines_a_profile_as_with_kube_scheduler(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    api = clean
    await create_many(
        api,
        [
            make_node("train-slow", labels={POOL: "train"}),
            make_node("train-fast", labels={POOL: "train", "example.com/fast": "true"}),
            make_node("serve-0", labels={POOL: "serve"}),
        ],
    )
    kube_profile = {"schedulerName": "default-scheduler", "pluginConfig": ARGS}
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler", profiles=[kube_profile]):
        kube = await run(api, "default-scheduler")
    sched = f"added-{uuid.uuid4().hex[:6]}"
    await create(
        api, make_profile(sched, {"schedulerName": sched, "pluginConfig": ARGS}, scheduler_name=sched)
    )
    shoal = await run(api, sched)
    # the preferred term outweighs the rest of the default scores on two empty nodes
    assert kube[0] == shoal[0] == "train-fast"
    # serve-0 is outside the profile's pool; the train nodes are not the pool the pod asks for
    for note in (kube[1], shoal[1]):
        assert f"1 {ENFORCED}" in note and "2 node(s) didn't match Pod's node affinity/selector" in note, note
