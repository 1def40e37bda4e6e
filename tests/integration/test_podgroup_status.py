"""PodGroup status on the real API server: scheduler-plugins' phases, kept across restarts.

No kubelet runs here, so the tests play its part: they patch members' ``status.phase`` through
the pods/status subresource, as a kubelet would report containers running, finishing or failing.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_profile
from tests.integration.conftest import wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def owned(pod: dict[str, Any], job: str) -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": str(uuid.uuid4())}
    ]
    return pod


async def group(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    custom: Any = client.CustomObjectsApi(api)
    obj: dict[str, Any] = await custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name
    )
    return obj


async def wait_phase(api: client.ApiClient, namespace: str, name: str, phase: str, **counts: int) -> Any:
    async def check() -> dict[str, Any] | None:
        status = (await group(api, namespace, name)).get("status") or {}
        ok = status.get("phase") == phase and all(status.get(k) == v for k, v in counts.items())
        return status if ok else None

    try:
        return await wait_for(check, 30, what=f"PodGroup {name} {phase} {counts}")
    except TimeoutError:
        print("STATUS", (await group(api, namespace, name)).get("status"))
        raise


async def wait_bound(api: client.ApiClient, namespace: str, names: list[str]) -> None:
    core: Any = client.CoreV1Api(api)

    async def check() -> bool:
        pods = [await core.read_namespaced_pod(n, namespace) for n in names]
        return all(p.spec.node_name for p in pods)

    await wait_for(check, 30, what=f"{names} bound")


async def set_phase(api: client.ApiClient, namespace: str, pod: str, phase: str) -> None:
    core: Any = client.CoreV1Api(api)
    await core.patch_namespaced_pod_status(pod, namespace, {"status": {"phase": phase}})


def start_operator(cp: ControlPlane, log: Path, identity: str) -> OperatorProcess:
    op = OperatorProcess(cp.kubeconfig, log, identity=identity, leader_elect=False)
    op.start()
    wait_ready(op)
    return op


async def test_phases_follow_the_members_and_survive_restarts(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(3)])
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    await create(api, make_pod_group("train", namespace=namespace, min_member=3))
    await create(api, make_pod_group("flaky", namespace=namespace, min_member=2))
    members = [f"train-{i}" for i in range(3)]
    await create_many(
        api,
        [
            owned(make_pod(m, namespace=namespace, gpus=8, scheduler_name=sched, pod_group="train"), "train")
            for m in members
        ]
        + [
            make_pod(f"flaky-{i}", namespace=namespace, cpu="100m", scheduler_name=sched, pod_group="flaky")
            for i in range(2)
        ],
    )
    op = start_operator(crds, tmp_path / "first.log", "first")
    try:
        await wait_bound(api, namespace, members)  # bound, none running yet: still Scheduling
        status = await wait_phase(api, namespace, "train", "Scheduling", running=0)
        assert status["occupiedBy"] == f"{namespace}/train"
        assert "scheduled" not in status  # scheduler-plugins removed it (pruned by the CRD)
        started = status["scheduleStartTime"]
        for m in members:
            await set_phase(api, namespace, m, "Running")
        await wait_phase(api, namespace, "train", "Running", running=3)
        # one member finishes: running + succeeded still reach minMember, so the group stays Running
        await set_phase(api, namespace, members[0], "Succeeded")
        await wait_phase(api, namespace, "train", "Running", running=2, succeeded=1)
        # a member fails while the other runs: Failed, a final phase
        await wait_bound(api, namespace, ["flaky-0", "flaky-1"])
        await wait_phase(api, namespace, "flaky", "Scheduling")
        await set_phase(api, namespace, "flaky-0", "Running")
        await set_phase(api, namespace, "flaky-1", "Failed")
        await wait_phase(api, namespace, "flaky", "Failed", failed=1, running=1)
    finally:
        assert op.stop() == 0, op.tail()

    # a new operator (restart, or fail-over to another replica) must not send the status backwards:
    # the finished member is outside the pod watch, yet still counts
    op = start_operator(crds, tmp_path / "second.log", "second")
    try:
        await set_phase(api, namespace, "flaky-0", "Succeeded")  # Failed is final: stays Failed
        await asyncio.sleep(3)  # several status intervals
        status = (await group(api, namespace, "train"))["status"]
        assert (status["phase"], status["running"], status["succeeded"]) == ("Running", 2, 1)
        assert status["scheduleStartTime"] == started  # the first binding's time, not the restart's
        assert (await group(api, namespace, "flaky"))["status"]["phase"] == "Failed"
        for m in members[1:]:
            await set_phase(api, namespace, m, "Succeeded")
        await wait_phase(api, namespace, "train", "Finished", succeeded=3, running=0)
    finally:
        assert op.stop() == 0, op.tail()

    before = await group(api, namespace, "train")
    op = start_operator(crds, tmp_path / "third.log", "third")
    try:
        await asyncio.sleep(3)
        after = await group(api, namespace, "train")
        # Finished is final: not even rewritten with the same values
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    finally:
        assert op.stop() == 0, op.tail()
