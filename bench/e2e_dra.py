"""The DRA scenario of ``make bench``, shoal and kube-scheduler side by side (issue 13).

1,000 nodes (scheduler_perf's node-default), each with a ResourceSlice of 8 GPUs as NVIDIA's DRA
driver publishes them (productName, uuid, pcieRoot, memory), the DeviceClass ``gpu.nvidia.com``
(a CEL selector on the driver) and a ResourceClaimTemplate for one GPU; kube-controller-manager's
resourceclaim controller runs, so each pod's claim is made from the template, as in a cluster.
Then 5,000 pods, each with that template, are created at once. Measured: pods bound per second,
first created to last bound (``dra_ratio`` = shoal ÷ kube-scheduler); checked: every bound pod's
claim allocated on its node, no bound pod without a claim and no device in two allocations.
``measure`` and ``check`` serve the other DRA scenarios too (bench/e2e_dra_kinds.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from kubernetes_asyncio import client

from bench.e2e_workloads import scheduler_perf_node
from bench.harness import Harness
from shoal.testing.cluster import list_all

GPU = "gpu.nvidia.com"
GROUP, VERSION = "resource.k8s.io", "v1"
API = f"{GROUP}/{VERSION}"
TEMPLATE = "one-gpu"
#: the annotation on the claim a scheduler makes for a pod's extended resources backed by DRA
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"


def gpu_slice(node: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                "uuid": {"string": f"GPU-{node}-{i}"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 4:02x}"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(8)
    ]
    spec = {"driver": GPU, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {**spec, "devices": devices},
    }


def cluster_objects(nodes: int, namespace: str) -> list[dict[str, Any]]:
    """The DeviceClass, the template, the nodes and their slices (created before the scheduler)."""
    cls = {
        "apiVersion": API,
        "kind": "DeviceClass",
        "metadata": {"name": GPU},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
    }
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU}}
    template = {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    names = [f"node-{i:05d}" for i in range(nodes)]
    return [cls, template, *(scheduler_perf_node(n) for n in names), *(gpu_slice(n) for n in names)]


def dra_pods(count: int, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"dra-{i:06d}", "namespace": namespace},
            "spec": {
                "schedulerName": scheduler_name,
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "500Mi"},
                            "claims": [{"name": "gpu"}],
                        },
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            },
        }
        out.append(pod)
    return out


async def run(b: Harness, api: client.ApiClient, namespace: str, pods: int, timeout: float) -> dict[str, Any]:
    return await measure(b, api, namespace, dra_pods(pods, namespace, b.scheduler_name), timeout, "dra")


#: what one allocation result (``status.allocation.devices.results[]``) takes of what is limited
#: in its pool, keyed as the limits are (bench/e2e_dra_kinds.py: counters, shared capacity)
Usage = Callable[[Mapping[str, Any]], Mapping[str, Decimal]]


async def measure(
    b: Harness,
    api: client.ApiClient,
    namespace: str,
    objs: list[dict[str, Any]],
    timeout: float,
    label: str,
    *,
    extended: bool = False,
    usage: Usage | None = None,
    limits: Mapping[str, Decimal] | None = None,
) -> dict[str, Any]:
    """The pods ``objs`` created at once while the scheduler runs: pods bound per second, first
    created to last bound, and ``check`` of the claims."""
    first = time.monotonic()
    created = await b.create_all(objs, label=label)
    names = list(created)
    ok = await b.wait_bound(names, timeout, label)
    times = b.bound_times()
    bound = [times[n] for n in names if n in times]
    last = max(bound) if bound else time.monotonic()
    return {
        "pods": len(objs),
        "all_bound": ok,
        "bound": len(bound),
        "seconds": last - first,
        "pods_per_s": len(bound) / max(last - first, 1e-9),
        **await check(api, namespace, b.bound_nodes(), extended=extended, usage=usage, limits=limits),
    }


async def check(
    api: client.ApiClient,
    namespace: str,
    nodes: Mapping[str, str],
    *,
    extended: bool = False,
    usage: Usage | None = None,
    limits: Mapping[str, Decimal] | None = None,
) -> dict[str, Any]:
    """Every bound pod's claim allocated on its node (``claims_misplaced``: a bound pod's claim
    unallocated or in another node's pool); ``claims_missing``: bound pods no claim belongs to;
    no device (nor share of a shared device) in two allocations. Pools are named after their node.
    ``extended``: only the claims the scheduler made for extended resources count (annotated
    ``resource.kubernetes.io/extended-resource-claim: "true"``). With ``usage`` and ``limits``,
    ``overdrawn``: how many limits of a pool (a counter, a shared device's capacity) its
    allocations took more of than there is."""
    custom: Any = client.CustomObjectsApi(api)
    claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, namespace, "resourceclaims")
    used: list[tuple[str, str, str]] = []
    taken: dict[tuple[str, str], Decimal] = {}
    misplaced = 0
    owners: set[str] = set()
    for c in claims:
        if extended and (c["metadata"].get("annotations") or {}).get(EXTENDED_CLAIM) != "true":
            continue
        allocation = (c.get("status") or {}).get("allocation")
        owner = next(
            (o["name"] for o in c["metadata"].get("ownerReferences") or () if o["kind"] == "Pod"), ""
        )
        owners.add(owner)
        if not allocation:
            misplaced += owner in nodes
            continue
        results = allocation["devices"]["results"]
        used += [(r["pool"], r["device"], r.get("shareID") or "") for r in results]
        misplaced += owner in nodes and {r["pool"] for r in results} != {nodes[owner]}
        for r in results:
            for key, amount in (usage(r) if usage is not None else {}).items():
                taken[r["pool"], key] = taken.get((r["pool"], key), Decimal(0)) + amount
    out: dict[str, Any] = {
        "devices_twice": len(used) - len(set(used)),
        "claims_misplaced": misplaced,
        "claims_missing": sum(1 for pod in nodes if pod not in owners),
    }
    if usage is not None and limits is not None:
        out["overdrawn"] = sum(
            1 for (_, key), amount in taken.items() if amount > limits.get(key, Decimal(0))
        )
    return out
