"""The invariants shoal promises, checked against what the API server holds.

Used after every reliability scenario (and usable on any cluster, read-only):

* no node is over-committed: for cpu, memory, pods, ``nvidia.com/gpu`` (every resource a pod
  requests), the non-terminated pods bound to it request no more than its allocatable;
* no node holds more GPU memory (``shoal.dev/gpu-memory-gb``) than its budget, computed by the
  GPUMemory plugin's own function (:func:`shoal.plugins.gpumemory.node_gpu_memory`, default args)
  so the two never disagree: the ``gpu-memory-free-gb`` label or, without it, GPU Feature
  Discovery's ``nvidia.com/gpu.memory`` (MiB per GPU) x ``nvidia.com/gpu.count``. A node whose
  budget the plugin cannot tell is not checked;
* no pod is bound to a node that does not exist;
* no pod was bound twice (at most one ``Scheduled`` event per pod UID);
* no gang is partly bound: a PodGroup has 0 or at least ``minMember`` members bound;
* no DRA device is allocated twice: two ResourceClaims' allocations never name the same
  (driver, pool, device), unless the device allows multiple allocations (each result then
  carries a ``shareID``) or a claim has admin access.

Every violation is one sentence that names the node, pod or gang concerned.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodGroupInfo, PodInfo
from shoal.core.state.volcano import volcano_pod_group
from shoal.core.state.workloads import native_pod_group
from shoal.kube.listing import list_all
from shoal.kube.wire import LIVE_PODS_SELECTOR, PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION
from shoal.plugins import gpumemory

GPU_LABEL = gpumemory.DEFAULT_LABEL


def gpu_memory_budgets(nodes: dict[str, NodeSpec]) -> dict[str, tuple[float, str]]:
    """Per node with known GPU memory: (GB, where the figure came from), by GPUMemory's rule."""
    table = NodeTable(capacity=len(nodes))
    for spec in nodes.values():
        table.set_node(spec)
    total, _ = gpumemory.node_gpu_memory(table, gpumemory.Args())
    label, _ = table.numeric_label(GPU_LABEL)
    out: dict[str, tuple[float, str]] = {}
    for name, row in table.index.items():
        gb = float(total[row])
        if math.isnan(gb):
            continue
        source = (
            f"label {GPU_LABEL}"
            if not math.isnan(label[row])
            else f"GFD {gpumemory.GFD_MEMORY} x {gpumemory.GFD_COUNT}"
        )
        out[name] = (gb, source)
    return out


async def check_invariants(api: client.ApiClient, *, gangs: bool = True) -> list[str]:
    """Every violation found, as readable sentences (empty: all invariants hold)."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    events: Any = client.EventsV1Api(api)
    nodes = {n["metadata"]["name"]: NodeSpec.from_dict(n) for n in await list_all(core.list_node)}
    pods = [
        PodInfo.from_dict(p)
        for p in await list_all(core.list_pod_for_all_namespaces, field_selector=LIVE_PODS_SELECTOR)
    ]
    problems: list[str] = []
    used: dict[str, Counter[str]] = {}
    gpu_memory: dict[str, float] = {}
    for pod in pods:
        if not pod.bound:
            continue
        if pod.node_name not in nodes:
            problems.append(f"pod {pod.key} is bound to missing node {pod.node_name}")
            continue
        usage = used.setdefault(pod.node_name, Counter())
        usage.update(pod.requests)
        usage["pods"] += 1
        if pod.gpu_memory_gb:
            gpu_memory[pod.node_name] = gpu_memory.get(pod.node_name, 0.0) + pod.gpu_memory_gb
    for name, usage in used.items():
        allocatable = nodes[name].allocatable
        for resource, amount in usage.items():
            limit = allocatable.get(resource, 0)
            if amount > limit:
                problems.append(f"node {name} is over-committed on {resource}: {amount} requested > {limit}")
    budgets = gpu_memory_budgets(nodes) if gpu_memory else {}
    for name, gb in gpu_memory.items():
        if name not in budgets:
            continue
        budget, source = budgets[name]
        if gb > budget + 1e-9:
            problems.append(
                f"node {name} holds {gb:g} GB of GPU memory requests > its budget {budget:g} GB ({source})"
            )
    scheduled: Counter[str] = Counter()
    regarding: dict[str, str] = {}
    for e in await list_all(events.list_event_for_all_namespaces):
        if e.get("reason") != "Scheduled":
            continue
        ref = e.get("regarding") or {}
        uid = str(ref.get("uid"))
        scheduled[uid] += 1
        regarding[uid] = f"{ref.get('namespace')}/{ref.get('name')}"
    for uid, count in scheduled.items():
        if count > 1:
            problems.append(f"pod {regarding[uid]} (uid {uid}) was bound {count} times (Scheduled events)")
    if gangs:
        problems.extend(await partly_bound_gangs(custom, pods))
    problems.extend(await doubly_allocated_devices(custom))
    return problems


async def doubly_allocated_devices(custom: Any) -> list[str]:
    """Devices named by the allocations of more than one ResourceClaim (shared and admin-access
    results excepted: those are allowed to repeat)."""
    holders: dict[tuple[str, str, str], list[str]] = {}
    for claim in await list_all(custom.list_cluster_custom_object, "resource.k8s.io", "v1", "resourceclaims"):
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or ():
            if result.get("shareID") or result.get("adminAccess"):
                continue
            device = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            holders.setdefault(device, []).append(key)
    return [
        f"device {'/'.join(device)} is allocated to {len(claims)} claims: {', '.join(sorted(claims))}"
        for device, claims in holders.items()
        if len(claims) > 1
    ]


async def partly_bound_gangs(custom: Any, pods: list[PodInfo]) -> list[str]:
    """Gangs with some but fewer than ``minMember`` members bound while others wait."""
    infos: list[PodGroupInfo] = []
    apis = (
        (PODGROUP_GROUP, PODGROUP_VERSION, PodGroupInfo.from_dict),
        ("scheduling.k8s.io", "v1beta1", native_pod_group),
        ("scheduling.volcano.sh", "v1beta1", volcano_pod_group),
    )
    for api_group, version, decode in apis:
        try:
            groups = await list_all(custom.list_cluster_custom_object, api_group, version, PODGROUP_PLURAL)
        except (client.ApiException, aiohttp.ClientResponseError):  # not installed / not served (a
            # group the API server does not serve at all answers 404 in text/plain)
            groups = []
        infos += [decode(obj) for obj in groups]
    problems: list[str] = []
    for group in infos:
        if not group.gang:
            continue
        members = [p for p in pods if p.group_key == group.key]
        placed = [p.name for p in members if p.bound]
        pending = [p.name for p in members if not p.bound]
        if 0 < len(placed) < group.min_member and pending:
            problems.append(
                f"gang {group.key} is partly bound: {len(placed)} of {group.min_field} {group.min_member} "
                f"({', '.join(sorted(placed))}), {len(pending)} pending ({', '.join(sorted(pending))})"
            )
    return problems
