"""Differential: default topology spreading, kube-scheduler 1.37 and shoal on the same objects.

A pod without ``topologySpreadConstraints`` of its own gets its profile's default constraints
(kube-scheduler's System defaults here) with the selector of the Services and the controller that
select it. Both schedulers run a profile where PodTopologySpread alone scores, on nodes in two
zones and one node without a zone label; each workload (a Deployment's ReplicaSet with two pods
already running, a StatefulSet with its headless Service, a Service's backends, a
ReplicationController's pods: tests/integration/default_spread_workloads.py) is created pod by
pod. Every workload has one outcome whatever ties are broken (proved by
tests/unit/plugins/test_podtopologyspread_defaults.py), so kube-scheduler, which breaks ties at
random, and shoal must both end there, node for node.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubecontrollermanager import WORKLOAD_CONTROLLERS, KubeControllerManagerProcess
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_profile
from tests.integration.default_spread_workloads import (
    CONTROLLER_WORKLOADS,
    SCENARIO_NODES,
    WORKLOADS,
    controller_objects,
    owner_objects,
    pods,
    scenario_nodes,
)

pytestmark = pytest.mark.slow

SPREAD_ONLY_KUBE = {
    "schedulerName": "default-scheduler",
    "percentageOfNodesToScore": 100,
    "plugins": {
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "PodTopologySpread", "weight": 2}]}
    },
}


def spread_only_shoal(name: str) -> dict[str, Any]:
    """The same for shoal: PodTopologySpread's args left out, so kube-scheduler's System defaults."""
    return {
        "schedulerName": name,
        "percentageOfNodesToScore": 100,
        "plugins": {"score": [{"name": "PodTopologySpread", "weight": 2}]},
    }


async def place(api: client.ApiClient, namespace: str, scheduler: str) -> dict[str, tuple[int, ...]]:
    """Create each workload's owners, then its pods one at a time (each bound before the next);
    returns the pods per node of each workload, in SCENARIO_NODES order."""
    core: Any = client.CoreV1Api(api)
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    out: dict[str, tuple[int, ...]] = {}
    for w in WORKLOADS:
        uids = {}
        for owner in owner_objects(w, namespace):
            made = await create(api, owner)
            uids[f"{owner['kind']}/{owner['metadata']['name']}"] = made["metadata"]["uid"]
        for pod in pods(w, namespace, scheduler, uids):
            await create(api, pod)
            if pod["spec"].get("nodeName"):
                continue
            name = pod["metadata"]["name"]

            async def bound(name: str = name) -> str | None:
                got = await core.read_namespaced_pod(name, namespace)
                node: str | None = got.spec.node_name
                return node

            await wait_for(bound, 60, interval=0.05, what=f"{scheduler}: {namespace}/{name} bound")
        placed = [
            p["spec"]["nodeName"]
            for p in await list_all(core.list_namespaced_pod, namespace)
            if p["metadata"]["labels"].get("app") == w.name
        ]
        out[w.name] = tuple(placed.count(n) for n, _ in SCENARIO_NODES)
    return out


async def test_default_spreading_places_as_kube_scheduler(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    await create_many(api, scenario_nodes())
    expected = {w.name: w.expected for w in WORKLOADS}

    kube_ns = f"spread-kube-{uuid.uuid4().hex[:6]}"
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler", profiles=[SPREAD_ONLY_KUBE]):
        kube = await place(api, kube_ns, "default-scheduler")
    await core.delete_collection_namespaced_pod(kube_ns, grace_period_seconds=0)
    assert kube == expected, "the workloads changed: kube-scheduler is the reference"

    sched = f"spread-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, spread_only_shoal(sched), scheduler_name=sched))
    shoal = await place(api, f"spread-shoal-{uuid.uuid4().hex[:6]}", sched)
    assert shoal == kube


async def place_by_controllers(
    api: client.ApiClient, namespace: str, scheduler: str
) -> dict[str, tuple[int, ...]]:
    """Create the Deployment and the StatefulSet; their controllers make the pods (in a burst);
    returns the pods per node of each once all are bound."""
    core: Any = client.CoreV1Api(api)
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for w in CONTROLLER_WORKLOADS:
        for obj in controller_objects(w, namespace, scheduler):
            await create(api, obj)
    want = sum(w.replicas for w in CONTROLLER_WORKLOADS)

    async def all_bound() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = await list_all(core.list_namespaced_pod, namespace)
        bound = [p for p in items if p["spec"].get("nodeName")]
        return bound if len(bound) == want else None

    pods_now = await wait_for(all_bound, 120, interval=0.1, what=f"{scheduler}: {want} controller pods bound")
    out = {}
    for w in CONTROLLER_WORKLOADS:
        placed = [p["spec"]["nodeName"] for p in pods_now if p["metadata"]["labels"].get("app") == w.name]
        out[w.name] = tuple(placed.count(n) for n, _ in SCENARIO_NODES)
    for p in pods_now:  # their controllers made them: a Deployment's pods come from its ReplicaSet
        (ref,) = p["metadata"]["ownerReferences"]
        assert ref["controller"] and ref["kind"] in ("ReplicaSet", "StatefulSet"), ref
    return out


async def test_pods_made_by_controllers_spread_as_kube_scheduler_spreads_them(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    """The same with pods made by kube-controller-manager 1.37's deployment, replicaset and
    statefulset controllers (owner references, pod-template-hash, ordinals as they write them)."""
    api = clean
    await create_many(api, scenario_nodes())
    expected = {w.name: w.expected for w in CONTROLLER_WORKLOADS}
    kcm = KubeControllerManagerProcess(crds.kubeconfig, tmp_path / "kcm", controllers=WORKLOAD_CONTROLLERS)
    with kcm:
        with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler", profiles=[SPREAD_ONLY_KUBE]):
            kube = await place_by_controllers(api, f"ctl-kube-{uuid.uuid4().hex[:6]}", "default-scheduler")
        assert kube == expected, "the workloads changed: kube-scheduler is the reference"
        sched = f"ctl-{uuid.uuid4().hex[:6]}"
        await create(api, make_profile(sched, spread_only_shoal(sched), scheduler_name=sched))
        shoal = await place_by_controllers(api, f"ctl-shoal-{uuid.uuid4().hex[:6]}", sched)
    assert shoal == kube
