"""The invariant checker finds each violation it promises to find.

Every reliability scenario ends with :func:`check_invariants`; if it always returned ``[]`` they
would all still pass. Here each violation is built directly through the API (nodes and pods
created, pods bound with ``pods/binding`` and their UID, events and PodGroups written by hand),
with no shoal running, and the checker must name it. The checker reads the whole cluster, so every
case starts and ends with no nodes, pods, ResourceClaims, PodGroups or events anywhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.kube.binder import post_binding
from shoal.kube.rest import RawClient
from shoal.kube.wire import micro_time
from shoal.testing.cluster import create, list_all
from shoal.testing.invariants import check_invariants
from shoal.testing.objects import make_node, make_pod, make_pod_group

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


async def _wipe(api: client.ApiClient) -> None:
    """No pods, nodes, PodGroups or events in any namespace (there are no controllers to do it)."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    events: Any = client.EventsV1Api(api)
    for ns in await list_all(core.list_namespace):
        name = ns["metadata"]["name"]
        await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        await events.delete_collection_namespaced_event(name)
        await custom.delete_collection_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", name, "podgroups"
        )
    await core.delete_collection_node()


@pytest.fixture
async def empty(clean: client.ApiClient) -> AsyncIterator[client.ApiClient]:
    await _wipe(clean)
    assert await check_invariants(clean) == []
    yield clean
    await _wipe(clean)  # leave no violation behind for the tests that run next


async def place(api: client.ApiClient, node: str, pod: dict[str, Any]) -> dict[str, Any]:
    """Create ``pod`` and bind it to ``node`` as a scheduler would (a Binding with its UID)."""
    created = await create(api, pod)
    meta = created["metadata"]
    code, message = await post_binding(RawClient(api), meta["namespace"], meta["name"], meta["uid"], node)
    assert code == 201, message
    return created


async def scheduled_event(api: client.ApiClient, pod: dict[str, Any], node: str) -> None:
    """A ``Scheduled`` event for ``pod``, named and shaped as the reporter writes one."""
    meta = pod["metadata"]
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": meta["namespace"]},
        "eventTime": micro_time(),
        "reportingController": "gpu-scheduler",
        "reportingInstance": "gpu-scheduler-test",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
    }
    events: Any = client.EventsV1Api(api)
    resp = await events.create_namespaced_event(meta["namespace"], body, _preload_content=False)
    try:
        assert resp.status == 201, await resp.text()
    finally:
        resp.release()


async def test_clean_cluster_has_no_violation(empty: client.ApiClient, namespace: str) -> None:
    """Full nodes, GPU memory used up to the label or the GFD budget, one event per pod and a whole
    gang: all fine."""
    api = empty
    await create(api, make_node("full", cpu="4", gpus=2, gpu_memory_free_gb=40))
    await create(api, make_node("gang-node", cpu="32", gpus=8))
    await create(api, make_node("gfd", gpus=2, gpu_memory_mib=40960))  # GFD only: 2 x 40 GiB = 80 GB
    await create(api, make_pod_group("gang", namespace=namespace, min_member=3))
    pods = [
        await place(api, "full", make_pod("a", namespace=namespace, cpu="3", gpus=1, gpu_memory_gb=30)),
        await place(api, "full", make_pod("b", namespace=namespace, cpu="1", gpus=1, gpu_memory_gb=10)),
        await place(api, "gfd", make_pod("c", namespace=namespace, gpus=1, gpu_memory_gb=50)),
        await place(api, "gfd", make_pod("d", namespace=namespace, gpus=1, gpu_memory_gb=30)),
    ]
    for i in range(3):
        member = make_pod(f"g-{i}", namespace=namespace, gpus=2, pod_group="gang")
        pods.append(await place(api, "gang-node", member))
    for pod in pods:
        await scheduled_event(api, pod, pod["spec"].get("nodeName") or "")
    await create(api, make_pod("pending", namespace=namespace, gpus=1))
    assert await check_invariants(api) == []


async def test_cpu_over_commit_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    await create(api, make_node("small", cpu="4"))
    await place(api, "small", make_pod("p1", namespace=namespace, cpu="3"))
    await place(api, "small", make_pod("p2", namespace=namespace, cpu="3"))
    assert await check_invariants(api) == ["node small is over-committed on cpu: 6000 requested > 4000"]


async def test_gpu_over_commit_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    await create(api, make_node("two-gpus", gpus=2))
    await place(api, "two-gpus", make_pod("p1", namespace=namespace, gpus=2))
    await place(api, "two-gpus", make_pod("p2", namespace=namespace, gpus=1))
    assert await check_invariants(api) == [
        "node two-gpus is over-committed on nvidia.com/gpu: 3 requested > 2"
    ]


async def test_gpu_memory_over_the_label_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    # GFD says 8 x 80 GiB, but the label is what the scheduler honours: 40 GB
    await create(api, make_node("m", gpus=8, gpu_memory_free_gb=40))
    await place(api, "m", make_pod("p1", namespace=namespace, gpus=1, gpu_memory_gb=25))
    await place(api, "m", make_pod("p2", namespace=namespace, gpus=1, gpu_memory_gb=25))
    assert await check_invariants(api) == [
        "node m holds 50 GB of GPU memory requests > its budget 40 GB (label gpu-memory-free-gb)"
    ]


async def test_gpu_memory_over_the_gfd_budget_is_reported(empty: client.ApiClient, namespace: str) -> None:
    """Without the label, GPUMemory budgets GFD's 4 x 16384 MiB = 64 GB; so does the checker."""
    api = empty
    await create(api, make_node("gfd", gpus=4, gpu_memory_mib=16384))
    await place(api, "gfd", make_pod("p1", namespace=namespace, gpus=1, gpu_memory_gb=40))
    await place(api, "gfd", make_pod("p2", namespace=namespace, gpus=1, gpu_memory_gb=30))
    assert await check_invariants(api) == [
        "node gfd holds 70 GB of GPU memory requests > its budget 64 GB "
        "(GFD nvidia.com/gpu.memory x nvidia.com/gpu.count)"
    ]


async def test_pod_on_a_missing_node_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    await create(api, make_node("gone", gpus=1))
    await place(api, "gone", make_pod("orphan", namespace=namespace, gpus=1))
    await client.CoreV1Api(api).delete_node("gone")
    assert await check_invariants(api) == [f"pod {namespace}/orphan is bound to missing node gone"]


async def test_pod_bound_twice_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    await create(api, make_node("n"))
    twice = await place(api, "n", make_pod("twice", namespace=namespace))
    once = await place(api, "n", make_pod("once", namespace=namespace))
    await scheduled_event(api, twice, "n")
    await scheduled_event(api, twice, "n")
    await scheduled_event(api, once, "n")
    uid = twice["metadata"]["uid"]
    assert await check_invariants(api) == [
        f"pod {namespace}/twice (uid {uid}) was bound 2 times (Scheduled events)"
    ]


async def test_partly_bound_gang_is_reported(empty: client.ApiClient, namespace: str) -> None:
    api = empty
    await create(api, make_node("n", gpus=8))
    await create(api, make_pod_group("gang", namespace=namespace, min_member=3, schedule_timeout_seconds=1))
    for i in range(3):
        await create(api, make_pod(f"g-{i}", namespace=namespace, gpus=1, pod_group="gang"))
    created = (await client.CoreV1Api(api).read_namespaced_pod("g-0", namespace)).metadata
    code, message = await post_binding(RawClient(api), namespace, "g-0", created.uid, "n")
    assert code == 201, message
    await asyncio.sleep(1.5)  # past the gang's scheduleTimeoutSeconds: no member is still on its way
    assert await check_invariants(api) == [
        f"gang {namespace}/gang is partly bound: 1 of minMember 3 (g-0), 2 pending (g-1, g-2)"
    ]
    assert await check_invariants(api, gangs=False) == []


async def allocated_claim(
    custom: Any, namespace: str, name: str, device: str, *, share_id: str | None = None
) -> None:
    """A ResourceClaim allocated one device of pool ``n``, as a scheduler writes it."""
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }
    made = await custom.create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims", body
    )
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "n", "device": device}
    if share_id is not None:
        result["shareID"] = share_id
    made["status"] = {"allocation": {"devices": {"results": [result]}}}
    await custom.replace_namespaced_custom_object_status(
        "resource.k8s.io", "v1", namespace, "resourceclaims", name, made
    )


async def test_a_device_allocated_to_two_claims_is_reported(empty: client.ApiClient, namespace: str) -> None:
    custom: Any = client.CustomObjectsApi(empty)
    await allocated_claim(custom, namespace, "a", "gpu-0")
    await allocated_claim(custom, namespace, "b", "gpu-1")
    assert await check_invariants(empty) == []
    # a device that allows multiple allocations: each result carries its own share ID
    await allocated_claim(custom, namespace, "s1", "gpu-2", share_id="5f0c7a21-0000-4000-8000-000000000001")
    await allocated_claim(custom, namespace, "s2", "gpu-2", share_id="5f0c7a21-0000-4000-8000-000000000002")
    assert await check_invariants(empty) == []
    await allocated_claim(custom, namespace, "c", "gpu-0")
    assert await check_invariants(empty) == [
        f"device gpu.example.com/n/gpu-0 is allocated to 2 claims: {namespace}/a, {namespace}/c"
    ]
