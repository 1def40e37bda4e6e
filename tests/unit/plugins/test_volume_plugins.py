"""VolumeZone, VolumeRestrictions and NodeVolumeLimits over several nodes at once (upstream's tables
have one node each), and through the default profile: in-tree disks are no longer refused."""

from __future__ import annotations

from typing import Any

from shoal.core.framework.cyclestate import CycleState
from shoal.core.state.objects import PodInfo
from shoal.plugins.nodevolumelimits.attachments import Attachments, VolumeAttachmentInfo
from shoal.plugins.nodevolumelimits.plugin import NodeVolumeLimits
from shoal.plugins.volumebinding.objects import decode_storage
from shoal.plugins.volumerestrictions import DISK_CONFLICT, READ_WRITE_ONCE_POD_CONFLICT, VolumeRestrictions
from shoal.plugins.volumezone import REASON as ZONE_REASON
from shoal.plugins.volumezone import VolumeZone
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import cache_with, rejected_names, store_objects

ZONE = "topology.kubernetes.io/zone"


def node(name: str, **labels: str) -> dict[str, Any]:
    obj = make_node(name)
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def with_volumes(name: str, *volumes: dict[str, Any], node_name: str | None = None) -> dict[str, Any]:
    obj = make_pod(name, node_name=node_name) if node_name else make_pod(name)
    obj["spec"]["volumes"] = list(volumes)
    return obj


def claim_volume(claim: str) -> dict[str, Any]:
    return {"name": claim, "persistentVolumeClaim": {"claimName": claim}}


def pending(obj: dict[str, Any]) -> PodInfo:
    pod = PodInfo.from_dict(obj)
    pod.uid = "uid-incoming"
    return pod


def storage(cache: Any, *objs: dict[str, Any]) -> None:
    store_objects(cache, *objs)


def test_volume_zone_rejects_nodes_outside_the_pv_zones_keeps_unlabelled_ones() -> None:
    cache = cache_with(
        [node("a", **{ZONE: "z1"}), node("b", **{ZONE: "z2"}), node("c"), node("d", **{ZONE: "z3"})]
    )
    storage(
        cache,
        {"kind": "PersistentVolume", "metadata": {"name": "pv", "labels": {ZONE: "z1__z3"}}},
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"volumeName": "pv"},
        },
    )
    plugin, state = VolumeZone(cache), CycleState()
    pod = pending(with_volumes("p", claim_volume("data")))
    assert plugin.pre_filter(state, pod)[1].ok
    rejections = plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert rejected_names(cache.table, rejections) == {ZONE_REASON: {"b"}}


def test_volume_restrictions_disk_conflict_on_one_node_and_read_write_once_pod_everywhere() -> None:
    disk = {"name": "pd", "gcePersistentDisk": {"pdName": "disk-1"}}
    holder = with_volumes("holder", disk, claim_volume("solo"), node_name="a")
    cache = cache_with([node("a"), node("b"), node("c")], [holder])
    storage(
        cache,
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "solo", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOncePod"]},
        },
    )
    plugin = VolumeRestrictions(cache)
    state = CycleState()
    pod = pending(with_volumes("p", disk))
    assert plugin.pre_filter(state, pod)[1].ok
    rejections = plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert rejected_names(cache.table, rejections) == {DISK_CONFLICT: {"a"}}

    state = CycleState()
    pod = pending(with_volumes("q", disk, claim_volume("solo")))
    assert plugin.pre_filter(state, pod)[1].ok
    rejections = plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert rejected_names(cache.table, rejections) == {
        DISK_CONFLICT: {"a"},
        READ_WRITE_ONCE_POD_CONFLICT: {"b", "c"},
    }
    # the holder leaves: the claim and the disk are free
    cache.remove_pod(next(iter(cache.pods)))
    assert plugin.pre_filter(CycleState(), pod)[1].ok
    assert cache.claim_users == {}


def test_node_volume_limits_only_where_the_csinode_limits_the_driver() -> None:
    def csi_claim(name: str) -> list[dict[str, Any]]:
        return [
            {
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": name}},
            },
            {
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"volumeName": name},
            },
        ]

    existing = [with_volumes(f"on-{n}", claim_volume("v1"), node_name=n) for n in ("a", "b", "c")]
    cache = cache_with([node("a"), node("b"), node("c"), node("d")], existing)
    limit = {"name": "ebs.csi.aws.com", "nodeID": "x", "allocatable": {"count": 1}}
    storage(
        cache,
        *csi_claim("v1"),
        *csi_claim("v2"),
        {"kind": "CSINode", "metadata": {"name": "a"}, "spec": {"drivers": [limit]}},
        {
            "kind": "CSINode",
            "metadata": {"name": "b"},
            "spec": {"drivers": [{**limit, "allocatable": {"count": 2}}]},
        },
        {"kind": "CSINode", "metadata": {"name": "c"}, "spec": {"drivers": [{"name": "ebs.csi.aws.com"}]}},
    )
    plugin, state = NodeVolumeLimits(cache), CycleState()
    pod = pending(with_volumes("p", claim_volume("v2")))
    assert plugin.pre_filter(state, pod)[1].ok
    rejections = plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert rejected_names(cache.table, rejections) == {"node(s) exceed max volume count": {"a"}}
    # a volume the node already has is not new
    state = CycleState()
    pod = pending(with_volumes("q", claim_volume("v1")))
    assert plugin.pre_filter(state, pod)[1].ok
    assert (
        rejected_names(cache.table, plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows()))
        == {}
    )


def volume_attachment(
    name: str, node_name: str, pv: str, attacher: str = "ebs.csi.aws.com"
) -> dict[str, Any]:
    """As the attach-detach controller writes one (the status as the external attacher sets it)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name, "finalizers": ["external-attacher/ebs-csi-aws-com"]},
        "spec": {"attacher": attacher, "nodeName": node_name, "source": {"persistentVolumeName": pv}},
        "status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdaa"}},
    }


def test_volume_attachments_left_by_departed_pods_count_towards_the_limit() -> None:
    """kube-scheduler 1.37 counts a node's VolumeAttachments: a volume stays attached (and counts)
    after its pod left, until the attach-detach controller detaches it."""
    pvs = []
    for name in ("v1", "v2", "v3"):
        pvs += [
            {
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"}},
            },
            {
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"volumeName": name},
            },
        ]
    limit = {"name": "ebs.csi.aws.com", "nodeID": "i-0a", "allocatable": {"count": 2}}
    existing = [with_volumes("user", claim_volume("v1"), node_name="a")]
    cache = cache_with([node("a"), node("b")], existing)
    storage(
        cache,
        *pvs,
        *({"kind": "CSINode", "metadata": {"name": n}, "spec": {"drivers": [limit]}} for n in ("a", "b")),
        volume_attachment("csi-1", "a", "v1"),  # the placed pod's own volume: not counted twice
        volume_attachment("csi-2", "a", "v2"),  # left by a pod that is gone
        volume_attachment("csi-x", "a", "unknown-pv"),  # a PV the cache does not hold: left out
    )
    plugin = NodeVolumeLimits(cache)

    def rejected(claim: str) -> dict[str, set[str]]:
        state, pod = CycleState(), pending(with_volumes("p", claim_volume(claim)))
        assert plugin.pre_filter(state, pod)[1].ok
        return rejected_names(
            cache.table, plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
        )

    assert rejected("v3") == {"node(s) exceed max volume count": {"a"}}
    # as upstream, the new pod's own volume is not matched against the attachments (v2 counts twice)
    assert rejected("v2") == {"node(s) exceed max volume count": {"a"}}
    assert rejected("v1") == {}  # used by the placed pod: not new
    store_objects(cache, volume_attachment("csi-2", "a", "v2"), deleted=True)
    assert rejected("v3") == {}
    assert cache.store(Attachments).by_node == {
        "a": {
            "csi-1": VolumeAttachmentInfo.from_dict(volume_attachment("csi-1", "a", "v1")),
            "csi-x": VolumeAttachmentInfo.from_dict(volume_attachment("csi-x", "a", "unknown-pv")),
        }
    }


def test_a_detached_volume_wakes_the_pod_it_kept_out() -> None:
    """Only the attachment's deletion is an event (upstream's one hint for VolumeAttachments): a
    pod over the limit is placed once the attach-detach controller removes the attachment."""
    objs: list[dict[str, Any]] = [
        node("a"),
        {
            "kind": "CSINode",
            "metadata": {"name": "a"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0a", "allocatable": {"count": 1}}]},
        },
    ]
    for name in ("old", "new"):  # bound, as the PV controller leaves a claim and its volume
        objs += [
            {
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
                    "claimRef": {"namespace": "default", "name": name},
                },
                "status": {"phase": "Bound"},
            },
            {
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                },
                "spec": {"volumeName": name},
                "status": {"phase": "Bound"},
            },
        ]
    objs.append(volume_attachment("csi-old", "a", "old"))
    pod = with_volumes("p", claim_volume("new"))
    pod["metadata"]["uid"] = "uid-p"
    sim = Simulation(InMemoryCluster([*objs, pod]), initial_backoff=0.01, max_backoff=0.01)
    kept_out = sim.run_sync()["uid-p"]
    assert kept_out.node is None and "exceed max volume count" in kept_out.message, kept_out
    parked = sim.scheduler.queue.get("uid-p")
    assert parked is not None and parked.where == "unschedulable"
    attachment = VolumeAttachmentInfo.from_dict(volume_attachment("csi-old", "a", "old"))
    sim.scheduler.on_object(attachment)  # an update
    assert parked.where == "unschedulable"  # no event: the pod stays parked
    sim.scheduler.on_object(attachment, deleted=True)
    assert sim.run_sync()["uid-p"].node == "a"


def csi_driver(name: str, prevent_if_missing: bool | None) -> dict[str, Any]:
    """As a driver's Helm chart installs its CSIDriver (the API server's defaults filled in)."""
    spec: dict[str, Any] = {
        "attachRequired": True,
        "podInfoOnMount": False,
        "requiresRepublish": False,
        "storageCapacity": False,
        "fsGroupPolicy": "ReadWriteOnceWithFSType",
        "volumeLifecycleModes": ["Persistent"],
        "seLinuxMount": False,
    }
    if prevent_if_missing is not None:
        spec["preventPodSchedulingIfMissing"] = prevent_if_missing
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def test_a_driver_that_prevents_scheduling_if_missing_keeps_pods_off_nodes_without_it() -> None:
    """VolumeLimitScaling (beta, on in 1.37): a CSIDriver with preventPodSchedulingIfMissing keeps
    pods using its volumes off nodes whose CSINode does not list it, or that have no CSINode."""
    ebs = "ebs.csi.aws.com"
    cache = cache_with([node("with-driver"), node("other-driver"), node("no-csinode")], [])
    storage(
        cache,
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "v1"},
            "spec": {"csi": {"driver": ebs, "volumeHandle": "vol-1"}},
        },
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "v1", "namespace": "default"},
            "spec": {"volumeName": "v1"},
        },
        {
            "kind": "CSINode",
            "metadata": {"name": "with-driver"},
            "spec": {"drivers": [{"name": ebs, "nodeID": "i-1"}]},
        },
        {
            "kind": "CSINode",
            "metadata": {"name": "other-driver"},
            "spec": {"drivers": [{"name": "efs.csi.aws.com", "nodeID": "i-2"}]},
        },
    )
    plugin = NodeVolumeLimits(cache)

    def rejected() -> dict[str, set[str]]:
        state, pod = CycleState(), pending(with_volumes("p", claim_volume("v1")))
        assert plugin.pre_filter(state, pod)[1].ok
        return rejected_names(
            cache.table, plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
        )

    assert rejected() == {}  # no CSIDriver object: taken to be installed everywhere
    storage(cache, csi_driver(ebs, None))
    assert rejected() == {}  # the flag unset: the node's CSINode is not consulted
    storage(cache, csi_driver(ebs, True))
    assert rejected() == {f"{ebs} CSI driver is not installed on the node": {"other-driver", "no-csinode"}}
    storage(
        cache,
        {
            "kind": "CSINode",
            "metadata": {"name": "no-csinode"},
            "spec": {"drivers": [{"name": ebs, "nodeID": "i-3"}]},
        },
    )
    assert rejected() == {f"{ebs} CSI driver is not installed on the node": {"other-driver"}}


def test_a_csidriver_change_wakes_the_pod_it_kept_out() -> None:
    """A CSIDriver edit is a storage event: a pod kept out by preventPodSchedulingIfMissing is
    placed once the driver stops asking for it (or the driver is installed)."""
    ebs = "ebs.csi.aws.com"
    objs: list[dict[str, Any]] = [
        node("a"),
        {  # bound, as the PV controller leaves a claim and its volume
            "kind": "PersistentVolume",
            "metadata": {"name": "v1"},
            "spec": {
                "csi": {"driver": ebs, "volumeHandle": "vol-1"},
                "claimRef": {"namespace": "default", "name": "v1"},
            },
            "status": {"phase": "Bound"},
        },
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "v1",
                "namespace": "default",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"volumeName": "v1"},
            "status": {"phase": "Bound"},
        },
        csi_driver(ebs, True),
    ]
    pod = with_volumes("p", claim_volume("v1"))
    pod["metadata"]["uid"] = "uid-p"
    sim = Simulation(InMemoryCluster([*objs, pod]), initial_backoff=0.01, max_backoff=0.01)
    kept_out = sim.run_sync()["uid-p"]
    assert kept_out.node is None and f"{ebs} CSI driver is not installed on the node" in kept_out.message
    parked = sim.scheduler.queue.get("uid-p")
    assert parked is not None and parked.where == "unschedulable"
    sim.scheduler.on_object(decode_storage(csi_driver(ebs, False)))
    assert sim.run_sync()["uid-p"].node == "a"


def test_default_profile_places_in_tree_disks_away_from_a_conflict() -> None:
    disk = {"name": "pd", "awsElasticBlockStore": {"volumeID": "vol-1"}}
    holder = with_volumes("holder", disk, node_name="a")
    newcomer = with_volumes("newcomer", disk)
    newcomer["metadata"]["uid"] = "uid-newcomer"
    sim = Simulation(InMemoryCluster([node("a"), node("b"), holder, newcomer]))
    outcomes = sim.run_sync()
    assert outcomes["uid-newcomer"].node == "b"
