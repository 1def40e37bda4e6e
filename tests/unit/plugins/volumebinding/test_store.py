"""Storage objects (PVs, claims, StorageClasses, CSINodes): parsed once, kept in the cache, read from
dumps by ``shoal simulate``; a malformed one is one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.cli import main
from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.core.state.cache import ClusterCache
from shoal.core.state.objects import PodInfo
from shoal.core.state.podvolumes import Disk
from shoal.plugins.volumebinding.objects import CSINodeInfo, PVCInfo, PVInfo, StorageClassInfo, decode_storage
from shoal.plugins.volumebinding.store import VolumeStore
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

GI = 2**30


def local_pv(name: str = "pv-1", node: str = "n1", size: str = "10Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "z1"}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "local": {"path": "/mnt/disks/1"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def claim(name: str = "data", **spec: Any) -> dict[str, Any]:
    body = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}, **spec}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "team"},
        "spec": body,
    }


LOCAL_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "local"},
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
}
CSI_NODE = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSINode",
    "metadata": {"name": "n1"},
    "spec": {
        "drivers": [
            {
                "name": "ebs.csi.aws.com",
                "nodeID": "i-1",
                "allocatable": {"count": 25},
                "topologyKeys": ["zone"],
            },
            {"name": "nfs", "nodeID": "n1"},
        ]
    },
}


def test_pv_keeps_what_the_plugins_read() -> None:
    pv = PVInfo.from_dict(local_pv())
    assert (pv.name, pv.storage_class, pv.capacity, pv.access_modes) == (
        "pv-1",
        "local",
        10 * GI,
        ("ReadWriteOnce",),
    )
    assert pv.claim_ref is None and pv.csi is None
    assert pv.node_affinity_matches("n1", {"kubernetes.io/hostname": "n1"})
    assert not pv.node_affinity_matches("n2", {"kubernetes.io/hostname": "n2"})
    assert PVInfo.from_dict({"metadata": {"name": "any"}}).node_affinity_matches("n2", {})
    bad = PVInfo.from_dict({"metadata": {"name": "bad"}, "spec": {"capacity": {"storage": "lots"}}})
    assert bad.capacity is None and "spec.capacity.storage" in bad.problems


def test_claim_class_follows_the_beta_annotation_first() -> None:
    pvc = PVCInfo.from_dict(claim(storageClassName="fast", volumeName="pv-1"))
    assert (pvc.key, pvc.storage_class, pvc.volume_name, pvc.request, pvc.bound) == (
        "team/data",
        "fast",
        "pv-1",
        5 * GI,
        True,
    )
    annotated = claim(storageClassName="fast")
    annotated["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "old"}
    assert PVCInfo.from_dict(annotated).storage_class == "old"
    broken = PVCInfo.from_dict(claim(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}))
    assert broken.selector is None and "spec.selector" in broken.problems


def test_storage_class_and_csi_node() -> None:
    sc = StorageClassInfo.from_dict(LOCAL_CLASS)
    assert (sc.provisioner, sc.binding_mode) == ("kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    assert sc.allowed_topologies[0].matches("n1", {"zone": "b"})
    assert not sc.allowed_topologies[0].matches("n1", {"zone": "c"})
    csi = CSINodeInfo.from_dict(CSI_NODE)
    assert csi.drivers["ebs.csi.aws.com"].count == 25
    assert csi.drivers["nfs"].count is None


def test_pod_volumes_claims_ephemeral_and_disks() -> None:
    raw = make_pod("p", namespace="team")
    raw["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "pd", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": True}},
        {"name": "cfg", "configMap": {"name": "c"}},
    ]
    pod = PodInfo.from_dict(raw)
    assert [(v.name, v.claim, v.ephemeral) for v in pod.volumes] == [
        ("data", "data", False),
        ("scratch", "p-scratch", True),
        ("pd", None, False),
    ]
    assert pod.volumes[2].disk == Disk("gcePersistentDisk", ("disk-1",), True)
    assert pod.volumes[2].disk.conflicts(Disk("gcePersistentDisk", ("disk-1",), False))
    assert not pod.volumes[2].disk.conflicts(Disk("gcePersistentDisk", ("disk-1",), True))


def test_cache_counts_claim_users_of_placed_pods() -> None:
    cache = ClusterCache()
    raw = make_pod("p", namespace="team", node_name="n1")
    raw["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pod = PodInfo.from_dict(raw)
    cache.upsert_pod(pod)
    assert cache.claim_users == {"team/data": 1}
    cache.remove_pod(pod.uid)
    assert cache.claim_users == {}


def test_scheduler_keeps_storage_objects_and_signals_them() -> None:
    cluster = InMemoryCluster(
        [make_node("n1"), local_pv(), claim(), {**LOCAL_CLASS}, CSI_NODE],
    )
    sim = Simulation(cluster)
    store = sim.scheduler.cache.store(VolumeStore)
    assert set(store.pvs) == {"pv-1"} and set(store.pvcs) == {"team/data"}
    assert set(store.classes) == {"local"} and set(store.csi_nodes) == {"n1"}
    seen: list[ClusterEvent] = []

    def record(event: ClusterEvent) -> int:
        seen.append(event)
        return 0

    sim.scheduler.queue.on_event = record  # type: ignore[method-assign]
    sim.scheduler.on_object(PVInfo.from_dict(local_pv()), deleted=True)
    assert store.pvs == {} and seen[0].kind == EventKind.STORAGE_CHANGE


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "PersistentVolume", "metadata": {}}, "PersistentVolume without metadata.name"),
        ({"kind": "StorageClass", "metadata": {"name": "x"}, "allowedTopologies": [5]}, None),
        (
            {"kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "t"}, "spec": "no"},
            "PersistentVolumeClaim t/c: malformed",
        ),
        (
            {
                "kind": "CSINode",
                "metadata": {"name": "n"},
                "spec": {"drivers": [{"name": "d", "allocatable": 3}]},
            },
            "CSINode n: malformed",
        ),
    ],
)
def test_bad_storage_object_is_named(obj: dict[str, Any], message: str | None) -> None:
    if message is None:
        decode_storage(obj)  # ignored entries are skipped, not fatal
        return
    with pytest.raises(ValueError, match=message):
        decode_storage(obj)


def test_simulate_reads_storage_kinds_and_names_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.yaml"
    pod = make_pod("trainer", namespace="team")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    items = [make_node("n1"), local_pv(), claim(), LOCAL_CLASS, CSI_NODE, pod]
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["simulate", "--cluster", str(dump), "--no-scores"]) == 0
    assert "team/trainer" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": [1]}))
    assert main(["simulate", "--cluster", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PersistentVolumeClaim default/c: malformed" in err
