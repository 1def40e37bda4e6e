"""The DRA model: slices, classes and claims parsed; devices per node; every allocation counted."""

from __future__ import annotations

from shoal.core.state.objects import PodInfo
from shoal.plugins.dynamicresources.objects import (
    DeviceClassInfo,
    DeviceId,
    ResourceClaimInfo,
    ResourceSliceInfo,
)
from shoal.plugins.dynamicresources.store import DraStore
from tests.unit.dra_objects import GPU, allocated, claim, claim_pod, device_class, node_slice


def test_slice_parses_qualified_attributes_and_capacity() -> None:
    s = ResourceSliceInfo.from_dict(node_slice("n1", 2))
    assert (s.driver, s.pool, s.node_name) == (GPU, "n1", "n1")
    d = s.devices[1]
    assert d.id == DeviceId(GPU, "n1", "gpu-1")
    assert d.attributes[f"{GPU}/productName"] == "NVIDIA A100"
    assert d.attributes["resource.kubernetes.io/pcieRoot"] == "pci0000"
    assert d.capacity[f"{GPU}/memory"] == 80 * 2**30


def test_bad_capacity_is_a_problem_not_a_crash() -> None:
    raw = node_slice("n1", 1)
    raw["spec"]["devices"][0]["capacity"]["memory"]["value"] = "lots"
    s = ResourceSliceInfo.from_dict(raw)
    assert "devices[gpu-0].capacity[memory]" in s.problems
    assert f"{GPU}/memory" not in s.devices[0].capacity


def test_devices_per_node_local_all_nodes_and_selector() -> None:
    store = DraStore()
    store.apply(ResourceSliceInfo.from_dict(node_slice("n1", 8)))
    shared = node_slice("x", 2, driver="net.example.com")
    del shared["spec"]["nodeName"]
    shared["metadata"]["name"] = "fabric"
    shared["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
    }
    store.apply(ResourceSliceInfo.from_dict(shared))
    every = node_slice("y", 1, driver="all.example.com")
    del every["spec"]["nodeName"]
    every["metadata"]["name"] = "everywhere"
    every["spec"]["allNodes"] = True
    store.apply(ResourceSliceInfo.from_dict(every))
    on_n1 = {d.id.driver for d in store.devices_for("n1", {"rack": "r1"})}
    assert on_n1 == {GPU, "net.example.com", "all.example.com"}
    assert len(list(store.devices_for("n1", {}))) == 9
    assert {d.id.driver for d in store.devices_for("n2", {})} == {"all.example.com"}
    store.apply(ResourceSliceInfo.from_dict(node_slice("n1", 8)), deleted=True)
    assert len(list(store.devices_for("n1", {}))) == 1


def test_older_pool_generation_is_ignored() -> None:
    store = DraStore()
    old = node_slice("n1", 8)
    new = node_slice("n1", 2)
    new["metadata"]["name"] = "n1-new"
    new["spec"]["pool"]["generation"] = 2
    store.apply(ResourceSliceInfo.from_dict(old))
    store.apply(ResourceSliceInfo.from_dict(new))
    assert len(list(store.devices_for("n1", {}))) == 2


def test_any_allocated_claim_takes_its_devices_whoever_allocated_it() -> None:
    store = DraStore()
    other = ResourceClaimInfo.from_dict(allocated(claim("theirs"), "n1", ["gpu-0", "gpu-3"], reserved=("p",)))
    assert other.allocated_node == "n1" and other.reserved_for == ("p",)
    store.apply(other)
    assert store.taken_by(DeviceId(GPU, "n1", "gpu-3")) == "default/theirs"
    store.apply(other, deleted=True)
    assert store.taken_by(DeviceId(GPU, "n1", "gpu-3")) is None


def test_assumed_allocation_until_the_watch_brings_it_back_or_forget() -> None:
    store = DraStore()
    mine = ResourceClaimInfo.from_dict(claim("mine"))
    store.apply(mine)
    held = ResourceClaimInfo.from_dict(allocated(claim("mine"), "n1", ["gpu-1"]))
    store.assume(held)
    assert store.claim("default", "mine") is held
    assert store.taken_by(DeviceId(GPU, "n1", "gpu-1")) == "default/mine"
    store.forget("default/mine")
    assert store.taken_by(DeviceId(GPU, "n1", "gpu-1")) is None
    store.assume(held)
    store.apply(held)  # the status update came back through the watch
    assert not store.assumed
    store.forget("default/mine")  # a late Unreserve does not free what the API says is allocated
    assert store.taken_by(DeviceId(GPU, "n1", "gpu-1")) == "default/mine"


def test_claim_requests_first_available_and_constraints() -> None:
    raw = claim(
        "c", count=2, selectors=("true",), constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    )
    raw["spec"]["devices"]["requests"].append(
        {
            "name": "alt",
            "firstAvailable": [
                {"name": "big", "deviceClassName": GPU},
                {"name": "small", "deviceClassName": GPU, "count": 2},
            ],
        }
    )
    c = ResourceClaimInfo.from_dict(raw)
    assert c.requests[0][0].count == 2 and c.requests[0][0].selectors == ("true",)
    assert [r.name for r in c.requests[1]] == ["alt/big", "alt/small"]
    assert c.requests[1][1].count == 2
    assert c.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"


def test_device_class_selectors() -> None:
    cls = DeviceClassInfo.from_dict(device_class())
    assert cls.selectors == (f'device.driver == "{GPU}"',)


def test_pod_claims_with_template_names_from_status() -> None:
    pod = PodInfo.from_dict(
        claim_pod(
            "p",
            [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "shared", "resourceClaimName": "s"},
            ],
            [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}],
        )
    )
    assert [c.resolved for c in pod.resource_claims] == ["p-gpu-abcde", "s"]
    assert pod.resource_claims[0].template == "one-gpu"
    waiting = PodInfo.from_dict(claim_pod("q", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]))
    assert waiting.resource_claims[0].resolved == ""


def test_a_deleted_claim_frees_what_shoal_held_for_it() -> None:
    store = DraStore()
    store.apply(ResourceClaimInfo.from_dict(claim("mine")))
    store.assume(ResourceClaimInfo.from_dict(allocated(claim("mine"), "n1", ["gpu-1"])))
    store.apply(ResourceClaimInfo.from_dict(claim("mine")), deleted=True)
    assert not store.assumed and store.taken_by(DeviceId(GPU, "n1", "gpu-1")) is None
