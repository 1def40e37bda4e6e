"""Smoke tests of the real control plane built from Go modules."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from shoal.kube.binder import post_binding
from shoal.kube.informer import LISTED, Informer
from shoal.kube.kinds import KIND_PODS
from shoal.kube.listing import list_objects
from shoal.kube.rest import RawClient
from shoal.kube.wire import pod_uid
from shoal.testing.controlplane import Binaries, ControlPlane, python_env
from shoal.testing.objects import make_node, make_pod


async def test_version_is_the_built_release(api: client.ApiClient) -> None:
    info = await client.VersionApi(api).get_code()
    assert info.git_version == Binaries.locate().kube_version
    assert info.git_tree_state == "clean"


async def test_bind_with_uid_then_conflicts(api: client.ApiClient, namespace: str) -> None:
    core: Any = client.CoreV1Api(api)
    raw = RawClient(api)
    node_name = f"node-{uuid.uuid4().hex[:6]}"
    await core.create_node(make_node(node_name, gpus=8, gpu_memory_free_gb=40, zone="zone-a", rack="r1"))
    node = await core.read_node(node_name)
    assert node.status.allocatable["nvidia.com/gpu"] == "8"  # status kept on create, as a kubelet sends it
    assert node.metadata.labels["nvidia.com/gpu.count"] == "8"
    pod = await core.create_namespaced_pod(namespace, make_pod("p", namespace=namespace, gpus=1))

    code, message = await post_binding(raw, namespace, "p", str(uuid.uuid4()), node_name)
    assert code == 409
    assert "UID" in message
    assert (await core.read_namespaced_pod("p", namespace)).spec.node_name is None

    assert await post_binding(raw, namespace, "p", pod.metadata.uid, node_name) == (201, "")
    bound = await core.read_namespaced_pod("p", namespace)
    assert bound.spec.node_name == node_name

    code, message = await post_binding(raw, namespace, "p", pod.metadata.uid, node_name)
    assert code == 409
    assert "already assigned" in message
    await core.delete_node(node_name)


async def test_a_metadata_only_listing_gives_the_identities_of_a_whole_one(
    api: client.ApiClient, namespace: str
) -> None:
    """The re-list check asks the API server for metadata alone: same objects, same identities, no
    spec or status to decode; and it still finds a pod deleted behind the watch's back."""
    core: Any = client.CoreV1Api(api)
    raw = RawClient(api)
    for i in range(3):
        await core.create_namespaced_pod(namespace, make_pod(f"p{i}", namespace=namespace))
    path = f"/api/v1/namespaces/{namespace}/pods"
    whole = await list_objects(raw, path, field_selector=KIND_PODS.field_selector)
    slim = await list_objects(raw, path, field_selector=KIND_PODS.field_selector, metadata_only=True)
    assert sorted(map(pod_uid, slim)) == sorted(map(pod_uid, whole)) and len(slim) == 3
    assert all("spec" not in o and "status" not in o and o["metadata"]["name"] for o in slim)
    assert all("spec" in o for o in whole)

    gone: list[str] = []
    informer = Informer()

    async def ignore(event: Any) -> None:
        pass

    informer.watch(KIND_PODS, ignore, gone=gone.append)
    for obj in whole:
        await informer.deliver(KIND_PODS, LISTED, obj)
    await core.delete_namespaced_pod("p1", namespace, grace_period_seconds=0)
    await informer.relist_check(raw)
    assert gone == [pod_uid(next(o for o in whole if o["metadata"]["name"] == "p1"))]


def test_processes_stop_cleanly() -> None:
    cp = ControlPlane()
    cp.start()
    pids = list(cp.pids)
    assert len(pids) == 2
    cp.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.timeout(480)
def test_cluster_up_prints_a_working_kubeconfig_and_down_stops_it(tmp_path: Path) -> None:
    # `up` and `down` give up after their own 120 s; the 200 s here only catches a hang
    directory = tmp_path / "cluster"
    up = subprocess.run(
        [sys.executable, "-m", "shoal.testing.cluster_cli", "up", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=200,
        env=python_env(),
    )
    try:
        assert up.returncode == 0, up.stderr
        line = next(x for x in up.stdout.splitlines() if x.startswith("export KUBECONFIG="))
        kubeconfig = line.split("=", 1)[1]
        state = json.loads((directory / "state.json").read_text())
        pids = [state["supervisor"], *state["pids"]]

        async def list_nodes() -> list[str]:
            api = await config.new_client_from_config(config_file=kubeconfig)
            try:
                core: Any = client.CoreV1Api(api)
                await core.create_node(make_node("from-cluster-up"))
                return [n.metadata.name for n in (await core.list_node()).items]
            finally:
                await api.close()

        assert asyncio.run(list_nodes()) == ["from-cluster-up"]
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "shoal.testing.cluster_cli", "down", "--dir", str(directory)],
            capture_output=True,
            text=True,
            timeout=200,
            env=python_env(),
        )
    assert "control plane stopped" in down.stdout
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
