"""DRA features behind gates that are off by default in 1.37, on a control plane of its own with
them on (API server, kube-scheduler and the resourceclaim controller alike: the API server drops a
gated field while its gate is off, so an object reaches a scheduler with it only from a cluster
that turned it on).

Compatibility groups (KEP-5941, DRADeviceCompatibilityGroups, alpha): one GPU published as MIG
partitions and as vGPU profiles, both taking the GPU's memory slices from one counter set; the MIG
ones declare group ``mig``, the vGPU ones ``vgpu``, so once one kind is allocated on a GPU the
other kind must go elsewhere. kube-scheduler 1.37.2 and shoal, same objects, pod after pod: the
same devices allocated and the same pod left waiting.

PodGroup claims (KEP-5729, DRAWorkloadResourceClaims, beta): a native gang whose PodGroup lists a
claim template in ``spec.resourceClaims``; the resourceclaim controller makes one claim for the
PodGroup (its owner), which every member names, and each member has a claim of its own too. Both
schedulers: the gang on one node, the shared claim allocated once and reserved for the PodGroup
(not for each pod), each member's own claim reserved for it.

Optional node operations (DRAOptionalNodeOperations, alpha): a driver whose slices say the kubelet
may skip its node calls (``skipNodeOperations``); only a node whose kubelet declares
``DRAOptionalNodeOperations`` gets its devices, and each allocation result copies the list.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import client, config

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, apply_crds, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubecontrollermanager import DRA_CONTROLLERS, KubeControllerManagerProcess
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_native_pod_group, make_node, make_pod, make_profile
from tests.integration.conftest import wait_ready
from tests.integration.test_dra import clear_slices, ensure_class

pytestmark = pytest.mark.slow

GPU = "gpu.nvidia.com"
GROUP, VERSION = "resource.k8s.io", "v1"
T = TypeVar("T")
GATES = (
    "DRADeviceCompatibilityGroups=true",
    "DRAWorkloadResourceClaims=true",
    "DRAOptionalNodeOperations=true",
)


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    cp = ControlPlane(feature_gates=GATES)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def claim_controller(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllerManagerProcess]:
    """The resourceclaim controller, gated as the API server is, for this module."""
    kcm = KubeControllerManagerProcess(
        plane.kubeconfig,
        Path(tmp_path_factory.mktemp("kcm-gated")),
        controllers=DRA_CONTROLLERS,
        feature_gates=GATES,
    )
    with kcm:
        yield kcm


@pytest.fixture
async def api(plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(plane.kubeconfig))
    try:
        await apply_crds(api_client)
        yield api_client
    finally:
        await api_client.close()


def partitioned_gpus(node: str, run: str) -> list[dict[str, Any]]:
    """Two GPUs of ``node`` in one pool, each with a counter set of 8 memory slices: per GPU four
    1-slice MIG partitions (group ``mig``) and two 4-slice vGPU profiles (group ``vgpu``)."""
    pool = {"name": f"{node}-{run}", "generation": 1, "resourceSliceCount": 2}
    devices: list[dict[str, Any]] = []
    for gpu in range(2):
        kinds = [("mig", i, 1) for i in range(4)] + [("vgpu", i, 4) for i in range(2)]
        for kind, i, slices in kinds:
            devices.append(
                {
                    "name": f"gpu-{gpu}-{kind}-{i}",
                    "attributes": {"type": {"string": kind}, "parent": {"int": gpu}},
                    "capacity": {"memory": {"value": f"{10 * slices}Gi"}},
                    "consumesCounters": [
                        {
                            "counterSet": f"gpu-{gpu}",
                            "counters": {"memory-slices": {"value": str(slices)}},
                            "compatibilityGroups": [kind],
                        }
                    ],
                }
            )
    counters = [{"name": f"gpu-{g}", "counters": {"memory-slices": {"value": "8"}}} for g in range(2)]
    meta = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice"}
    return [
        {
            **meta,
            "metadata": {"name": f"{node}-{run}-devices"},
            "spec": {"driver": GPU, "nodeName": node, "pool": pool, "devices": devices},
        },
        {
            **meta,
            "metadata": {"name": f"{node}-{run}-counters"},
            "spec": {"driver": GPU, "nodeName": node, "pool": pool, "sharedCounters": counters},
        },
    ]


async def one_by_one(
    api: client.ApiClient, scheduler: str, wants: dict[str, tuple[str, int]], prefix: str
) -> tuple[dict[str, tuple[str, list[str]]], set[tuple[str, ...]]]:
    """One pod at a time, each with its own claim for ``count`` devices of ``type`` (``wants``: pod
    -> (type, count)), each bound or refused before the next. pod -> (node or "", the devices its
    claim got), and the ``skipNodeOperations`` lists its results carry."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, (kind, count) in wants.items():
        selector = {"cel": {"expression": f'device.attributes["{GPU}"].type == "{kind}"'}}
        claim = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": GPU, "count": count, "selectors": [selector]},
                        }
                    ]
                }
            },
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", claim)
        pod = make_pod(name, namespace=ns, scheduler_name=scheduler, gpus=0)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
        await create(api, pod)

        async def settled(name: str = name) -> dict[str, Any] | None:
            got: dict[str, Any] = await core.read_namespaced_pod(name, ns)
            got = api.sanitize_for_serialization(got)
            if got["spec"].get("nodeName"):
                claim = await custom.get_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaims", name)
                return got if (claim.get("status") or {}).get("allocation") else None
            refused = any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in (got.get("status") or {}).get("conditions") or ()
            )
            return got if refused else None

        await wait_for(settled, 60, what=f"{scheduler}: pod {name} bound or unschedulable")
    out: dict[str, tuple[str, list[str]]] = {}
    skips: set[tuple[str, ...]] = set()
    claims = {
        c["metadata"]["name"]: c
        for c in await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
    }
    for p in await list_all(core.list_namespaced_pod, ns):
        name = p["metadata"]["name"]
        allocation = (claims[name].get("status") or {}).get("allocation") or {}
        results = allocation.get("devices", {}).get("results", [])
        out[name] = (p["spec"].get("nodeName") or "", sorted(r["device"] for r in results))
        skips |= {tuple(r.get("skipNodeOperations") or ()) for r in results}
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out, skips


async def side_by_side(
    api: client.ApiClient,
    plane: ControlPlane,
    tmp_path: Path,
    prefix: str,
    publish: Callable[[str], Awaitable[None]],
    go: Callable[[str], Awaitable[T]],
) -> dict[str, T]:
    """kube-scheduler 1.37.2 (with GATES), then shoal (an operator and a profile of its own), each on
    slices of its own: the old ones deleted, ``publish(run)`` called; what ``go`` returns for each,
    given the scheduler name its pods ask for."""
    custom: Any = client.CustomObjectsApi(api)
    out: dict[str, T] = {}
    for scheduler in ("default-scheduler", "shoal"):
        run = uuid.uuid4().hex[:6]
        await clear_slices(custom)
        await publish(run)
        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(plane.kubeconfig, tmp_path / "kube-scheduler", feature_gates=GATES):
                out[scheduler] = await go(scheduler)
            continue
        name = f"{prefix}-{run}"
        await create(api, make_profile(name, {**DEFAULT_PROFILE_SPEC}, scheduler_name=name))
        op = OperatorProcess(
            plane.kubeconfig, tmp_path / f"operator-{prefix}.log", identity=name, leader_elect=False
        )
        op.start()
        try:
            wait_ready(op)
            out[scheduler] = await go(name)
        finally:
            assert op.stop() == 0, op.tail()
    return out


async def test_compatibility_groups_keep_mig_and_vgpu_apart_as_kube_scheduler_does(
    api: client.ApiClient, plane: ControlPlane, tmp_path: Path
) -> None:
    """``a`` takes gpu-0's first MIG partition; ``b``'s vGPU cannot join MIG on gpu-0 (though its
    memory slices would fit), so it takes gpu-1's; ``c``'s MIG partition joins ``a`` on gpu-0;
    ``d`` needs two vGPUs, and gpu-1 has one left beside ``b``'s while gpu-0 is MIG: it waits."""
    custom: Any = client.CustomObjectsApi(api)
    await ensure_class(custom)
    await create_many(api, [make_node("p1", gpus=0)])
    wants = {"a": ("mig", 1), "b": ("vgpu", 1), "c": ("mig", 1), "d": ("vgpu", 2)}

    async def publish(run: str) -> None:
        for body in partitioned_gpus("p1", run):
            made = await custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
            if "devices" in body["spec"]:  # the API server kept the gated field
                assert made["spec"]["devices"][0]["consumesCounters"][0]["compatibilityGroups"] == ["mig"]

    async def go(scheduler: str) -> dict[str, tuple[str, list[str]]]:
        return (await one_by_one(api, scheduler, wants, "groups"))[0]

    outcomes = await side_by_side(api, plane, tmp_path, "groups", publish, go)
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    assert kube == {
        "a": ("p1", ["gpu-0-mig-0"]),
        "b": ("p1", ["gpu-1-vgpu-0"]),
        "c": ("p1", ["gpu-0-mig-1"]),
        "d": ("", []),
    }, kube
    assert shoal == kube


def gpus_and_channel(node: str, run: str) -> dict[str, Any]:
    """``node``'s slice: eight GPUs and one fabric channel (as a compute-domain driver publishes an
    IMEX channel beside the GPUs), told apart by the ``type`` attribute."""
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(8)
    ]
    devices.append({"name": "channel-0", "attributes": {"type": {"string": "channel"}}})
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{run}"},
        "spec": {
            "driver": GPU,
            "nodeName": node,
            "pool": {"name": f"{node}-{run}", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


async def group_claims_run(api: client.ApiClient, scheduler: str) -> dict[str, Any]:
    """The gang ``train`` (minCount 2) in a namespace of its own: its PodGroup's claim ``fabric``
    (template ``channel``) and each member's own claim ``gpu`` (template ``one-gpu``). Returns where
    the members went and, per claim, its owner kind, devices and consumers (resource, name)."""
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = f"pgclaims-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, kind in (("channel", "channel"), ("one-gpu", "gpu")):
        selector = {"cel": {"expression": f'device.attributes["{GPU}"].type == "{kind}"'}}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "dev", "exactly": {"deviceClassName": GPU, "selectors": [selector]}}
                        ]
                    }
                }
            },
        }
        await custom.create_namespaced_custom_object(GROUP, VERSION, ns, "resourceclaimtemplates", body)
    group = make_native_pod_group("train", namespace=ns, min_count=2)
    group["spec"]["resourceClaims"] = [{"name": "fabric", "resourceClaimTemplateName": "channel"}]
    made = await create(api, group)
    assert made["spec"].get("resourceClaims"), "the API server dropped PodGroup.spec.resourceClaims"
    members = ["worker-0", "worker-1"]
    for name in members:
        pod = make_pod(name, namespace=ns, scheduler_name=scheduler, gpus=0, scheduling_group="train")
        pod["spec"]["resourceClaims"] = [
            {"name": "fabric", "resourceClaimTemplateName": "channel"},
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
        ]
        pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [
            {"name": "fabric"},
            {"name": "gpu"},
        ]
        await create(api, pod)

    async def bound() -> list[dict[str, Any]] | None:
        pods = await list_all(core.list_namespaced_pod, ns)
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = await wait_for(bound, 90, what=f"{scheduler}: the gang bound")

    async def reserved() -> list[dict[str, Any]] | None:
        claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, ns, "resourceclaims")
        done = [c for c in claims if (c.get("status") or {}).get("reservedFor")]
        return claims if len(claims) == 3 and len(done) == 3 else None

    claims = await wait_for(reserved, 60, what=f"{scheduler}: three claims reserved")
    out: dict[str, Any] = {"nodes": sorted(p["spec"]["nodeName"] for p in pods), "claims": []}
    for c in claims:
        owner: dict[str, Any] = next(iter(c["metadata"].get("ownerReferences") or ()), {})
        results = c["status"]["allocation"]["devices"]["results"]
        consumers = sorted(
            (r.get("apiGroup", ""), r["resource"], r["name"]) for r in c["status"]["reservedFor"]
        )
        out["claims"].append((owner.get("kind"), owner.get("name"), len(results), consumers))
    out["claims"].sort()
    out["devices"] = sorted(
        r["device"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]
    )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return out


async def test_a_podgroup_claim_is_allocated_once_and_reserved_for_the_podgroup_as_kube_scheduler_does(
    api: client.ApiClient,
    plane: ControlPlane,
    claim_controller: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    custom: Any = client.CustomObjectsApi(api)
    await ensure_class(custom)
    await create_many(api, [make_node(n, gpus=0) for n in ("q1", "q2")])

    async def publish(run: str) -> None:
        for node in ("q1", "q2"):
            await custom.create_cluster_custom_object(
                GROUP, VERSION, "resourceslices", gpus_and_channel(node, run)
            )

    outcomes = await side_by_side(
        api, plane, tmp_path, "pgclaims", publish, lambda s: group_claims_run(api, s)
    )
    for got in outcomes.values():
        assert got["nodes"][0] == got["nodes"][1], got  # the channel is node-local: one node
        assert got["claims"] == [
            ("Pod", "worker-0", 1, [("", "pods", "worker-0")]),
            ("Pod", "worker-1", 1, [("", "pods", "worker-1")]),
            ("PodGroup", "train", 1, [("scheduling.k8s.io", "podgroups", "train")]),
        ], got
        assert "channel-0" in got["devices"] and len(set(got["devices"])) == 3, got
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    assert shoal["claims"] == kube["claims"]


def skipping_slice(node: str, run: str) -> dict[str, Any]:
    """Two devices of ``node`` from a driver whose node operations the kubelet may skip."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{run}"},
        "spec": {
            "driver": GPU,
            "nodeName": node,
            "pool": {"name": f"{node}-{run}", "generation": 1, "resourceSliceCount": 1},
            "skipNodeOperations": ["*"],
            "devices": [{"name": f"dev-{i}", "attributes": {"type": {"string": "skip"}}} for i in range(2)],
        },
    }


async def test_devices_that_skip_node_operations_go_only_to_nodes_declaring_it_as_kube_scheduler_does(
    api: client.ApiClient, plane: ControlPlane, tmp_path: Path
) -> None:
    """Of o1 (its kubelet declares DRAOptionalNodeOperations) and o2 (an older kubelet), each with
    two such devices: ``a`` and ``b`` get o1's, ``c`` waits although o2's are free."""
    custom: Any = client.CustomObjectsApi(api)
    await ensure_class(custom)
    await create_many(
        api,
        [make_node("o1", gpus=0, declared_features=["DRAOptionalNodeOperations"]), make_node("o2", gpus=0)],
    )
    wants = {"a": ("skip", 1), "b": ("skip", 1), "c": ("skip", 1)}

    async def publish(run: str) -> None:
        for node in ("o1", "o2"):
            made = await custom.create_cluster_custom_object(
                GROUP, VERSION, "resourceslices", skipping_slice(node, run)
            )
            assert made["spec"].get("skipNodeOperations") == ["*"], "the API server dropped the field"

    both = await side_by_side(
        api, plane, tmp_path, "skip", publish, lambda s: one_by_one(api, s, wants, "skip")
    )
    outcomes = {k: v[0] for k, v in both.items()}
    skips = {k: v[1] for k, v in both.items()}
    kube, shoal = outcomes["default-scheduler"], outcomes["shoal"]
    assert kube == {"a": ("o1", ["dev-0"]), "b": ("o1", ["dev-1"]), "c": ("", [])}, kube
    assert shoal == kube
    assert skips["default-scheduler"] == skips["shoal"] == {("*",)}
