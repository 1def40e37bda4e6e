"""Volumes on the real API server, with the real PV binder (kube-controller-manager of the same
release): a training pod whose claim waits for its first consumer is placed on its local PV's
node and the claim ends bound to that PV — by kube-scheduler 1.37 and by shoal alike; and with a
matching local PV on each of two nodes, both prefer the one the claim fills least
(StorageCapacityScoring)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import (
    OperatorProcess,
    create,
    create_many,
    failed_scheduling_note,
    node_of,
    wait_for,
)
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubecontrollermanager import KubeControllerManagerProcess
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def pv_binder(
    crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllerManagerProcess]:
    """kube-controller-manager with only the PV binder, for the tests of this module only."""
    kcm = KubeControllerManagerProcess(crds.kubeconfig, Path(tmp_path_factory.mktemp("kcm")))
    with kcm:
        yield kcm


def local_pv(name: str, node: str, storage_class: str, size: str = "100Gi") -> dict[str, Any]:
    term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "local": {"path": "/mnt/disks/ssd1"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def local_class(name: str) -> dict[str, Any]:
    """A StorageClass for local PVs: no provisioner, bound when the first consumer is scheduled."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def claim(name: str, namespace: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "50Gi"}},
        },
    }


async def place_trainer(
    api: client.ApiClient, namespace: str, scheduler: str, storage_class: str, suffix: str
) -> tuple[str, str]:
    """A PV on n2, its claim, a trainer pod using it: (the pod's node, the PV its claim is bound to)."""
    core: Any = client.CoreV1Api(api)
    pv_name = f"local-{suffix}"
    await create(api, local_pv(pv_name, "n2", storage_class))

    async def available() -> bool:
        pv = await core.read_persistent_volume(pv_name)
        return bool(pv.status.phase == "Available")

    await wait_for(available, 30, what="the PV controller to see the PV")
    await create(api, claim(f"data-{suffix}", namespace, storage_class))
    trainer = make_pod(f"trainer-{suffix}", namespace=namespace, scheduler_name=scheduler, gpus=0)
    trainer["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{suffix}"}}]
    await create(api, trainer)

    async def placed() -> str | None:
        node: str | None = (await core.read_namespaced_pod(f"trainer-{suffix}", namespace)).spec.node_name
        return node

    node = await wait_for(placed, 60, what=f"trainer-{suffix} bound by {scheduler}")

    async def bound() -> str | None:
        pvc = await core.read_namespaced_persistent_volume_claim(f"data-{suffix}", namespace)
        return str(pvc.spec.volume_name) if pvc.status.phase == "Bound" else None

    return node, await wait_for(bound, 60, what=f"data-{suffix} bound")


async def test_local_pv_claim_binds_on_the_pv_node_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    api = clean
    run = uuid.uuid4().hex[:6]
    storage_class = f"local-{run}"
    await create_many(api, [make_node(n, gpus=0, labels={HOST: n}) for n in ("n1", "n2", "n3")])
    await create(api, local_class(storage_class))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube_node, kube_pv = await place_trainer(
            api, namespace, "default-scheduler", storage_class, f"k{run}"
        )
    sched = f"s-{run}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal_node, shoal_pv = await place_trainer(api, namespace, sched, storage_class, f"s{run}")

    assert (kube_node, kube_pv) == ("n2", f"local-k{run}"), "kube-scheduler is the reference"
    assert (shoal_node, shoal_pv) == (kube_node, f"local-s{run}")
    storage: Any = client.StorageV1Api(api)
    core: Any = client.CoreV1Api(api)
    for pv in (kube_pv, shoal_pv):
        await core.delete_persistent_volume(pv)
    await storage.delete_storage_class(storage_class)


async def test_the_roomier_local_pv_wins_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """A 50Gi claim matches a 60Gi PV on `tight` (83 % used: score 17) and a 500Gi one on `roomy`
    (10 %: score 90); VolumeBinding's capacity score (1.37's default shape) picks `roomy` for both
    schedulers, though every other score is even."""
    api = clean
    core: Any = client.CoreV1Api(api)
    run = uuid.uuid4().hex[:6]
    storage_class = f"local-{run}"
    await create_many(api, [make_node(n, gpus=0, labels={HOST: n}) for n in ("tight", "roomy")])
    await create(api, local_class(storage_class))

    async def place(scheduler: str, suffix: str) -> tuple[str, str]:
        pvs = [
            local_pv(f"tight-{suffix}", "tight", storage_class, "60Gi"),
            local_pv(f"roomy-{suffix}", "roomy", storage_class, "500Gi"),
        ]
        await create_many(api, pvs)

        async def available() -> bool:
            phases = [(await core.read_persistent_volume(p["metadata"]["name"])).status.phase for p in pvs]
            return phases == ["Available", "Available"]

        await wait_for(available, 30, what="the PV controller to see the PVs")
        await create(api, claim(f"data-{suffix}", namespace, storage_class))
        pod = make_pod(f"trainer-{suffix}", namespace=namespace, scheduler_name=scheduler, gpus=0)
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{suffix}"}}]
        await create(api, pod)

        async def bound() -> tuple[str, str] | None:
            got = await core.read_namespaced_pod(f"trainer-{suffix}", namespace)
            pvc = await core.read_namespaced_persistent_volume_claim(f"data-{suffix}", namespace)
            if got.spec.node_name and pvc.status.phase == "Bound":
                return str(got.spec.node_name), str(pvc.spec.volume_name)
            return None

        where: tuple[str, str] = await wait_for(bound, 60, what=f"trainer-{suffix} placed, claim bound")
        await core.delete_namespaced_pod(f"trainer-{suffix}", namespace, grace_period_seconds=0)
        await core.delete_namespaced_persistent_volume_claim(f"data-{suffix}", namespace)
        for p in pvs:
            await core.delete_persistent_volume(p["metadata"]["name"])
        return where

    # some CPU in use where each scheduler's resource scores would otherwise lean away from
    # `roomy`: on `roomy` for kube-scheduler (it spreads: LeastAllocated), on `tight` for shoal (it
    # packs: MostAllocated, weight 3); far too little to outweigh the capacity score either way
    load = f"cpu-user-{run}"
    await create(api, make_pod(load, namespace=namespace, cpu="4", memory=None, node_name="roomy"))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await place("default-scheduler", f"k{run}")
    await core.delete_namespaced_pod(load, namespace, grace_period_seconds=0)
    await create(api, make_pod(f"{load}-2", namespace=namespace, cpu="4", memory=None, node_name="tight"))
    sched = f"s-{run}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await place(sched, f"s{run}")
    assert kube == ("roomy", f"roomy-k{run}"), "kube-scheduler is the reference"
    assert shoal == ("roomy", f"roomy-s{run}")
    await client.StorageV1Api(api).delete_storage_class(storage_class)


def capacity(name: str, storage_class: str, node: str, size: str) -> dict[str, Any]:
    """What a CSI driver's external-provisioner publishes for one node's pool."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name},
        "storageClassName": storage_class,
        "nodeTopology": {"matchLabels": {HOST: node}},
        "capacity": size,
    }


async def capacity_run(
    api: client.ApiClient, namespace: str, scheduler: str, storage_class: str, suffix: str
) -> tuple[str, str]:
    """A pod whose 10Gi claim two nodes' pools could hold (20Gi and 100Gi): the node the
    scheduler selects for provisioning (the claim's selected-node annotation: no provisioner runs,
    so the pod itself stays unbound); and the event message of a pod whose 200Gi fits nowhere."""
    core: Any = client.CoreV1Api(api)
    for name, size in (("fits", "10Gi"), ("huge", "200Gi")):
        pvc = claim(f"{name}-{suffix}", namespace, storage_class)
        pvc["spec"]["resources"]["requests"]["storage"] = size
        await create(api, pvc)
        pod = make_pod(f"{name}-{suffix}", namespace=namespace, scheduler_name=scheduler, gpus=0)
        pod["spec"]["volumes"] = [
            {"name": "data", "persistentVolumeClaim": {"claimName": f"{name}-{suffix}"}}
        ]
        await create(api, pod)

    async def selected() -> str | None:
        pvc = await core.read_namespaced_persistent_volume_claim(f"fits-{suffix}", namespace)
        found: str | None = (pvc.metadata.annotations or {}).get("volume.kubernetes.io/selected-node")
        return found

    async def refused() -> str | None:
        pod = await core.read_namespaced_pod(f"huge-{suffix}", namespace)
        for c in pod.status.conditions or ():
            if c.type == "PodScheduled" and c.reason == "Unschedulable":
                return str(c.message)
        return None

    node = await wait_for(selected, 60, what=f"{scheduler}: a node selected for fits-{suffix}")
    message = await wait_for(refused, 60, what=f"{scheduler}: huge-{suffix} refused")
    for name in ("fits", "huge"):
        await core.delete_namespaced_pod(f"{name}-{suffix}", namespace, grace_period_seconds=0)
    return node, message


async def test_storage_capacity_decides_where_a_claim_is_provisioned_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    """CSIStorageCapacity (GA): a driver that publishes its capacity gets a claim provisioned only
    where a pool holds it, and StorageCapacityScoring prefers the roomier pool; a claim no pool
    holds is refused with kube-scheduler's reason. kube-scheduler 1.37.2 and shoal, same objects."""
    api = clean
    run = uuid.uuid4().hex[:6]
    driver, storage_class = f"lvm-{run}.csi.example.com", f"lvm-{run}"
    nodes = {"small": f"small-{run}", "big": f"big-{run}"}
    await create_many(api, [make_node(n, gpus=0, labels={HOST: n}) for n in nodes.values()])
    await create(
        api,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": driver},
            "spec": {"storageCapacity": True, "attachRequired": False},
        },
    )
    await create(
        api,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": driver,
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    for which, size in (("small", "20Gi"), ("big", "100Gi")):
        body = capacity(f"{which}-{run}", storage_class, nodes[which], size)
        body["metadata"]["namespace"] = namespace
        await create(api, body)
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await capacity_run(api, namespace, "default-scheduler", storage_class, f"k{run}")
    sched = f"s-{run}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await capacity_run(api, namespace, sched, storage_class, f"s{run}")
    assert kube[0] == nodes["big"], "kube-scheduler is the reference"
    assert shoal[0] == kube[0]
    # every node of the cluster (other tests' too) lacks a pool for 200Gi: the same count, reason
    said = [
        re.search(r"0/\d+ nodes are available: \d+ node\(s\) did not have enough free storage", m)
        for m in (kube[1], shoal[1])
    ]
    assert said[0] is not None and said[1] is not None, (kube, shoal)
    assert said[0].group(0) == said[1].group(0), (kube, shoal)


async def vac_run(
    api: client.ApiClient, namespace: str, scheduler: str, storage_class: str, run: str
) -> tuple[str, str]:
    """Two local PVs of one class: ``plain-*`` (60Gi, on v2: the smaller, so the first pick if
    classes were ignored) and ``gold-*`` (100Gi, on v1, VolumeAttributesClass ``gold-<run>``); a
    claim asking for that class. (the trainer's node, the PV its claim is bound to)."""
    core: Any = client.CoreV1Api(api)
    tag = f"{scheduler[:1]}{run}"
    plain, gold = (
        local_pv(f"plain-{tag}", "v2", storage_class, "60Gi"),
        local_pv(f"gold-{tag}", "v1", storage_class),
    )
    gold["spec"]["volumeAttributesClassName"] = f"gold-{run}"
    for pv in (plain, gold):  # the API server takes a class only on a CSI volume
        pv["spec"].pop("local")
        pv["spec"]["csi"] = {"driver": "local.csi.example.com", "volumeHandle": pv["metadata"]["name"]}
        await create(api, pv)
    wanted = claim(f"data-{tag}", namespace, storage_class)
    wanted["spec"]["volumeAttributesClassName"] = f"gold-{run}"
    await create(api, wanted)
    trainer = make_pod(f"trainer-{tag}", namespace=namespace, scheduler_name=scheduler, gpus=0)
    trainer["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{tag}"}}]
    await create(api, trainer)
    node = await wait_for(
        lambda: node_of(api, namespace, f"trainer-{tag}"), 60, what=f"{scheduler}: trainer bound"
    )

    async def bound() -> str | None:
        pvc = await core.read_namespaced_persistent_volume_claim(f"data-{tag}", namespace)
        return str(pvc.spec.volume_name) if pvc.status.phase == "Bound" else None

    volume = await wait_for(bound, 60, what=f"{scheduler}: claim bound")
    for pv in (plain, gold):
        await core.delete_persistent_volume(pv["metadata"]["name"])
    return str(node), volume.replace(tag, "*")


async def test_a_claim_gets_a_pv_of_its_volume_attributes_class_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """VolumeAttributesClass (GA since 1.34): VolumeBinding matches a claim only to a PV that names
    the same class. The smaller PV without it loses to the one that has it, on the other node."""
    run = uuid.uuid4().hex[:6]
    storage_class = f"local-{run}"
    await create_many(clean, [make_node(n, gpus=0, labels={HOST: n}) for n in ("v1", "v2")])
    await create(clean, local_class(storage_class))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await vac_run(clean, namespace, "default-scheduler", storage_class, run)
    sched = f"vac-{run}"
    await create(clean, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await vac_run(clean, namespace, sched, storage_class, run)
    assert kube == ("v1", "gold-*"), "kube-scheduler is the reference"
    assert shoal == kube


ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"


def ebs_pv(name: str, claim_name: str, namespace: str) -> dict[str, Any]:
    """An in-tree AWS EBS volume of zone us-east-1a, pre-bound to ``claim_name``."""
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1a"]}]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {ZONE: "us-east-1a"}},
        "spec": {
            "capacity": {"storage": "100Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123456789abcdef0", "fsType": "ext4"},
            "claimRef": {"name": claim_name, "namespace": namespace},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


async def test_an_in_tree_pv_on_a_migrated_node_needs_the_csi_drivers_topology_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    namespace: str,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    """CSI migration: on e1, whose CSINode says the EBS plugin is migrated, the in-tree PV's zone is
    the EBS CSI driver's zone key, which e1 lacks (its CSI node plugin has not labelled it); e2,
    not migrated, is checked against the PV as written. Both schedulers: a pod pinned to e1 waits,
    naming the PV's node affinity; the free one goes to e2."""
    core: Any = client.CoreV1Api(clean)
    run = uuid.uuid4().hex[:6]
    zone = {ZONE: "us-east-1a"}
    await create_many(clean, [make_node(n, gpus=0, labels={HOST: n, **zone}) for n in ("e1", "e2")])
    await create(
        clean,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {
                "name": "e1",
                "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"},
            },
            "spec": {"drivers": []},
        },
    )
    outcomes: dict[str, tuple[str | None, str]] = {}
    for scheduler in ("default-scheduler", f"ebs-{run}"):
        tag = f"{scheduler[:1]}{run}"
        names = {"free": f"free-{tag}", "pinned": f"pinned-{tag}"}
        for role, name in names.items():
            await create(clean, ebs_pv(f"ebs-{role}-{tag}", f"data-{name}", namespace))
            pvc = claim(f"data-{name}", namespace, "")
            pvc["spec"]["volumeName"] = f"ebs-{role}-{tag}"
            await create(clean, pvc)

        async def bound(names: dict[str, str] = names) -> bool:
            claims = [
                await core.read_namespaced_persistent_volume_claim(f"data-{n}", namespace)
                for n in names.values()
            ]
            return all(c.status.phase == "Bound" for c in claims)

        await wait_for(bound, 60, what="the PV binder binds the pre-bound claims")
        if scheduler != "default-scheduler":
            await create(clean, make_profile(scheduler, {**DEFAULT_PROFILE_SPEC}, scheduler_name=scheduler))
        for role, name in names.items():
            pod = make_pod(name, namespace=namespace, scheduler_name=scheduler, gpus=0)
            pod["spec"]["volumes"] = [
                {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}
            ]
            if role == "pinned":
                pod["spec"]["nodeSelector"] = {HOST: "e1"}
            await create(clean, pod)

        async def outcome(names: dict[str, str] = names) -> tuple[str | None, str] | None:
            note = await failed_scheduling_note(clean, namespace, names["pinned"])
            node = await node_of(clean, namespace, names["free"])
            return (node, note) if note and node else None

        if scheduler == "default-scheduler":
            with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
                outcomes[scheduler] = await wait_for(outcome, 60, what="kube-scheduler: both pods decided")
        else:
            outcomes[scheduler] = await wait_for(outcome, 60, what="shoal: both pods decided")
    kube, shoal = outcomes["default-scheduler"], outcomes[f"ebs-{run}"]
    for node, note in (kube, shoal):
        assert node == "e2", (kube, shoal)
        assert "didn't match PersistentVolume's node affinity" in note, (kube, shoal)
