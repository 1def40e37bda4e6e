"""Fixtures for tests against the real kube-apiserver: clients, CRDs, namespaces, the operator."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from shoal.testing.cluster import OperatorProcess, apply_crds, create, list_all
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kwok import KwokProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)


async def _with_api(cp: ControlPlane, fn: Any) -> Any:
    api = await config.new_client_from_config(config_file=str(cp.kubeconfig))
    try:
        return await fn(api)
    finally:
        await api.close()


def run_with_api(cp: ControlPlane, fn: Any) -> Any:
    """Run ``await fn(api)`` on a private loop (for sync, wider-scoped fixtures)."""
    return asyncio.run(_with_api(cp, fn))


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> ControlPlane:
    run_with_api(control_plane, apply_crds)
    return control_plane


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    try:
        yield api_client
    finally:
        await api_client.close()


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    await client.CoreV1Api(api).delete_namespace(name)


async def _wipe(api: client.ApiClient) -> None:
    """Every test starts with no nodes, no pods, no ResourceClaims and no profiles. Without
    controllers a deleted namespace keeps its pods, and a bound pod waits for a kubelet: delete
    them at once. A claim a scheduler allocated keeps its delete-protection finalizer until the
    resourceclaim controller (not running here) removes it: the wipe removes it itself, so no
    test's allocations (several tests allocate the same node names' devices) outlive it."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    for ns in await list_all(core.list_namespace):
        await core.delete_collection_namespaced_pod(ns["metadata"]["name"], grace_period_seconds=0)
    for claim in await list_all(custom.list_cluster_custom_object, "resource.k8s.io", "v1", "resourceclaims"):
        meta = claim["metadata"]
        args = ("resource.k8s.io", "v1", meta["namespace"], "resourceclaims", meta["name"])
        try:
            if meta.get("finalizers"):
                await custom.patch_namespaced_custom_object(
                    *args, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
                )
            await custom.delete_namespaced_custom_object(*args)
        except client.ApiException as exc:
            if exc.status != 404:  # gone meanwhile
                raise
    await core.delete_collection_node()
    for sp in await list_all(
        custom.list_cluster_custom_object, "shoal.dev", "v1alpha1", "schedulingprofiles"
    ):
        await custom.delete_cluster_custom_object(
            "shoal.dev", "v1alpha1", "schedulingprofiles", sp["metadata"]["name"]
        )


@pytest.fixture
async def clean(api: client.ApiClient, crds: ControlPlane) -> client.ApiClient:
    await _wipe(api)
    return api


def wait_ready(op: OperatorProcess, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not op.alive():
            raise RuntimeError(f"operator exited early:\n{op.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"operator not ready in {timeout} s:\n{op.tail()}")


def run_operator(cp: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """An operator for the tests of one module (the body of the ``operator`` fixtures)."""
    log = Path(tmp_path_factory.mktemp("operator")) / "operator.log"
    op = OperatorProcess(cp.kubeconfig, log, identity="op-main", lease_name=f"shoal-{uuid.uuid4().hex[:6]}")
    op.start()
    try:
        wait_ready(op)
        yield op
    finally:
        code = op.stop()
        if code not in (0, None):
            print(op.tail())


@pytest.fixture(scope="module")
def operator(crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    yield from run_operator(crds, tmp_path_factory)


@pytest.fixture(scope="session")
def thirdparty_crds(crds: ControlPlane) -> ControlPlane:
    """Volcano's PodGroup CRD and minimal Volcano Job and RayCluster CRDs, as those projects install them
    (``shoal.testing.thirdparty``); once installed they stay for the session."""
    from shoal.testing.thirdparty import ray_cluster_crd, volcano_job_crd, volcano_podgroup_crd

    foreign = [volcano_podgroup_crd(), volcano_job_crd(), ray_cluster_crd()]
    run_with_api(crds, lambda api: apply_crds(api, crds=foreign))
    return crds


@pytest.fixture(scope="module")
def kwok(crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KwokProcess]:
    """KWOK as the kubelets of nodes annotated ``kwok.x-k8s.io/node: fake`` (pods run, deleted
    pods go), for the tests of one module."""
    with KwokProcess(crds.kubeconfig, Path(tmp_path_factory.mktemp("kwok"))) as k:
        yield k
