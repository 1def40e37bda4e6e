"""Volcano's PodGroups on the real API server, with Volcano's CRD (no status subresource) and the
objects KubeRay's Volcano integration writes: a RayCluster (a real minimal CRD), its PodGroup
``ray-<cluster>-pg`` owned by it, and head and worker pods annotated
``scheduling.k8s.io/group-name`` with ``schedulerName: volcano`` (an alias of a shoal profile).

A cluster that fits is placed whole and its PodGroup shows vc-scheduler's phase; one that does
not fit binds nothing; one in a queue other than ``default`` is refused, naming ``spec.queue``.
A Volcano Job's PodGroup is admitted before its pods exist, then its pods are placed whole.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim.cluster import load_objects
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_profile
from shoal.testing.thirdparty import (
    VOLCANO,
    VOLCANO_JOB_API,
    ray_pod_group,
    ray_pods,
    volcano_job_pod_group,
    volcano_job_pods,
)
from tests.integration.conftest import run_operator

pytestmark = pytest.mark.slow

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
VOLCANO_API = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture(scope="module")
def operator(
    thirdparty_crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """Started once Volcano's CRD is served (kopf then watches it from the start)."""
    yield from run_operator(thirdparty_crds, tmp_path_factory)


async def ray_cluster(
    api: client.ApiClient, namespace: str, name: str, workers: int, queue: str = "default"
) -> tuple[dict[str, Any], list[str]]:
    """Create a RayCluster (``workers`` GPU workers, all required) and what KubeRay's Volcano
    integration creates for it: the PodGroup, then the pods. Returns the PodGroup and pod names."""
    obj = copy.deepcopy(load_objects(REAL / "raycluster.yaml")[0])
    obj["metadata"].update(name=name, namespace=namespace)
    obj["metadata"]["labels"]["volcano.sh/queue-name"] = queue
    obj["spec"]["workerGroupSpecs"][0].update(replicas=workers, minReplicas=workers, maxReplicas=workers)
    obj = await create(api, obj)
    group = await create(api, ray_pod_group(obj, VOLCANO))
    pods = [await create(api, pod) for pod in ray_pods(obj, VOLCANO)]
    return group, [p["metadata"]["name"] for p in pods]


async def bound(api: client.ApiClient, namespace: str) -> dict[str, str | None]:
    core: Any = client.CoreV1Api(api)
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName")
        for p in await list_all(core.list_namespaced_pod, namespace)
    }


async def volcano_group(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    custom: Any = client.CustomObjectsApi(api)
    obj: dict[str, Any] = await custom.get_namespaced_custom_object(
        *VOLCANO_API, namespace, "podgroups", name
    )
    return obj


async def failed_note(api: client.ApiClient, namespace: str, pod: str) -> str:
    events: Any = client.EventsV1Api(api)

    async def note() -> str | None:
        for e in await list_all(events.list_namespaced_event, namespace):
            if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pod:
                return str(e["note"])
        return None

    return await wait_for(note, 30, what=f"a FailedScheduling event for {pod}")


async def test_kuberay_volcano_clusters_are_gangs(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"gpu-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(3)])
    await create(
        api, make_profile(sched, {**DEFAULT_PROFILE_SPEC, "aliases": ["volcano"]}, scheduler_name=sched)
    )

    # head + 2 workers of 8 GPUs: placed whole; the PodGroup shows vc-scheduler's phase
    group, names = await ray_cluster(api, namespace, "fits", workers=2)
    assert group["metadata"]["name"] == "ray-fits-pg" and group["spec"]["minMember"] == 3
    assert group["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"

    async def all_bound() -> dict[str, str | None] | None:
        b = await bound(api, namespace)
        return b if all(b.get(n) for n in names) else None

    placed = await wait_for(all_bound, 30, what="the RayCluster's pods bound")
    assert len({placed[n] for n in names[1:]}) == 2  # 8 GPUs each: one node per worker

    async def running() -> dict[str, Any] | None:
        status = (await volcano_group(api, namespace, "ray-fits-pg")).get("status") or {}
        return status if status.get("phase") == "Running" else None

    status = await wait_for(running, 30, what="phase Running on ray-fits-pg")
    assert status["running"] == 0  # bound, but no kubelet runs them here

    # 2 workers of 8 GPUs, room for one: nothing of it binds, and every member says why
    _, big = await ray_cluster(api, namespace, "big", workers=2)
    note = await failed_note(api, namespace, big[1])
    assert f"pod group {namespace}/ray-big-pg@scheduling.volcano.sh" in note
    assert "minResources needs" in note or "only" in note, note
    now = await bound(api, namespace)
    assert not any(now[n] for n in big)

    async def inqueue() -> str | None:
        phase = ((await volcano_group(api, namespace, "ray-big-pg")).get("status") or {}).get("phase")
        return phase if phase == "Inqueue" else None

    await wait_for(inqueue, 30, what="phase Inqueue on ray-big-pg (admitted, not placed)")

    # a Volcano queue shoal does not evaluate: refused, naming the field, never admitted
    core: Any = client.CoreV1Api(api)
    for n in big:
        await core.delete_namespaced_pod(n, namespace, grace_period_seconds=0)
    _, queued = await ray_cluster(api, namespace, "queued", workers=1, queue="research")
    note = await failed_note(api, namespace, queued[0])
    assert "uses spec.queue=research, which shoal does not evaluate" in note, note
    now = await bound(api, namespace)
    assert not any(now[n] for n in queued)
    phase = ((await volcano_group(api, namespace, "ray-queued-pg")).get("status") or {}).get("phase")
    assert phase == "Pending"


async def test_a_volcano_job_is_admitted_then_placed_whole(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """A Volcano Job (a minimal CRD) naming a shoal profile: its PodGroup, as the job controller
    creates it (``<job>-<uid>``, ``minTaskMember`` per task), is admitted (Inqueue) before any pod
    exists, which is when the job controller creates the pods; they are then placed whole."""
    api = clean
    sched = f"gpu-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(3)])
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))

    def task(name: str, replicas: int, gpus: int) -> dict[str, Any]:
        spec = make_pod("t", gpus=gpus)["spec"]
        del spec["schedulerName"]  # the Job's applies
        return {"name": name, "replicas": replicas, "template": {"spec": spec}}

    job = {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {
            "schedulerName": sched,
            "minAvailable": 3,
            "queue": "default",
            "tasks": [task("ps", 1, 0), task("worker", 2, 8)],
        },
    }
    job = await create(api, job)
    group = await create(api, volcano_job_pod_group(job))
    name = group["metadata"]["name"]
    assert group["spec"]["minTaskMember"] == {"ps": 1, "worker": 2}

    async def phase(want: str) -> str | None:
        got = ((await volcano_group(api, namespace, name)).get("status") or {}).get("phase")
        return got if got == want else None

    await wait_for(lambda: phase("Inqueue"), 30, what=f"{name} admitted before its pods exist")
    pods = [await create(api, pod) for pod in volcano_job_pods(job)]  # the job controller's turn
    names = [p["metadata"]["name"] for p in pods]
    assert names == ["train-ps-0", "train-worker-0", "train-worker-1"]

    async def all_bound() -> dict[str, str | None] | None:
        b = await bound(api, namespace)
        return b if all(b.get(n) for n in names) else None

    await wait_for(all_bound, 30, what="the Volcano Job's pods bound")
    await wait_for(lambda: phase("Running"), 30, what=f"{name} Running")
