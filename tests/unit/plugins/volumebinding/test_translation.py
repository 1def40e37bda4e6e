"""In-tree PVs translated to their CSI driver's topology (translation.py): csi-translation-lib
v0.37.2's TestTranslateTopologyFromInTreeToCSI cases, the zone label made a requirement, the
translation errors; and through VolumeBinding in the simulator, a migrated node that lacks the CSI
driver's zone label refused where an unmigrated one is checked against the PV as written."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.core.state.nodeselectors import Requirement, SelectorTerm
from shoal.plugins.volumebinding.translation import (
    AWS_EBS,
    GCE_PD,
    REGION,
    ZONE,
    TranslationError,
    translated_affinity,
)
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

GCE_KEY, EBS_KEY = "topology.gke.io/zone", "topology.ebs.csi.aws.com/zone"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
GA_LABELS = {ZONE: "us-east1-a", REGION: "us-east1"}


def term(*reqs: tuple[str, str]) -> SelectorTerm:
    return SelectorTerm(tuple(Requirement(k, "In", (v,)) for k, v in reqs))


def test_ga_zone_in_the_affinity_becomes_the_gce_key() -> None:
    """Upstream: Replace GA Kubernetes Zone Topology to GCE CSI Topology."""
    got = translated_affinity(GCE_PD, "disk", GA_LABELS, (term((ZONE, "us-east1-a"), (REGION, "us-east1")),))
    assert got == (term((GCE_KEY, "us-east1-a"), (REGION, "us-east1")),)


def test_beta_zone_in_the_affinity_becomes_the_gce_key_and_the_region_ga() -> None:
    """Upstream: Replace Beta Kubernetes Topology to GCE CSI Topology and upgrade region label (the
    affinity's beta keys win over the PV's GA labels)."""
    beta = (term((BETA_ZONE, "us-west2-b"), (BETA_REGION, "us-west2")),)
    got = translated_affinity(GCE_PD, "disk", GA_LABELS, beta)
    assert got == (term((GCE_KEY, "us-west2-b"), (REGION, "us-west2")),)


def test_a_zone_label_becomes_a_requirement_of_every_term_or_of_a_new_one() -> None:
    labels = {ZONE: "us-east-1b__us-east-1a"}
    assert translated_affinity(AWS_EBS, "vol-1", labels, None) == (
        SelectorTerm((Requirement(EBS_KEY, "In", ("us-east-1a", "us-east-1b")),)),
    )
    rack = term(("rack", "r1"))
    assert translated_affinity(AWS_EBS, "vol-1", labels, (rack,)) == (
        SelectorTerm(
            (Requirement("rack", "In", ("r1",)), Requirement(EBS_KEY, "In", ("us-east-1a", "us-east-1b")))
        ),
    )
    # nothing to translate: the PV's affinity as it is (none stays none)
    assert translated_affinity(AWS_EBS, "vol-1", {}, None) is None
    assert translated_affinity("kubernetes.io/azure-disk", "uri", labels, (rack,)) == (rack,)


@pytest.mark.parametrize(
    ("plugin", "volume", "labels", "error"),
    [
        (AWS_EBS, "aws://us-east-1a/disk-1", {}, "failed to translate Kubernetes ID to EBS Volume ID"),
        (AWS_EBS, "aws://vol-1", {}, "failed to translate Kubernetes ID to EBS Volume ID"),
        (GCE_PD, "disk", {ZONE: "us-east1-a__europe-west1-b"}, "multiple or no regions"),
        (GCE_PD, "disk", {ZONE: "us-east1-a__zone"}, "zone in unexpected format"),
    ],
)
def test_what_the_library_cannot_translate_is_an_error(
    plugin: str, volume: str, labels: dict[str, str], error: str
) -> None:
    with pytest.raises(TranslationError, match=error):
        translated_affinity(plugin, volume, labels, None)


def test_good_ids_translate() -> None:
    assert translated_affinity(AWS_EBS, "aws://us-east-1a/vol-0abc", {}, None) is None
    assert translated_affinity(GCE_PD, "disk", {ZONE: "us-east1-a__us-east1-b"}, None) is not None


def ebs_pv(name: str, zone: str) -> dict[str, Any]:
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {ZONE: zone}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "awsElasticBlockStore": {"volumeID": f"aws://{zone}/vol-0abc"},
            "claimRef": {"name": "data", "namespace": "default", "uid": "uid-data"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }


def bound_claim() -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": "default",
            "uid": "uid-data",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "5Gi"}},
            "volumeName": "pv",
        },
        "status": {"phase": "Bound"},
    }


def csi_node(name: str, migrated: bool) -> dict[str, Any]:
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": AWS_EBS} if migrated else {}
    return {
        "kind": "CSINode",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"drivers": []},
    }


def run(*objs: dict[str, Any]) -> dict[str, Any]:
    pod = make_pod("t")
    pod["metadata"]["uid"] = "uid-t"
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    out: dict[str, Any] = Simulation(
        InMemoryCluster([*objs, ebs_pv("pv", "us-east-1a"), bound_claim(), pod])
    ).run_sync()
    return out


def zone_node(name: str, **labels: str) -> dict[str, Any]:
    obj = make_node(name)
    obj["metadata"].setdefault("labels", {}).update({ZONE: "us-east-1a", **labels})
    return obj


def test_a_migrated_node_needs_the_csi_drivers_zone_label() -> None:
    # migrated, without the EBS driver's zone label: refused; as written, the GA zone would do
    out = run(zone_node("m1"), csi_node("m1", migrated=True))
    assert out["uid-t"].node is None
    assert "didn't match PersistentVolume's node affinity" in out["uid-t"].message
    # the CSI node plugin set its label: placed
    out = run(zone_node("m1", **{EBS_KEY: "us-east-1a"}), csi_node("m1", migrated=True))
    assert out["uid-t"].node == "m1"
    # not migrated: the PV as written
    out = run(zone_node("u1"), csi_node("u1", migrated=False))
    assert out["uid-t"].node == "u1"


def gce_pv() -> dict[str, Any]:
    """binder_test.go's makeTestPVForCSIMigration: a GCE PD bound to the claim, no node affinity
    (the translation writes one), beta zone and region labels."""
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": "pv", "labels": {BETA_ZONE: "us-east-1", BETA_REGION: "us-east-1a"}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "gcePersistentDisk": {"pdName": "test-disk", "fsType": "ext4"},
            "claimRef": {"name": "data", "namespace": "default", "uid": "uid-data"},
        },
        "status": {"phase": "Bound"},
    }


@pytest.mark.parametrize(
    ("case", "node_zone", "csi_node_plugins", "placed"),
    [
        ("pvc-bound", "us-east-1", "kubernetes.io/gce-pd", True),
        ("pvc-bound,csinode-not-migrated", "us-east-1", "", True),
        ("pvc-bound,missing-csinode", "us-east-1", None, True),
        ("pvc-bound,node-different-zone", "us-east-2", "kubernetes.io/gce-pd", False),
    ],
)
def test_find_pod_volumes_with_csi_migration(
    case: str, node_zone: str, csi_node_plugins: str | None, placed: bool
) -> None:
    """kube-scheduler v1.37.2 volumebinding/binder_test.go TestFindPodVolumesWithCSIMigration: a
    node labelled with the GCE PD driver's zone, its CSINode listing the plugin as migrated (or
    not, or absent)."""
    node = make_node("node1")
    node["metadata"].setdefault("labels", {})[GCE_KEY] = node_zone
    objs: list[dict[str, Any]] = [node, gce_pv(), bound_claim()]
    if csi_node_plugins is not None:
        objs.append(
            {
                "kind": "CSINode",
                "metadata": {
                    "name": "node1",
                    "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": csi_node_plugins},
                },
                "spec": {"drivers": []},
            }
        )
    pod = make_pod("t")
    pod["metadata"]["uid"] = "uid-t"
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    out = Simulation(InMemoryCluster([*objs, pod])).run_sync()
    assert (out["uid-t"].node == "node1") is placed, (case, out["uid-t"].message)
