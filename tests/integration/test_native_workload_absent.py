"""A cluster that does not serve Kubernetes' native Workload API (before 1.37, or the gates off):
shoal starts, says it does not watch native PodGroups, and schedules gangs as before.

A control plane of its own (the shared one serves the API), started only for this module.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, apply_crds, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_profile
from tests.integration.conftest import wait_ready

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(native_workloads=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
async def api(plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(plane.kubeconfig))
    try:
        await apply_crds(api_client)
        yield api_client
    finally:
        await api_client.close()


async def test_shoal_works_without_the_native_api(
    api: client.ApiClient, plane: ControlPlane, tmp_path: Path
) -> None:
    custom: Any = client.CustomObjectsApi(api)
    with pytest.raises(client.ApiException) as refused:
        await custom.list_cluster_custom_object("scheduling.k8s.io", "v1beta1", "podgroups")
    assert refused.value.status == 404
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(2)])
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    await create(api, make_pod_group("train", min_member=2))
    await create_many(
        api, [make_pod(f"train-{i}", gpus=8, scheduler_name=sched, pod_group="train") for i in range(2)]
    )
    op = OperatorProcess(
        plane.kubeconfig, tmp_path / "operator.log", identity="no-native", leader_elect=False
    )
    op.start()
    try:
        wait_ready(op)
        core: Any = client.CoreV1Api(api)

        async def gang_bound() -> bool:
            return all(p["spec"].get("nodeName") for p in await list_all(core.list_namespaced_pod, "default"))

        await wait_for(gang_bound, 30, what="scheduler-plugins gang bound")
        assert (
            "not priming podgroups.scheduling.k8s.io (/apis/scheduling.k8s.io/v1beta1): HTTP 404"
            in op.tail(200)
        )
        assert op.alive()
    finally:
        assert op.stop() == 0, op.tail()
