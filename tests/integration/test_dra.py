"""DRA on the real API server (resource.k8s.io/v1), with the real resourceclaim controller
(kube-controller-manager of the same release) making claims from templates. The tests publish
ResourceSlices as NVIDIA's DRA driver would (8 GPUs per node: productName, uuid, pcieRoot, memory);
no kubelet, no driver.

The scenario: n1 has 8 free GPUs, n2 has 8 of which someone else already allocated 7. Ten pods,
each with a one-GPU claim from a template: every claim ends allocated on its pod's node and
reserved for it, 8 pods fill n1, one takes n2's last GPU, the tenth stays pending with a clear
reason, and no device is ever in two allocations (the other allocation included). Run with shoal,
and with kube-scheduler 1.37 (its DynamicResources plugin) as the reference: the same pods are
placed on the same nodes and the same one waits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.core.state.quantity import parse_quantity
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubecontrollermanager import DRA_CONTROLLERS, KubeControllerManagerProcess
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_native_pod_group, make_node, make_pod, make_pod_group, make_profile

pytestmark = pytest.mark.slow

GPU = "gpu.nvidia.com"
GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture(scope="module")
def claim_controller(
    crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllerManagerProcess]:
    """kube-controller-manager with only the resourceclaim controller, for this module."""
    kcm = KubeControllerManagerProcess(
        crds.kubeconfig, Path(tmp_path_factory.mktemp("kcm-dra")), controllers=DRA_CONTROLLERS
    )
    with kcm:
        yield kcm


def gpu_slice(
    node: str, run: str, product: str = "NVIDIA A100-SXM4-80GB", memory: str = "80Gi"
) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": product},
                "uuid": {"string": f"GPU-{run}-{node}-{i}"},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 4:02x}"},
            },
            "capacity": {"memory": {"value": memory}},
        }
        for i in range(8)
    ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{run}"},
        "spec": {
            "driver": GPU,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


async def ensure_class(custom: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeviceClass",
        "metadata": {"name": GPU},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
    }
    try:
        await custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise


async def allocated_by_someone_else(custom: Any, namespace: str, node: str, devices: list[str]) -> None:
    """A claim allocated and reserved as another scheduler would leave it."""
    name = "theirs"
    spec = {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": len(devices)}}]}
    }
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }
    made = await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    results = [{"request": "gpu", "driver": GPU, "pool": node, "device": d} for d in devices]
    made["status"] = {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [field]}]},
        },
        # a consumer kind the resourceclaim controller does not check, so it keeps the reservation
        "reservedFor": [
            {
                "apiGroup": "batch.example.com",
                "resource": "trainers",
                "name": "elsewhere",
                "uid": str(uuid.uuid4()),
            }
        ],
    }
    await custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "resourceclaims", name, made
    )


def gpu_pod(name: str, namespace: str, scheduler: str, template: str) -> dict[str, Any]:
    pod = make_pod(name, namespace=namespace, scheduler_name=scheduler, gpus=0)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return pod


async def clear_slices(custom: Any) -> None:
    """Slices are cluster-scoped and outlive a test's namespace: start from none."""
    for s in await list_all(custom.list_cluster_custom_object, GROUP, VERSION, "resourceslices"):
        await custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", s["metadata"]["name"])


async def scenario(api: client.ApiClient, namespace: str, scheduler: str) -> dict[str, dict[str, Any]]:
    """Publish the slices and the other allocation, create the ten pods for ``scheduler``; returns
    the pods once 9 are bound (name -> pod)."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    await clear_slices(custom)
    await ensure_class(custom)
    await create_many(api, [make_node(n, gpus=0) for n in ("n1", "n2")])
    for node in ("n1", "n2"):
        await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(node, run))
    await allocated_by_someone_else(custom, namespace, "n2", [f"gpu-{i}" for i in range(7)])
    template = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}}},
    }
    await custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "resourceclaimtemplates", template
    )
    names = [f"infer-{i}" for i in range(10)]
    await create_many(api, [gpu_pod(n, namespace, scheduler, "one-gpu") for n in names])

    async def nine_bound() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, namespace)}
        bound = {n: p for n, p in pods.items() if p["spec"].get("nodeName")}
        return pods if len(bound) == 9 else None

    pods: dict[str, dict[str, Any]] = await wait_for(
        nine_bound, 120, what=f"9 of 10 DRA pods bound by {scheduler}"
    )
    return pods


async def check_allocations(api: client.ApiClient, namespace: str, pods: dict[str, dict[str, Any]]) -> None:
    """Every bound pod's claim allocated on its node and reserved for it; the pending pod's claim
    not allocated; no device twice."""
    custom: Any = client.CustomObjectsApi(api)
    nodes = sorted(p["spec"]["nodeName"] for p in pods.values() if p["spec"].get("nodeName"))
    assert nodes == ["n1"] * 8 + ["n2"]

    async def settled() -> list[dict[str, Any]] | None:
        claims = await list_all(
            custom.list_namespaced_custom_object, GROUP, VERSION, namespace, "resourceclaims"
        )
        done = [c for c in claims if (c.get("status") or {}).get("allocation")]
        return claims if len(done) == 10 else None  # the other claim and the nine pods'

    claims = await wait_for(settled, 60, what="the claims' allocations written")
    by_owner = {}
    used: list[tuple[str, str]] = []
    for c in claims:
        owner = next((o for o in c["metadata"].get("ownerReferences") or () if o["kind"] == "Pod"), None)
        if owner is not None:
            by_owner[owner["name"]] = c
        allocation = (c.get("status") or {}).get("allocation")
        if allocation:
            used += [(r["pool"], r["device"]) for r in allocation["devices"]["results"]]
    assert len(used) == len(set(used)) == 7 + 9, used  # the other allocation's 7 and ours
    for name, p in pods.items():
        status = by_owner[name].get("status") or {}
        if not p["spec"].get("nodeName"):
            assert not status.get("allocation")
            continue
        results = status["allocation"]["devices"]["results"]
        assert [r["pool"] for r in results] == [p["spec"]["nodeName"]]
        terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert terms[0]["matchFields"][0]["values"] == [p["spec"]["nodeName"]]
        assert [r["uid"] for r in status["reservedFor"]] == [p["metadata"]["uid"]]
        assert "resource.kubernetes.io/delete-protection" in by_owner[name]["metadata"]["finalizers"]


async def test_shoal_allocates_template_claims_fills_a_node_and_never_hands_out_a_device_twice(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
) -> None:
    api = clean
    ev: Any = client.EventsV1Api(api)
    sched = f"dra-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    pods = await scenario(api, namespace, sched)
    await check_allocations(api, namespace, pods)
    pending = next(n for n, p in pods.items() if not p["spec"].get("nodeName"))

    async def refused() -> str | None:
        notes = [
            e["note"]
            for e in await list_all(ev.list_namespaced_event, namespace)
            if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pending
        ]
        return notes[-1] if notes else None

    note = await wait_for(refused, 60, what=f"a FailedScheduling event for {pending}")
    assert "cannot allocate all claims" in note, note
    # a pod on n1 goes away: the resourceclaim controller deallocates and deletes its claim, and
    # that change wakes the pending pod, which takes the freed GPU
    core: Any = client.CoreV1Api(api)
    gone = next(n for n, p in pods.items() if p["spec"].get("nodeName") == "n1")
    await core.delete_namespaced_pod(gone, namespace, grace_period_seconds=0)

    async def pending_bound() -> str | None:
        node: str | None = (await core.read_namespaced_pod(pending, namespace)).spec.node_name
        return node

    assert await wait_for(pending_bound, 60, what=f"{pending} bound once a GPU is freed") == "n1"
    await clear_slices(client.CustomObjectsApi(api))


async def test_kube_scheduler_places_the_same_pods_the_same_way(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """The reference: kube-scheduler 1.37 with its default profile (DynamicResources on) gives the
    outcome the shoal test asserts, so the two agree."""
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        pods = await scenario(clean, namespace, "default-scheduler")
        await check_allocations(clean, namespace, pods)
    await clear_slices(client.CustomObjectsApi(clean))


def direct_claim(
    name: str, count: int = 1, selectors: tuple[str, ...] = (), **devices: Any
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": GPU, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}], **devices}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


async def test_cel_selectors_pick_nodes_match_attribute_keeps_a_pcie_root_broken_cel_is_named(
    clean: client.ApiClient, crds: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ev: Any = client.EventsV1Api(api)
    run = uuid.uuid4().hex[:6]
    sched = f"dra-{run}"
    await clear_slices(custom)
    await ensure_class(custom)
    await create_many(api, [make_node(n, gpus=0) for n in ("small", "large")])
    await custom.create_cluster_custom_object(
        GROUP, VERSION, "resourceslices", gpu_slice("small", run, "NVIDIA A100-PCIE-40GB", "40Gi")
    )
    await custom.create_cluster_custom_object(
        GROUP, VERSION, "resourceslices", gpu_slice("large", run, "NVIDIA H100-SXM5-80GB", "80Gi")
    )
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    claims = {
        "big": direct_claim(
            "big", selectors=(f'device.capacity["{GPU}"].memory.compareTo(quantity("60Gi")) >= 0',)
        ),
        "a100": direct_claim(
            "a100", selectors=(f'device.attributes["{GPU}"].productName.startsWith("NVIDIA A100")',)
        ),
        "pair": direct_claim("pair", 2, constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
        "broken": direct_claim("broken", selectors=(f'device.attributes["{GPU}"].nosuch == "x"',)),
    }
    for body in claims.values():
        await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
    pods = []
    for name in claims:
        pod = make_pod(f"p-{name}", namespace=namespace, scheduler_name=sched, gpus=0)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        pods.append(pod)
    await create_many(api, pods)

    async def three_bound() -> dict[str, str] | None:
        out = {
            p["metadata"]["name"]: p["spec"].get("nodeName")
            for p in await list_all(core.list_namespaced_pod, namespace)
        }
        return out if sum(1 for n in out.values() if n) == 3 else None

    placed = await wait_for(three_bound, 60, what="the three valid DRA pods bound")
    assert placed["p-big"] == "large" and placed["p-a100"] == "small" and not placed["p-broken"]
    pair = await custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", "pair")
    devices = [r["device"] for r in pair["status"]["allocation"]["devices"]["results"]]
    assert len(devices) == 2 and len({int(d.split("-")[1]) // 4 for d in devices}) == 1, devices

    async def broken_named() -> str | None:
        notes = [
            e["note"]
            for e in await list_all(ev.list_namespaced_event, namespace)
            if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "p-broken"
        ]
        return notes[-1] if notes else None

    note = await wait_for(broken_named, 60, what="a FailedScheduling event for the broken selector")
    assert f"claim {namespace}/broken" in note and "nosuch" in note, note
    await clear_slices(custom)


async def test_a_gang_of_two_gpu_claims_is_all_or_nothing(
    clean: client.ApiClient, crds: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    """4 members × 2 GPUs fill a node of 8 together; a second gang of 2 × 2 GPUs then finds no
    room and leaves neither a bound member nor an allocated claim behind."""
    api = clean
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    sched = f"dra-{run}"
    await clear_slices(custom)
    await ensure_class(custom)
    await create(api, make_node("n1", gpus=0))
    await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice("n1", run))
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))

    async def gang(name: str, members: int) -> None:
        await create(api, make_pod_group(name, namespace=namespace, min_member=members))
        for i in range(members):
            body = direct_claim(f"{name}-{i}", 2)
            await custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
        pods = []
        for i in range(members):
            pod = make_pod(f"{name}-{i}", namespace=namespace, scheduler_name=sched, gpus=0, pod_group=name)
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-{i}"}]
            pods.append(pod)
        await create_many(api, pods)

    async def bound(prefix: str) -> list[str]:
        return [
            p["spec"]["nodeName"]
            for p in await list_all(core.list_namespaced_pod, namespace)
            if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
        ]

    await gang("first", 4)

    async def first_bound() -> list[str] | None:
        nodes = await bound("first-")
        return nodes if len(nodes) == 4 else None

    assert await wait_for(first_bound, 60, what="the first gang bound") == ["n1"] * 4
    await gang("second", 2)

    async def second_refused() -> bool:
        pods = {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, namespace)}
        conds = [
            c
            for n, p in pods.items()
            if n.startswith("second-")
            for c in p["status"].get("conditions") or ()
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        ]
        return len(conds) == 2

    await wait_for(second_refused, 60, what="both members of the second gang refused")
    assert await bound("second-") == []
    for i in range(2):
        got = await custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", f"second-{i}"
        )
        assert not (got.get("status") or {}).get("allocation"), got
    await clear_slices(custom)


async def first_available_run(api: client.ApiClient, scheduler: str) -> list[str]:
    """Four pods whose template claim asks for an H100, else an A10 (``firstAvailable``), on a
    cluster with a node of each: the nodes they go to."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"fa-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def choice(name: str, product: str) -> dict[str, Any]:
        cel = f'device.attributes["{GPU}"].productName == "{product}"'
        return {"name": name, "deviceClassName": GPU, "selectors": [{"cel": {"expression": cel}}]}

    request = {
        "name": "gpu",
        "firstAvailable": [choice("h100", "NVIDIA H100 80GB HBM3"), choice("a10", "NVIDIA A10")],
    }
    template = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "prefer-h100"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", template)
    names = [f"train-{i}" for i in range(4)]
    for name in names:  # one at a time: each sees the devices the one before took
        await create(api, gpu_pod(name, ns, scheduler, "prefer-h100"))

        async def bound(name: str = name) -> str | None:
            node: str | None = (await core.read_namespaced_pod(name, ns)).spec.node_name
            return node

        await wait_for(bound, 60, what=f"{scheduler}: {name} bound")
    pods = await list_all(core.list_namespaced_pod, ns)
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for c in await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims"):
        await custom.delete_namespaced_custom_object(
            GROUP, VERSION, ns, "resourceclaims", c["metadata"]["name"]
        )
    return sorted(p["spec"]["nodeName"] for p in pods)


async def test_first_available_prefers_the_first_choice_as_kube_scheduler_does(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """kube-scheduler 1.37's DynamicResources scores a node where a claim's first alternative fits
    above one where only the second does (weight 2): both schedulers put every pod on the H100
    node."""
    custom: Any = client.CustomObjectsApi(clean)
    run = uuid.uuid4().hex[:6]
    await clear_slices(custom)
    await ensure_class(custom)
    await create_many(clean, [make_node(n, gpus=0) for n in ("gpu-h100", "gpu-a10")])
    await custom.create_cluster_custom_object(
        GROUP, VERSION, "resourceslices", gpu_slice("gpu-h100", run, "NVIDIA H100 80GB HBM3", "80Gi")
    )
    await custom.create_cluster_custom_object(
        GROUP, VERSION, "resourceslices", gpu_slice("gpu-a10", run, "NVIDIA A10", "24Gi")
    )
    # some CPU in use on the node each scheduler's resource scores would otherwise avoid less:
    # kube-scheduler spreads (LeastAllocated), so the load goes on the H100 node for its run;
    # shoal packs (MostAllocated, weight 3), so on the A10 node for its run. Either way only the
    # DRA score (weight 2) brings the pods to the H100 node.
    busy = f"busy-{run}"
    core: Any = client.CoreV1Api(clean)
    await create(clean, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": busy}})
    await create(clean, make_pod("cpu-user", namespace=busy, cpu="4", memory=None, node_name="gpu-h100"))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await first_available_run(clean, "default-scheduler")
    await core.delete_namespaced_pod("cpu-user", busy, grace_period_seconds=0)
    await create(clean, make_pod("cpu-user-2", namespace=busy, cpu="4", memory=None, node_name="gpu-a10"))
    sched = f"fa-{uuid.uuid4().hex[:6]}"
    await create(clean, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await first_available_run(clean, sched)
    await clear_slices(custom)
    assert kube == shoal == ["gpu-h100"] * 4


def tainted_slice(node: str, run: str, taints: list[list[dict[str, str]]]) -> dict[str, Any]:
    """A node's GPUs as NVIDIA's driver publishes them, each with its own taints (the driver's
    health checks taint a GPU ``gpu.nvidia.com/xid`` on a fatal XID, ``.../unmonitored`` with
    effect None when it cannot watch it)."""
    body = gpu_slice(node, run)
    body["spec"]["devices"] = body["spec"]["devices"][: len(taints)]
    for device, own in zip(body["spec"]["devices"], taints, strict=True):
        if own:
            device["taints"] = own
    return body


async def taints_run(api: client.ApiClient, scheduler: str) -> dict[str, tuple[str, list[Any]]]:
    """Three pods whose claim tolerates nothing, then two whose claim tolerates the maintenance
    taint a DeviceTaintRule puts on node t2's GPUs: pod -> (node or "", its claim's allocation
    results as (device, tolerations)). t1's gpu-0 has a NoSchedule XID taint, its gpu-1 only an
    informational (None) taint; both of t2's GPUs carry the rule's NoExecute taint."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"taints-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    tolerate = [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}]
    for name, tolerations in (("plain", None), ("tolerant", tolerate)):
        exactly: dict[str, Any] = {"deviceClassName": GPU}
        if tolerations:
            exactly["tolerations"] = tolerations
        template = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", template)
    plain = [f"plain-{i}" for i in range(3)]
    await create_many(api, [gpu_pod(n, ns, scheduler, "plain") for n in plain])

    async def settled_plain() -> list[dict[str, Any]] | None:
        pods = await list_all(core.list_namespaced_pod, ns)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        refused = [
            p
            for p in pods
            if any(
                c.get("type") == "PodScheduled"
                and c.get("reason") == "Unschedulable"
                and "cannot allocate all claims" in (c.get("message") or "")
                for c in (p.get("status") or {}).get("conditions") or ()
            )
        ]
        return pods if len(bound) == 1 and len(refused) == 2 else None

    await wait_for(settled_plain, 90, what=f"{scheduler}: one plain pod bound, two refused")
    tolerant = [f"tolerant-{i}" for i in range(2)]
    await create_many(api, [gpu_pod(n, ns, scheduler, "tolerant") for n in tolerant])

    async def tolerant_bound() -> list[dict[str, Any]] | None:
        pods = await list_all(core.list_namespaced_pod, ns)
        bound = [
            p for p in pods if p["metadata"]["name"].startswith("tolerant") and p["spec"].get("nodeName")
        ]
        return pods if len(bound) == 2 else None

    pods = await wait_for(tolerant_bound, 90, what=f"{scheduler}: both tolerant pods bound")

    async def allocated() -> list[dict[str, Any]] | None:
        claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
        done = [c for c in claims if (c.get("status") or {}).get("allocation")]
        return claims if len(done) == 3 else None

    claims = await wait_for(allocated, 60, what=f"{scheduler}: three claims' allocations written")
    owner = {
        o["name"]: c
        for c in claims
        for o in c["metadata"].get("ownerReferences") or ()
        if o.get("kind") == "Pod"
    }
    out: dict[str, tuple[str, list[Any]]] = {}
    for p in pods:
        name = p["metadata"]["name"]
        results = (
            ((owner[name].get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        )
        out[name] = (
            p["spec"].get("nodeName") or "",
            sorted((r["pool"], r.get("tolerations") or []) for r in results),
        )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_device_taints_and_tolerations_as_kube_scheduler_allocates_them(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """KEP-5055 (GA in 1.37): a GPU with an untolerated NoSchedule taint is not allocated, one with
    an informational taint is; a DeviceTaintRule's NoExecute taint keeps t2's GPUs from claims
    that do not tolerate it, and a claim that tolerates it gets one, its tolerations copied into
    the allocation. kube-scheduler 1.37.2 and shoal, same objects: the same outcome."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    await create_many(clean, [make_node(n, gpus=0) for n in ("t1", "t2")])
    xid = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    unmonitored = {"key": "gpu.nvidia.com/unmonitored", "value": "", "effect": "None"}
    rule_name = f"maintenance-{uuid.uuid4().hex[:6]}"
    rule: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name},
        "spec": {
            "deviceSelector": {"driver": GPU, "pool": "t2"},
            "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"},
        },
    }
    outcomes: dict[str, dict[str, tuple[str, list[Any]]]] = {}
    for scheduler in ("default-scheduler", "shoal"):
        run = uuid.uuid4().hex[:6]
        await clear_slices(custom)
        await custom.create_cluster_custom_object(
            GROUP, VERSION, "resourceslices", tainted_slice("t1", run, [[xid], [unmonitored]])
        )
        await custom.create_cluster_custom_object(
            GROUP, VERSION, "resourceslices", tainted_slice("t2", run, [[], []])
        )
        await custom.create_cluster_custom_object(GROUP, VERSION, "devicetaintrules", rule)
        try:
            if scheduler == "default-scheduler":
                with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                    outcomes[scheduler] = await taints_run(clean, scheduler)
            else:
                name = f"taints-{run}"
                await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
                outcomes[scheduler] = await taints_run(clean, name)
        finally:
            await custom.delete_cluster_custom_object(GROUP, VERSION, "devicetaintrules", rule_name)
    await clear_slices(custom)
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    tolerated = [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}]
    for got in (kube, shoal):
        plain = sorted(v for k, v in got.items() if k.startswith("plain"))
        assert plain == [("", []), ("", []), ("t1", [("t1", [])])], got  # gpu-1: only informational
        assert (
            sorted(v for k, v in got.items() if k.startswith("tolerant")) == [("t2", [("t2", tolerated)])] * 2
        )
    # the three plain pods are created together, so which one wins the one allocatable GPU is a
    # race in both schedulers: compare the outcomes as multisets, not by pod name
    assert sorted(kube.values(), key=repr) == sorted(shoal.values(), key=repr)


#: MIG profiles of an 80 GB GPU as NVIDIA's driver publishes them (DynamicMIG): name, memory
#: slices taken, how many placements (each starts at a multiple of its size)
MIG_PROFILES = (("1g.10gb", 1, 7), ("3g.40gb", 4, 2), ("7g.80gb", 8, 1))


def mig_slices(node: str, run: str) -> list[dict[str, Any]]:
    """One GPU of ``node`` as NVIDIA's DRA driver publishes it with dynamic MIG (one pool of two
    slices): a counter slice with the GPU's counter set (memory and its eight memory slices), a
    device slice with the full GPU and every MIG placement, each consuming its share."""
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    slots = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
    counters = {"counterSet": "gpu-0-counter-set"}
    full = {
        "name": "gpu-0",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"}},
        "capacity": {"memory": {"value": "80Gi"}},
        "consumesCounters": [{**counters, "counters": {"memory": {"value": "80Gi"}, **slots}}],
    }
    devices = [full]
    for profile, size, placements in MIG_PROFILES:
        for p in range(placements):
            start = p * size if size < 8 else 0
            taken = {f"memory-slice-{start + i}": {"value": "1"} for i in range(size)}
            memory = f"{size * 10}Gi"
            devices.append(
                {
                    "name": f"gpu-0-mig-{profile.replace('.', '')}-{start}",
                    "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}},
                    "capacity": {"memory": {"value": memory}},
                    "consumesCounters": [{**counters, "counters": {"memory": {"value": memory}, **taken}}],
                }
            )
    counter_set = {"name": "gpu-0-counter-set", "counters": {"memory": {"value": "80Gi"}, **slots}}
    spec = {"driver": GPU, "nodeName": node, "pool": pool}
    return [
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{run}-counters"},
            "spec": {**spec, "sharedCounters": [counter_set]},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{run}-gpu-0"},
            "spec": {**spec, "devices": devices},
        },
    ]


async def partitions_run(api: client.ApiClient, scheduler: str) -> dict[str, tuple[str, list[Any]]]:
    """On one A100 split by MIG: a monitoring pod with admin access to the whole GPU (admitted in
    a namespace labelled for it), which takes nothing from anyone; then three pods asking for a
    3g.40gb partition (two fit: they take all eight memory slices), then one asking for 1g.10gb
    (nothing left): pod -> (node or "", its claim's results as (device, adminAccess))."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"mig-{uuid.uuid4().hex[:6]}"
    labels = {"resource.kubernetes.io/admin-access": "true"}
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})

    def profile(p: str) -> dict[str, Any]:
        # the whole GPU has no profile attribute: CEL's && keeps the error off it (an error
        # is never a match, and kube-scheduler fails the cycle on one)
        mig = f'device.attributes["{GPU}"].type == "mig"'
        return {"cel": {"expression": f'{mig} && device.attributes["{GPU}"].profile == "{p}"'}}

    def template(name: str, requests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": requests, **extra}}},
        }

    whole = {"cel": {"expression": f'device.attributes["{GPU}"].type == "gpu"'}}
    templates = [
        template(
            "mig-3g",
            [{"name": "gpu", "exactly": {"deviceClassName": GPU, "selectors": [profile("3g.40gb")]}}],
        ),
        template(
            "mig-1g",
            [{"name": "gpu", "exactly": {"deviceClassName": GPU, "selectors": [profile("1g.10gb")]}}],
        ),
        template(
            "monitor",
            [{"name": "gpu", "exactly": {"deviceClassName": GPU, "selectors": [whole], "adminAccess": True}}],
        ),
    ]
    for body in templates:
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", body)

    async def settle(names: list[str], bound: int) -> list[dict[str, Any]]:
        async def check() -> list[dict[str, Any]] | None:
            pods = [p for p in await list_all(core.list_namespaced_pod, ns) if p["metadata"]["name"] in names]
            placed = [p for p in pods if p["spec"].get("nodeName")]
            refused = [
                p
                for p in pods
                if any(
                    c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                    for c in (p.get("status") or {}).get("conditions") or ()
                )
            ]
            return pods if len(placed) == bound and len(refused) == len(names) - bound else None

        got: list[dict[str, Any]] = await wait_for(check, 90, what=f"{scheduler}: {bound} of {names} bound")
        return got

    await create(api, gpu_pod("monitor", ns, scheduler, "monitor"))
    await settle(["monitor"], 1)
    three = [f"three-{i}" for i in range(3)]
    await create_many(api, [gpu_pod(n, ns, scheduler, "mig-3g") for n in three])
    await settle(three, 2)
    await create(api, gpu_pod("one", ns, scheduler, "mig-1g"))
    await settle(["one"], 0)
    pods = await list_all(core.list_namespaced_pod, ns)

    async def allocated() -> list[dict[str, Any]] | None:
        claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
        done = [c for c in claims if (c.get("status") or {}).get("allocation")]
        return claims if len(done) == 3 else None

    claims = await wait_for(allocated, 60, what=f"{scheduler}: three claims' allocations written")
    owner = {
        o["name"]: c
        for c in claims
        for o in c["metadata"].get("ownerReferences") or ()
        if o.get("kind") == "Pod"
    }
    out: dict[str, tuple[str, list[Any]]] = {}
    for p in pods:
        name = p["metadata"]["name"]
        allocation = (owner[name].get("status") or {}).get("allocation") or {}
        results = allocation.get("devices", {}).get("results", [])
        out[name] = (
            p["spec"].get("nodeName") or "",
            sorted((r["device"], bool(r.get("adminAccess"))) for r in results),
        )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_mig_partitions_and_admin_access_as_kube_scheduler_allocates_them(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """Partitionable devices (KEP-4815, beta and on in 1.37): MIG partitions share their GPU's
    memory slices through a counter set, so two 3g.40gb partitions leave no room for a third, nor
    for a 1g.10gb one; a monitoring claim with adminAccess got the whole GPU before them, marked
    adminAccess, and took none of its counters. kube-scheduler 1.37.2 and shoal, same objects: the
    same partitions allocated."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    await create_many(clean, [make_node("m1", gpus=0)])
    outcomes: dict[str, dict[str, tuple[str, list[Any]]]] = {}
    for scheduler in ("default-scheduler", "shoal"):
        run = uuid.uuid4().hex[:6]
        await clear_slices(custom)
        for body in mig_slices("m1", run):
            await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                outcomes[scheduler] = await partitions_run(clean, scheduler)
        else:
            name = f"mig-{run}"
            await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
            outcomes[scheduler] = await partitions_run(clean, name)
    await clear_slices(custom)
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    for got in (kube, shoal):
        placed = sorted(devices for node, devices in got.values() if node)
        assert placed == [
            [("gpu-0", True)],
            [("gpu-0-mig-3g40gb-0", False)],
            [("gpu-0-mig-3g40gb-4", False)],
        ], got
        assert sorted(node for node, _ in got.values()) == ["", "", "m1", "m1", "m1"]
    assert sorted(kube.values(), key=repr) == sorted(shoal.values(), key=repr)


def shared_gpu_slice(node: str, run: str) -> dict[str, Any]:
    """One GPU of ``node`` published shared (consumable capacity): its 80Gi of memory taken by
    shares in steps of 10Gi, at least 10Gi each."""
    policy = {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"productName": {"string": "NVIDIA A100-SXM4-80GB"}},
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": policy}},
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{run}"},
        "spec": {
            "driver": GPU,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device],
        },
    }


async def shared_run(api: client.ApiClient, scheduler: str) -> dict[str, tuple[str, list[Any]]]:
    """Three pods each asking for 25Gi of the shared GPU's memory (rounded up to 30Gi: two fit in
    80Gi, the third waits): pod -> (node or "", its claim's results as (device, has a shareID,
    consumed memory in bytes))."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"shared-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    exactly = {"deviceClassName": GPU, "capacity": {"requests": {"memory": "25Gi"}}}
    template = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "slice-of-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", template)
    names = [f"infer-{i}" for i in range(3)]
    await create_many(api, [gpu_pod(n, ns, scheduler, "slice-of-gpu") for n in names])

    async def settled() -> list[dict[str, Any]] | None:
        pods = await list_all(core.list_namespaced_pod, ns)
        placed = [p for p in pods if p["spec"].get("nodeName")]
        refused = [
            p
            for p in pods
            if any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in (p.get("status") or {}).get("conditions") or ()
            )
        ]
        return pods if len(placed) == 2 and len(refused) == 1 else None

    pods = await wait_for(settled, 90, what=f"{scheduler}: two of three shares placed")

    async def allocated() -> list[dict[str, Any]] | None:
        claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
        done = [c for c in claims if (c.get("status") or {}).get("allocation")]
        return claims if len(done) == 2 else None

    claims = await wait_for(allocated, 60, what=f"{scheduler}: two claims' allocations written")
    owner = {
        o["name"]: c
        for c in claims
        for o in c["metadata"].get("ownerReferences") or ()
        if o.get("kind") == "Pod"
    }
    out: dict[str, tuple[str, list[Any]]] = {}
    for p in pods:
        name = p["metadata"]["name"]
        results = (
            ((owner[name].get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        )
        out[name] = (
            p["spec"].get("nodeName") or "",
            [
                (r["device"], bool(r.get("shareID")), int(parse_quantity(r["consumedCapacity"]["memory"])))
                for r in results
            ],
        )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_a_shared_gpu_by_memory_as_kube_scheduler_allocates_it(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """Consumable capacity (KEP-5075, beta and on in 1.37): a GPU shared by memory takes pods
    while their shares fit, each request rounded up by the capacity's policy and recorded with
    a shareID. kube-scheduler 1.37.2 and shoal, same objects: the same shares."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    await create_many(clean, [make_node("s1", gpus=0)])
    outcomes: dict[str, dict[str, tuple[str, list[Any]]]] = {}
    for scheduler in ("default-scheduler", "shoal"):
        run = uuid.uuid4().hex[:6]
        await clear_slices(custom)
        await custom.create_cluster_custom_object(
            GROUP, VERSION, "resourceslices", shared_gpu_slice("s1", run)
        )
        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                outcomes[scheduler] = await shared_run(clean, scheduler)
        else:
            name = f"shared-{run}"
            await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
            outcomes[scheduler] = await shared_run(clean, name)
    await clear_slices(custom)
    share = [("gpu-0", True, 30 * 2**30)]
    for got in (outcomes["default-scheduler"], outcomes["shoal"]):
        assert sorted(got.values()) == [("", []), ("s1", share), ("s1", share)], got


EXTENDED = "nvidia.com/gpu"


def extended_pod(name: str, namespace: str, scheduler: str, resource: str, count: int) -> dict[str, Any]:
    """A pod asking for GPUs as extended resources, the way it asks a device plugin."""
    pod = make_pod(name, namespace=namespace, scheduler_name=scheduler, gpus=0)
    pod["spec"]["containers"][0]["resources"]["requests"][resource] = str(count)
    pod["spec"]["containers"][0]["resources"]["limits"] = {resource: str(count)}
    return pod


async def extended_run(api: client.ApiClient, scheduler: str) -> dict[str, dict[str, Any]]:
    """On a node whose 8 GPUs come only from a DRA driver: a pod asking ``nvidia.com/gpu: 2``,
    one asking the class's implicit name for 1, one asking for 8 (which must wait). Returns per
    pod what the scheduler wrote: its node, its ``status.extendedResourceClaimStatus`` (the claim
    name's random tail left out), and the claim (metadata that matters, spec, allocation's
    request names and device count, reservation)."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    node = f"x-{run}"  # a node (and so a pool) of its own: the other run's claims hold other devices
    ns = f"extended-{run}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create_many(api, [make_node(node, gpus=0)])
    await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(node, run))
    implicit = f"deviceclass.resource.kubernetes.io/{GPU}"
    pods = [
        extended_pod("train", ns, scheduler, EXTENDED, 2),
        extended_pod("infer", ns, scheduler, implicit, 1),
        extended_pod("too-big", ns, scheduler, EXTENDED, 8),
    ]
    pods[0]["spec"]["nodeSelector"] = pods[1]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    pods[2]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    for p in pods:  # in order: the 8-GPU pod must find 3 taken
        await create(api, p)
        if p["metadata"]["name"] != "too-big":

            async def bound(name: str = p["metadata"]["name"]) -> bool:
                got = await core.read_namespaced_pod(name, ns)
                return bool(got.spec.node_name)

            await wait_for(bound, 60, what=f"{scheduler}: {p['metadata']['name']} bound")

    async def refused() -> dict[str, Any] | None:
        got = (await core.read_namespaced_pod("too-big", ns)).to_dict()
        conditions = (got.get("status") or {}).get("conditions") or ()
        return got if any(c.get("reason") == "Unschedulable" for c in conditions) else None

    too_big = await wait_for(refused, 60, what=f"{scheduler}: the 8-GPU pod refused")

    async def recorded() -> list[dict[str, Any]] | None:
        got = await list_all(core.list_namespaced_pod, ns)
        done = [p for p in got if (p.get("status") or {}).get("extendedResourceClaimStatus")]
        return got if len(done) == 2 else None

    out: dict[str, dict[str, Any]] = {}
    for p in await wait_for(recorded, 60, what=f"{scheduler}: the claims recorded in the pods"):
        name = p["metadata"]["name"]
        status = dict((p.get("status") or {}).get("extendedResourceClaimStatus") or {})
        claim: dict[str, Any] = {}
        if status:
            claim = await custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, "resourceclaims", status["resourceClaimName"]
            )
            assert status.pop("resourceClaimName") == claim["metadata"]["name"]
        meta = claim.get("metadata") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        out[name] = {
            "node": p["spec"].get("nodeName") or "",
            "status": status,
            "generateName": meta.get("generateName"),
            "annotations": meta.get("annotations"),
            "owners": [
                {k: o.get(k) for k in ("apiVersion", "kind", "name", "controller")}
                for o in meta.get("ownerReferences") or ()
            ],
            "finalizers": meta.get("finalizers"),
            "spec": claim.get("spec"),
            "allocated": sorted({r["request"] for r in results}),
            "devices": len(results),
            "reservedFor": [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or ()],
        }
    message = next(
        c.get("message") or "" for c in too_big["status"]["conditions"] if c.get("reason") == "Unschedulable"
    )
    out["too-big"]["message"] = "cannot allocate all claims" in message
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_nvidia_gpu_from_a_dra_driver_as_kube_scheduler_allocates_it(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """DRA-backed extended resources (KEP-5004, GA in 1.37): a pod asking ``nvidia.com/gpu: 2``
    where no device plugin runs gets a claim made for it. kube-scheduler 1.37.2 and shoal, same
    objects: the same claim (name, owner, annotation, finalizer, requests), the same allocation and
    reservation, the same request mappings in the pod's status, the same refusal when the GPUs
    run out."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    # the mapping a platform team adds to the driver's class (left out of the class other tests use)
    mapped_class = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeviceClass",
        "metadata": {"name": f"{GPU}-extended"},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}],
            "extendedResourceName": EXTENDED,
        },
    }
    await custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", mapped_class)
    outcomes: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        for scheduler in ("default-scheduler", "shoal"):
            if scheduler == "default-scheduler":
                with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                    outcomes[scheduler] = await extended_run(clean, scheduler)
            else:
                name = f"extended-{uuid.uuid4().hex[:6]}"
                await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
                outcomes[scheduler] = await extended_run(clean, name)
    finally:
        await custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", f"{GPU}-extended")
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    for got in (kube, shoal):
        assert got["train"]["devices"] == 2 and got["infer"]["devices"] == 1, got
        assert (
            got["train"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == f"{GPU}-extended"
        )
        assert got["too-big"]["message"] is True and not got["too-big"]["node"], got
    for name in ("train", "infer", "too-big"):
        a, b = dict(kube[name]), dict(shoal[name])
        a.pop("node"), b.pop("node")
        assert a == b, (name, a, b)


def fabric_slices(node: str, run: str) -> list[dict[str, Any]]:
    """The node's own GPU, and a GPU attached over a fabric (a pool reaching every node) that a
    pod may use once the driver says ``attached`` (binding conditions), pinned to the node it is
    allocated for (``bindsToNode``)."""
    local = gpu_slice(node, run)
    local["spec"]["devices"] = local["spec"]["devices"][:1]
    fabric_gpu = {
        "name": "fabric-gpu-0",
        "attributes": {"productName": {"string": "NVIDIA H100"}},
        "bindsToNode": True,
        "bindingConditions": ["attached"],
        "bindingFailureConditions": ["failed"],
    }
    fabric = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"fabric-{run}"},
        "spec": {
            "driver": GPU,
            "allNodes": True,
            "pool": {"name": f"fabric-{run}", "generation": 1, "resourceSliceCount": 1},
            "devices": [fabric_gpu],
        },
    }
    return [local, fabric]


async def binding_run(api: client.ApiClient, scheduler: str) -> dict[str, Any]:
    """Two pods, one GPU claim each, on a node with one GPU of its own: the first gets the node's
    GPU and binds; the second gets the fabric GPU and must wait until the test, as the driver,
    sets ``attached`` on its claim. Returns what each scheduler did."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    node = f"b-{run}"
    ns = f"binding-{run}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create_many(api, [make_node(node, gpus=0)])
    await clear_slices(custom)
    for body in fabric_slices(node, run):
        await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
    for name in ("c1", "c2"):
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", direct_claim(name))
    pods = [claim_user(n, ns, scheduler, c, node) for n, c in (("p1", "c1"), ("p2", "c2"))]

    async def bound(name: str) -> bool:
        return bool((await core.read_namespaced_pod(name, ns)).spec.node_name)

    await create(api, pods[0])
    await wait_for(lambda: bound("p1"), 60, what=f"{scheduler}: p1 bound")
    await create(api, pods[1])

    async def allocated() -> dict[str, Any] | None:
        got = await custom.get_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", "c2")
        return got if ((got.get("status") or {}).get("allocation")) else None

    c2 = await wait_for(allocated, 60, what=f"{scheduler}: c2 allocated")
    waited = not await bound("p2")  # allocated, not bound: PreBind waits for the driver
    (result,) = c2["status"]["allocation"]["devices"]["results"]
    condition = {
        "type": "attached",
        "status": "True",
        "reason": "Attached",
        "message": "attached over the fabric",
        "lastTransitionTime": "2026-12-06T00:00:00Z",
    }
    device = {"driver": result["driver"], "pool": result["pool"], "device": result["device"]}
    await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        "resourceclaims",
        "c2",
        {"status": {"devices": [{**device, "conditions": [condition]}]}},
        _content_type="application/merge-patch+json",
    )
    await wait_for(lambda: bound("p2"), 60, what=f"{scheduler}: p2 bound once attached")
    c1 = await custom.get_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", "c1")
    out = {
        "p1": [r["device"] for r in c1["status"]["allocation"]["devices"]["results"]],
        "p2": result["device"],
        "waited": waited,
        "conditions": (result.get("bindingConditions"), result.get("bindingFailureConditions")),
        "selector": c2["status"]["allocation"].get("nodeSelector"),
        "stamped": bool(c2["status"]["allocation"].get("allocationTimestamp")),
    }
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


def claim_user(name: str, namespace: str, scheduler: str, claim_name: str, node: str) -> dict[str, Any]:
    pod = make_pod(
        name,
        namespace=namespace,
        scheduler_name=scheduler,
        gpus=0,
        node_selector={"kubernetes.io/hostname": node},
    )
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return pod


async def test_binding_conditions_hold_a_pod_until_the_driver_attaches_its_device_as_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """Binding conditions (KEP-5007, beta and on in 1.37): the node's own GPU goes first; the
    fabric GPU is allocated with its conditions copied and pinned to the node, and the pod binds
    only once the driver sets ``attached``. kube-scheduler 1.37.2 and shoal, same objects."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    outcomes: dict[str, dict[str, Any]] = {}
    for scheduler in ("default-scheduler", "shoal"):
        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                outcomes[scheduler] = await binding_run(clean, scheduler)
        else:
            name = f"binding-{uuid.uuid4().hex[:6]}"
            await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
            outcomes[scheduler] = await binding_run(clean, name)
    await clear_slices(custom)
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    assert kube["p1"] == ["gpu-0"] and kube["p2"] == "fabric-gpu-0" and kube["waited"], kube
    assert kube["conditions"] == (["attached"], ["failed"]) and kube["stamped"], kube
    for key in ("p1", "p2", "waited", "conditions", "stamped"):
        assert shoal[key] == kube[key], (key, kube, shoal)
    # pinned to the node each run used (the node names differ per run)
    for got in (kube, shoal):
        (term,) = got["selector"]["nodeSelectorTerms"]
        assert term["matchFields"][0]["key"] == "metadata.name", got


async def gang_run(api: client.ApiClient, scheduler: str, node: str, *, refusal: bool) -> dict[str, Any]:
    """A native gang of two on one MIG-able GPU: the first member would rather have the whole
    GPU (``firstAvailable``: whole, else 3g.40gb), the second needs a 3g.40gb. Returns, per
    member, its node ("" while pending) and its claim's devices, once both are bound, or (with
    ``refusal``, the outcome expected) once a member is refused. Without it a refusal does not end
    the wait: the slices just created may reach the scheduler after the pods (a first attempt
    refused, the next one placed), so the test waits for the state it asserts."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"gang-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    mig = f'device.attributes["{GPU}"].type == "mig"'
    half = {"cel": {"expression": f'{mig} && device.attributes["{GPU}"].profile == "3g.40gb"'}}
    whole = {"cel": {"expression": f'device.attributes["{GPU}"].type == "gpu"'}}
    alternatives = [
        {"name": "whole", "deviceClassName": GPU, "selectors": [whole]},
        {"name": "half", "deviceClassName": GPU, "selectors": [half]},
    ]
    for name, request in (
        ("greedy", {"name": "gpu", "firstAvailable": alternatives}),
        ("half", {"name": "gpu", "exactly": {"deviceClassName": GPU, "selectors": [half]}}),
    ):
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", body)
    await create(api, make_native_pod_group("pair", namespace=ns, min_count=2))
    for pod_name, template in (("first", "greedy"), ("second", "half")):
        pod = gpu_pod(pod_name, ns, scheduler, template)
        pod["spec"]["schedulingGroup"] = {"podGroupName": "pair"}
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        await create(api, pod)

    async def settled() -> list[dict[str, Any]] | None:
        pods = await list_all(core.list_namespaced_pod, ns)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        refused = [
            p
            for p in pods
            if any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in (p.get("status") or {}).get("conditions") or ()
            )
        ]
        return pods if len(bound) == 2 or (refusal and refused) else None

    pods = await wait_for(settled, 90, what=f"{scheduler}: the gang bound or a member refused")
    claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
    devices = {
        o["name"]: sorted(
            r["device"]
            for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        )
        for c in claims
        for o in c["metadata"].get("ownerReferences") or ()
        if o.get("kind") == "Pod"
    }
    out = {
        p["metadata"]["name"]: (p["spec"].get("nodeName") or "", devices.get(p["metadata"]["name"], []))
        for p in pods
    }
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_a_gang_whose_first_member_would_starve_the_second_is_placed_kube_scheduler_leaves_it(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """Beyond kube-scheduler (kubernetes/kubernetes#138765): one after the other, the first member
    takes the whole GPU and the second finds no 3g.40gb left, so kube-scheduler 1.37.2 leaves the
    gang pending; shoal chooses the members' devices together: a 3g.40gb each, both bound."""
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    outcomes: dict[str, dict[str, Any]] = {}
    for scheduler in ("default-scheduler", "shoal"):
        run = uuid.uuid4().hex[:6]
        node = f"g-{run}"
        await create_many(clean, [make_node(node, gpus=0)])
        await clear_slices(custom)
        for body in mig_slices(node, run):
            await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                outcomes[scheduler] = await gang_run(clean, scheduler, node, refusal=True)
        else:
            name = f"gang-{run}"
            await create(clean, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
            outcomes[scheduler] = await gang_run(clean, name, node, refusal=False)
    await clear_slices(custom)
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    assert not any(node for node, _ in kube.values()), kube  # the gang is left pending
    assert all(node for node, _ in shoal.values()), shoal
    assert sorted(d for _, d in shoal.values()) == [["gpu-0-mig-3g40gb-0"], ["gpu-0-mig-3g40gb-4"]], shoal


async def test_a_gang_sharing_one_claim_is_bound_whole_with_every_member_reserving_it(
    clean: client.ApiClient, operator: OperatorProcess, claim_controller: KubeControllerManagerProcess
) -> None:
    """kubernetes/kubernetes#137617 / #140053: three members of a native gang share one claim. The
    first member's cycle allocates it and the others use that allocation; at PreBind, running
    together, each adds itself to reservedFor with the resourceVersion it reads, reading again
    when another member got there first: all three bound, the claim reserved for all."""
    core: Any = client.CoreV1Api(clean)
    custom: Any = client.CustomObjectsApi(clean)
    await ensure_class(custom)
    run = uuid.uuid4().hex[:6]
    node, ns = f"s-{run}", f"shared-claim-{run}"
    await create(clean, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create_many(clean, [make_node(node, gpus=0)])
    await clear_slices(custom)
    await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(node, run))
    await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", direct_claim("shared"))
    sched = f"shared-{run}"
    await create(clean, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    await create(clean, make_native_pod_group("trio", namespace=ns, min_count=3))
    names = [f"m{i}" for i in range(3)]
    for name in names:
        pod = claim_user(name, ns, sched, "shared", node)
        pod["spec"]["schedulingGroup"] = {"podGroupName": "trio"}
        await create(clean, pod)

    async def all_bound() -> bool:
        pods = await list_all(core.list_namespaced_pod, ns)
        return len([p for p in pods if p["spec"].get("nodeName") == node]) == 3

    await wait_for(all_bound, 90, what="the three members bound")
    claim = await custom.get_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", "shared")
    reserved = sorted(r["name"] for r in claim["status"]["reservedFor"])
    assert reserved == names, claim["status"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    await clear_slices(custom)
