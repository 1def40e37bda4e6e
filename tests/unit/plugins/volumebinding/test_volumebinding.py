"""VolumeBinding through the default profile in the simulator (whose volume writer answers as the PV
controller would): a local PV's node, provisioning limited by allowedTopologies, unbound immediate
claims, a bound PV's node affinity, and two pods never given the same PV."""

from __future__ import annotations

from typing import Any

from shoal.plugins.volumebinding.store import VolumeStore
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

HOST = "kubernetes.io/hostname"


def node(name: str, **labels: str) -> dict[str, Any]:
    obj = make_node(name)
    obj["metadata"].setdefault("labels", {}).update({HOST: name, **labels})
    return obj


def local_pv(name: str, on: str, size: str = "10Gi", **extra: Any) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [on]}]}
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            **extra,
        },
        "status": {"phase": "Available"},
    }


def claim(name: str, cls: str = "local", size: str = "5Gi", **annotations: str) -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


def storage_class(name: str, mode: str, provisioner: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        **extra,
    }


LOCAL = storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")


def trainer(name: str, *claims: str) -> dict[str, Any]:
    obj = make_pod(name)
    obj["metadata"]["uid"] = f"uid-{name}"
    obj["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return obj


def run(*objs: dict[str, Any]) -> tuple[Simulation, dict[str, Any]]:
    sim = Simulation(InMemoryCluster(list(objs)))
    return sim, sim.run_sync()


def test_local_pv_pod_goes_to_the_pv_node_and_the_claim_is_bound() -> None:
    sim, out = run(
        node("n1"), node("n2"), node("n3"), LOCAL, local_pv("pv-2", "n2"), claim("data"), trainer("t", "data")
    )
    assert out["uid-t"].node == "n2"
    bound = sim.scheduler.cache.store(VolumeStore).pvcs["default/data"]
    assert bound.volume_name == "pv-2"
    assert sim.scheduler.cache.store(VolumeStore).assumed_pvs == {}


def test_two_pods_never_share_one_pv_and_the_smallest_fitting_pv_is_chosen() -> None:
    _, out = run(
        node("n1"),
        node("n2"),
        LOCAL,
        local_pv("big", "n1", size="100Gi"),
        local_pv("small", "n2", size="6Gi"),
        claim("a"),
        claim("b"),
        trainer("ta", "a"),
        trainer("tb", "b"),
    )
    assert {out["uid-ta"].node, out["uid-tb"].node} == {"n1", "n2"}


def test_a_claim_gets_only_a_pv_of_its_volume_attributes_class() -> None:
    """FindMatchingVolume's VolumeAttributesClass scenarios (component-helpers v0.37.2,
    storage/volume/pv_helpers_test.go, the gate on as in 1.37): success-match-with-vac, fail-vac,
    fail-prebound-vac; and a claim without a class does not get a PV that has one."""

    def with_vac(obj: dict[str, Any], name: str) -> dict[str, Any]:
        obj["spec"]["volumeAttributesClassName"] = name
        return obj

    gold = with_vac(local_pv("pv-gold", "n1"), "gold")
    _, out = run(node("n1"), LOCAL, gold, with_vac(claim("data"), "gold"), trainer("t", "data"))
    assert out["uid-t"].node == "n1"
    _, out = run(
        node("n1"), LOCAL, local_pv("pv-plain", "n1"), with_vac(claim("data"), "silver"), trainer("t", "data")
    )
    assert out["uid-t"].node is None
    prebound = with_vac(local_pv("pv-gold", "n1", claimRef={"name": "data", "namespace": "default"}), "gold")
    _, out = run(node("n1"), LOCAL, prebound, with_vac(claim("data"), "silver"), trainer("t", "data"))
    assert out["uid-t"].node is None
    _, out = run(node("n1"), LOCAL, gold, claim("data"), trainer("t", "data"))
    assert out["uid-t"].node is None


def test_no_pv_and_no_provisioner_names_the_reason() -> None:
    _, out = run(node("n1"), LOCAL, local_pv("tiny", "n1", size="1Gi"), claim("data"), trainer("t", "data"))
    assert out["uid-t"].node is None
    assert "1 node(s) didn't find available persistent volumes to bind" in out["uid-t"].message


def test_provisioning_follows_allowed_topologies() -> None:
    zonal = storage_class(
        "zonal",
        "WaitForFirstConsumer",
        "csi.example.com",
        allowedTopologies=[{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}],
    )
    sim, out = run(
        node("n1", zone="a"), node("n2", zone="b"), zonal, claim("data", cls="zonal"), trainer("t", "data")
    )
    assert out["uid-t"].node == "n2"
    assert (
        sim.scheduler.cache.store(VolumeStore)
        .pvcs["default/data"]
        .annotations["volume.kubernetes.io/selected-node"]
        == "n2"
    )


def test_unbound_immediate_claim_is_refused() -> None:
    fast = storage_class("fast", "Immediate", "csi.example.com")
    _, out = run(node("n1"), fast, claim("data", cls="fast"), trainer("t", "data"))
    assert out["uid-t"].node is None
    assert "pod has unbound immediate PersistentVolumeClaims" in out["uid-t"].message


def test_bound_pv_node_affinity() -> None:
    pv = local_pv("pv-1", "n1", claimRef={"namespace": "default", "name": "data", "uid": "uid-data"})
    pvc = claim("data", **{"pv.kubernetes.io/bind-completed": "yes"})
    pvc["spec"]["volumeName"] = "pv-1"
    _, out = run(node("n1"), node("n2"), LOCAL, pv, pvc, trainer("t", "data"))
    assert out["uid-t"].node == "n1"
    _, out = run(node("n2"), LOCAL, pv, pvc, trainer("t", "data"))
    assert "1 node(s) didn't match PersistentVolume's node affinity" in out["uid-t"].message


def test_missing_claim_is_named() -> None:
    _, out = run(node("n1"), trainer("t", "nowhere"))
    assert 'persistentvolumeclaim "nowhere" not found' in out["uid-t"].message


def _plugin_world(timeout: int = 600) -> tuple[Any, Any, Any]:
    from shoal.plugins.volumebinding.objects import decode_storage
    from shoal.plugins.volumebinding.plugin import Args, VolumeBinding
    from tests.unit.helpers import cache_with, handle_for

    cache = cache_with([node("n1"), node("n2")])
    for obj in (LOCAL, local_pv("pv-1", "n1"), claim("a"), claim("b")):
        cache.store(VolumeStore).apply(decode_storage(obj))
    handle = handle_for(cache)
    return cache, handle, VolumeBinding(Args(bind_timeout_seconds=timeout), handle)


def test_reserve_holds_the_pv_from_other_pods_until_unreserve() -> None:
    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.objects import PodInfo
    from tests.unit.helpers import rejected_names

    cache, _, plugin = _plugin_world()
    table = cache.table
    first, second = PodInfo.from_dict(trainer("ta", "a")), PodInfo.from_dict(trainer("tb", "b"))
    s1 = CycleState()
    assert plugin.pre_filter(s1, first)[1].ok
    assert rejected_names(table, plugin.filter_nodes(s1, first, table, table.valid_rows())) == {
        "node(s) didn't find available persistent volumes to bind": {"n2"}
    }
    assert plugin.reserve(s1, first, "n1").ok
    assert cache.store(VolumeStore).assumed_pvs == {"pv-1": "default/a"}
    s2 = CycleState()
    assert plugin.pre_filter(s2, second)[1].ok
    assert rejected_names(table, plugin.filter_nodes(s2, second, table, table.valid_rows())) == {
        "node(s) didn't find available persistent volumes to bind": {"n1", "n2"}
    }
    plugin.unreserve(s1, first, "n1")
    assert cache.store(VolumeStore).assumed_pvs == {}
    s3 = CycleState()
    assert plugin.pre_filter(s3, second)[1].ok
    assert "n1" not in str(rejected_names(table, plugin.filter_nodes(s3, second, table, table.valid_rows())))


def test_pre_bind_writes_the_claim_ref_and_times_out_without_a_pv_controller() -> None:
    import asyncio

    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.objects import PodInfo
    from shoal.core.state.status import Status
    from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo
    from shoal.plugins.volumebinding.ports import VOLUME_WRITER

    written: list[tuple[str, str]] = []

    class Recorder:
        async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
            written.append((pv.name, claim.key))
            return Status()

        async def select_node(self, claim: PVCInfo, node: str) -> Status:
            written.append((claim.key, node))
            return Status()

    cache, handle, plugin = _plugin_world(timeout=0)
    handle.extras[VOLUME_WRITER] = Recorder()
    pod, state = PodInfo.from_dict(trainer("ta", "a")), CycleState()
    plugin.pre_filter(state, pod)
    plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert plugin.reserve(state, pod, "n1").ok
    status = asyncio.run(plugin.pre_bind(state, pod, "n1"))
    assert written == [("pv-1", "default/a")]
    assert status.code.title == "Error" and "timed out" in status.message


def test_bind_check_tells_its_own_write_not_seen_from_a_reset() -> None:
    """As upstream's checkBindings by resourceVersion: while the cache holds the PV version PreBind
    read, its claimRef write is not seen yet (wait); a later version without it was reset (fail)."""
    import asyncio

    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.objects import PodInfo
    from shoal.core.state.status import Status
    from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo, decode_storage
    from shoal.plugins.volumebinding.plugin import STATE_KEY
    from shoal.plugins.volumebinding.ports import VOLUME_WRITER

    class Silent:
        async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
            return Status()

        async def select_node(self, claim: PVCInfo, node: str) -> Status:
            return Status()

    cache, handle, plugin = _plugin_world(timeout=0)
    handle.extras[VOLUME_WRITER] = Silent()
    pv = local_pv("pv-1", "n1")
    pv["metadata"]["resourceVersion"] = "7"
    cache.store(VolumeStore).apply(decode_storage(pv))
    pod, state = PodInfo.from_dict(trainer("ta", "a")), CycleState()
    plugin.pre_filter(state, pod)
    plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert plugin.reserve(state, pod, "n1").ok
    assert "timed out" in asyncio.run(plugin.pre_bind(state, pod, "n1")).message
    volumes = state.require(STATE_KEY).by_node["n1"]
    assert volumes.written == {"pv-1": "7"}
    check = plugin._check(volumes, "n1")
    assert check is not None and check.ok  # still waiting for the write
    pv["metadata"]["resourceVersion"] = "8"
    cache.store(VolumeStore).apply(decode_storage(pv))
    check = plugin._check(volumes, "n1")
    assert check is not None and check.message == 'ClaimRef got reset for pv "pv-1"'
    pv["spec"]["claimRef"] = {"namespace": "default", "name": "a", "uid": "uid-a"}
    bound = claim("a", **{"pv.kubernetes.io/bind-completed": "yes"})
    bound["spec"]["volumeName"] = "pv-1"
    for obj in (pv, bound):
        cache.store(VolumeStore).apply(decode_storage(obj))
    assert plugin._check(volumes, "n1") is None


def test_pre_bind_never_takes_a_pv_bound_to_another_claim_since_reserve() -> None:
    """The PV controller bound the chosen PV to another claim between Reserve and PreBind (a gang
    can wait at Permit meanwhile): upstream's update of the object it assumed gets a 409; shoal
    refuses rather than write its claimRef over the other claim's."""
    import asyncio

    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.objects import PodInfo
    from shoal.core.state.status import Status
    from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo, decode_storage
    from shoal.plugins.volumebinding.ports import VOLUME_WRITER

    written: list[str] = []

    class Recorder:
        async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
            written.append(pv.name)
            return Status()

        async def select_node(self, claim: PVCInfo, node: str) -> Status:
            written.append(claim.key)
            return Status()

    cache, handle, plugin = _plugin_world(timeout=0)
    handle.extras[VOLUME_WRITER] = Recorder()
    pod, state = PodInfo.from_dict(trainer("ta", "a")), CycleState()
    plugin.pre_filter(state, pod)
    plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert plugin.reserve(state, pod, "n1").ok
    taken = local_pv("pv-1", "n1", claimRef={"namespace": "default", "name": "b", "uid": "uid-b"})
    cache.store(VolumeStore).apply(decode_storage(taken))
    status = asyncio.run(plugin.pre_bind(state, pod, "n1"))
    assert written == [] and status.code.title == "Error"
    assert status.message == 'binding volumes: pv "pv-1" was bound to default/b'


def test_a_pod_deleted_while_pre_bind_waits_stops_the_wait() -> None:
    """upstream's checkBindings fails once the pod is gone; without that, PreBind would poll until
    the bind timeout for a pod nobody wants any more."""
    import asyncio

    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.objects import PodInfo
    from shoal.core.state.status import Status
    from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo
    from shoal.plugins.volumebinding.ports import VOLUME_WRITER

    cache, handle, plugin = _plugin_world(timeout=600)
    pod, state = PodInfo.from_dict(trainer("ta", "a")), CycleState()
    cache.upsert_pod(pod)

    class DeletesThePod:  # the user deletes the pod right after the write
        async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
            cache.remove_pod(pod.uid)
            return Status()

        async def select_node(self, claim: PVCInfo, node: str) -> Status:
            return Status()

    handle.extras[VOLUME_WRITER] = DeletesThePod()
    plugin.pre_filter(state, pod)
    plugin.filter_nodes(state, pod, cache.table, cache.table.valid_rows())
    assert plugin.reserve(state, pod, "n1").ok
    status = asyncio.run(asyncio.wait_for(plugin.pre_bind(state, pod, "n1"), 30))
    assert status.message == "binding volumes: pod does not exist any more"


# -- storage capacity (CSIStorageCapacity) ----------------------------------------------------------
def csi_driver(name: str = "lvm.csi.example.com", capacity: bool = True) -> dict[str, Any]:
    return {"kind": "CSIDriver", "metadata": {"name": name}, "spec": {"storageCapacity": capacity}}


def capacity(name: str, on: str | None, size: str | None, maximum: str | None = None) -> dict[str, Any]:
    """What a CSI driver's external-provisioner publishes for one node's (or every node's) pool."""
    obj: dict[str, Any] = {
        "kind": "CSIStorageCapacity",
        "apiVersion": "storage.k8s.io/v1",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": "lvm",
        "nodeTopology": {"matchLabels": {HOST: on}} if on else {},
    }
    if size is not None:
        obj["capacity"] = size
    if maximum is not None:
        obj["maximumVolumeSize"] = maximum
    return obj


LVM = storage_class("lvm", "WaitForFirstConsumer", "lvm.csi.example.com")


def test_a_claim_is_provisioned_only_where_a_published_capacity_holds_it() -> None:
    """kube-scheduler 1.37's capacity check: the driver publishes its capacity (storageCapacity),
    so n1's 5Gi pool cannot take a 10Gi claim and the pod goes to n2, whose 50Gi can."""
    objs = [
        node("n1"),
        node("n2"),
        csi_driver(),
        LVM,
        capacity("n1", "n1", "5Gi"),
        capacity("n2", "n2", "50Gi"),
    ]
    sim, out = run(*objs, claim("data", cls="lvm", size="10Gi"), trainer("t", "data"))
    assert out["uid-t"].node == "n2"
    selected = sim.scheduler.cache.store(VolumeStore).pvcs["default/data"].annotations
    assert selected["volume.kubernetes.io/selected-node"] == "n2"


def test_no_capacity_anywhere_names_upstreams_reason_and_a_driver_that_publishes_none_is_not_checked() -> (
    None
):
    objs = [node("n1"), node("n2"), csi_driver(), LVM, capacity("n1", "n1", "5Gi")]
    _, out = run(*objs, claim("data", cls="lvm", size="10Gi"), trainer("t", "data"))
    assert out["uid-t"].node is None
    assert "2 node(s) did not have enough free storage" in out["uid-t"].message
    # maximumVolumeSize is the limit when set, and an empty topology reaches every node
    _, out = run(
        *objs,
        capacity("net", None, "1Gi", maximum="20Gi"),
        claim("data", cls="lvm", size="10Gi"),
        trainer("t", "data"),
    )
    assert out["uid-t"].node in ("n1", "n2")
    # a driver that does not publish its capacity: provisioning is taken to fit
    _, out = run(
        node("n1"),
        csi_driver(capacity=False),
        LVM,
        claim("data", cls="lvm", size="10Gi"),
        trainer("t", "data"),
    )
    assert out["uid-t"].node == "n1"


def test_capacity_scoring_prefers_the_node_with_the_most_room_left() -> None:
    """StorageCapacityScoring (beta, on): by default 100 at 0 % used down to 0 at 100 %, so a 10Gi
    claim prefers the 100Gi pool (10 % used) over the 20Gi one (50 %)."""
    objs = [
        node("n1"),
        node("n2"),
        csi_driver(),
        LVM,
        capacity("n1", "n1", "20Gi"),
        capacity("n2", "n2", "100Gi"),
    ]
    _, out = run(*objs, claim("data", cls="lvm", size="10Gi"), trainer("t", "data"))
    assert out["uid-t"].node == "n2"
    scores = {name: by_plugin.get("VolumeBinding") for name, _, by_plugin in out["uid-t"].top}
    assert scores == {"n2": 90, "n1": 50}
