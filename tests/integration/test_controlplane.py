"""Smoke tests of the real control plane built from Go modules."""

from __future__ import annotations

import os
import uuid

import pytest
from kubernetes_asyncio import client

from shoal.kube.binder import post_binding
from shoal.kube.rest import RawClient
from shoal.testing.controlplane import Binaries, ControlPlane
from shoal.testing.objects import make_node, make_pod


async def test_version_is_the_built_release(api: client.ApiClient) -> None:
    info = await client.VersionApi(api).get_code()
    assert info.git_version == Binaries.locate().kube_version
    assert info.git_tree_state == "clean"


async def test_bind_with_uid_then_conflicts(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
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


def test_processes_stop_cleanly() -> None:
    cp = ControlPlane()
    cp.start()
    pids = list(cp.pids)
    assert len(pids) == 2
    cp.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
