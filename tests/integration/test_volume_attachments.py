"""NodeVolumeLimits on the real API server, with kube-scheduler 1.37 as the reference.

VolumeAttachments count towards a node's CSI attach limit: a volume still attached to a node after
its pod left takes the node's last slot, so a pod with another volume waits; when the attachment
is deleted (the attach-detach controller detached the volume), the pod is placed. And a CSIDriver
with ``preventPodSchedulingIfMissing`` (VolumeLimitScaling, beta and on in 1.37) keeps pods using
its volumes off nodes whose CSINode lacks it. The claims are bound by the real PV binder
(kube-controller-manager of the same release), as in a cluster."""

from __future__ import annotations

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
    list_all,
    node_of,
    wait_for,
)
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubecontrollermanager import KubeControllerManagerProcess
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

DRIVER = "ebs.csi.aws.com"


@pytest.fixture(scope="module")
def pv_binder(
    crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeControllerManagerProcess]:
    kcm = KubeControllerManagerProcess(crds.kubeconfig, Path(tmp_path_factory.mktemp("kcm-va")))
    with kcm:
        yield kcm


def csi_volume(name: str, namespace: str, driver: str = DRIVER) -> list[dict[str, Any]]:
    """A CSI PV pre-bound to its claim (as a static provisioning admin writes them)."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {"driver": driver, "volumeHandle": f"vol-{name}", "fsType": "ext4"},
            "claimRef": {"namespace": namespace, "name": name},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": "",
            "volumeName": name,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }
    return [pv, pvc]


def attachment(name: str, node: str, pv: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": DRIVER, "nodeName": node, "source": {"persistentVolumeName": pv}},
    }


async def attach_limit_run(api: client.ApiClient, node: str, scheduler: str) -> tuple[str, str]:
    """A pod whose volume would exceed the node's limit of 1 while another volume is attached
    there: (the FailedScheduling message it gets, the node it is placed on once detached)."""
    core: Any = client.CoreV1Api(api)
    storage: Any = client.StorageV1Api(api)
    ns = f"va-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    old, new = f"{ns}-old", f"{ns}-new"
    await create_many(api, [*csi_volume(old, ns), *csi_volume(new, ns)])

    async def bound() -> bool:
        claims = await list_all(core.list_namespaced_persistent_volume_claim, ns)
        done = [
            c
            for c in claims
            if (c["metadata"].get("annotations") or {}).get("pv.kubernetes.io/bind-completed")
        ]
        return len(done) == 2

    await wait_for(bound, 60, what="the PV binder binds both claims")
    va = f"csi-{ns}"
    await create(api, attachment(va, node, old))  # the volume of a pod that left, still attached
    pod = make_pod("user", namespace=ns, scheduler_name=scheduler)
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": new}}]
    await create(api, pod)

    # the namespace holds this one pod
    message = await wait_for(
        lambda: failed_scheduling_note(api, ns, "user"), 60, what=f"{scheduler}: FailedScheduling"
    )
    read = await core.read_namespaced_pod("user", ns)
    assert not read.spec.node_name, "placed over the attach limit"
    await storage.delete_volume_attachment(va)  # detached

    where = await wait_for(lambda: node_of(api, ns, "user"), 60, what=f"{scheduler}: placed once detached")
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)  # its volume leaves the node
    return message, where


async def test_attachments_count_towards_the_limit_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    api = clean
    node = make_node("va-node", labels={"kubernetes.io/hostname": "va-node"})
    csinode = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "va-node"},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": "i-0va", "allocatable": {"count": 1}}]},
    }
    await create_many(api, [node, csinode])
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube_message, kube_node = await attach_limit_run(api, "va-node", "default-scheduler")
    sched = f"va-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal_message, shoal_node = await attach_limit_run(api, "va-node", sched)
    assert "1 node(s) exceed max volume count" in kube_message, kube_message
    assert "1 node(s) exceed max volume count" in shoal_message, shoal_message
    assert kube_node == shoal_node == "va-node"


GUARDED = "efs.csi.aws.com"  # a driver of its own: the CSIDriver below outlives no other test


async def driver_missing_run(api: client.ApiClient, scheduler: str) -> tuple[str | None, str]:
    """(where a pod using the guarded driver's volume goes, the FailedScheduling note of one pinned
    to a node whose CSINode lacks the driver)."""
    core: Any = client.CoreV1Api(api)
    ns = f"vls-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    vol = f"{ns}-data"
    await create_many(api, csi_volume(vol, ns, GUARDED))

    async def bound() -> bool:
        pvc = await core.read_namespaced_persistent_volume_claim(vol, ns)
        return bool((pvc.metadata.annotations or {}).get("pv.kubernetes.io/bind-completed"))

    await wait_for(bound, 60, what="the PV binder binds the claim")
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": vol}}]
    free = make_pod("free", namespace=ns, scheduler_name=scheduler)
    pinned = make_pod("pinned", namespace=ns, scheduler_name=scheduler, node_selector={"vls": "no-efs"})
    for pod in (free, pinned):
        pod["spec"]["volumes"] = volumes
    await create_many(api, [free, pinned])

    where = await wait_for(
        lambda: node_of(api, ns, "free"), 60, what=f"{scheduler}: placed where the driver is"
    )
    note = await wait_for(
        lambda: failed_scheduling_note(api, ns, "pinned"), 60, what=f"{scheduler}: pinned pod refused"
    )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return where, note


async def test_a_driver_missing_on_a_node_keeps_pods_off_it_as_with_kube_scheduler(
    clean: client.ApiClient,
    crds: ControlPlane,
    operator: OperatorProcess,
    pv_binder: KubeControllerManagerProcess,
    tmp_path: Path,
) -> None:
    api = clean
    storage: Any = client.StorageV1Api(api)
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": GUARDED},
        "spec": {"attachRequired": True, "preventPodSchedulingIfMissing": True},
    }
    csinodes: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": name},
            "spec": {"drivers": [{"name": d, "nodeID": f"i-{name}"} for d in drivers]},
        }
        for name, drivers in (("vls-has-efs", [GUARDED, DRIVER]), ("vls-no-efs", [DRIVER]))
    ]
    nodes = [
        make_node("vls-has-efs", labels={"vls": "has-efs"}),
        make_node("vls-no-efs", labels={"vls": "no-efs"}),
        make_node("vls-bare", labels={"vls": "bare"}),  # no CSINode at all
    ]
    await create_many(api, [driver, *csinodes, *nodes])
    try:
        stored = await storage.read_csi_driver(GUARDED)
        assert stored.spec.prevent_pod_scheduling_if_missing is True, "the API server dropped the field"
        with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
            kube = await driver_missing_run(api, "default-scheduler")
        sched = f"vls-{uuid.uuid4().hex[:6]}"
        await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
        shoal = await driver_missing_run(api, sched)
    finally:
        await storage.delete_csi_driver(GUARDED)
        for c in csinodes:
            await storage.delete_csi_node(c["metadata"]["name"])
    assert kube[0] == shoal[0] == "vls-has-efs"
    missing = f"1 {GUARDED} CSI driver is not installed on the node"
    for note in (kube[1], shoal[1]):
        assert missing in note and "2 node(s) didn't match Pod's node affinity/selector" in note, note
