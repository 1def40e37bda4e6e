"""DynamicResources through the default profile in the simulator (whose claim writer applies the
allocation at once, as the watch would bring it back): claims allocated on the chosen node, 8 GPUs
fill a node and the 9th pod waits, CEL selectors pick nodes, a claim from a template waits for the
controller, devices allocated by someone else are never handed out again, matchAttribute,
firstAvailable, allocationMode All, shared claims, and broken CEL is an error naming the claim."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.cli import main
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.core.scheduling.schedule_one import schedule_pod
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins.dynamicresources.objects import DRA_DECODERS, DeviceClassInfo, ResourceClaimInfo
from shoal.plugins.dynamicresources.plugin import DynamicResources
from shoal.plugins.dynamicresources.store import DraStore
from shoal.plugins.noderesources import class_provides_a_request
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_native_pod_group, make_node, make_pod, make_pod_group
from tests.unit.dra_objects import GPU, allocated, claim, claim_pod, device_class, gpu, node_slice


def node(name: str, **labels: str) -> dict[str, Any]:
    obj = make_node(name)
    obj["metadata"].setdefault("labels", {}).update({"kubernetes.io/hostname": name, **labels})
    return obj


def user(name: str, claim_name: str, **spec: Any) -> dict[str, Any]:
    return claim_pod(name, [{"name": "gpu", "resourceClaimName": claim_name}], **spec)


def run(*objs: dict[str, Any]) -> tuple[Simulation, dict[str, Any]]:
    sim = Simulation(InMemoryCluster(list(objs)))
    return sim, sim.run_sync()


def test_one_gpu_claim_is_allocated_on_the_chosen_node_and_reserved_for_the_pod() -> None:
    sim, out = run(node("n1"), node("n2"), device_class(), node_slice("n2"), claim("c"), user("p", "c"))
    assert out["uid-p"].node == "n2"
    got = sim.scheduler.cache.store(DraStore).claims["default/c"]
    assert got.allocated is not None and len(got.allocated) == 1
    assert got.allocated[0].id.pool == "n2" and got.allocated_node == "n2"
    assert got.reserved_for == ("uid-p",)
    assert not sim.scheduler.cache.store(DraStore).assumed


def test_eight_gpus_fill_a_node_and_the_ninth_pod_waits_with_a_reason() -> None:
    objs: list[dict[str, Any]] = [node("n1"), device_class(), node_slice("n1")]
    for i in range(9):
        objs += [claim(f"c{i}"), user(f"p{i}", f"c{i}")]
    sim, out = run(*objs)
    placed = [k for k, o in out.items() if o.node == "n1"]
    assert len(placed) == 8
    waiting = [o for o in out.values() if o.node is None]
    assert len(waiting) == 1 and "1 cannot allocate all claims" in waiting[0].message
    devices = [a.id for c in sim.scheduler.cache.store(DraStore).claims.values() for a in c.allocated or ()]
    assert len(devices) == len(set(devices)) == 8


def test_devices_allocated_by_someone_else_are_never_handed_out() -> None:
    theirs = allocated(claim("theirs"), "n1", [f"gpu-{i}" for i in range(7)], reserved=("other",))
    objs = [node("n1"), device_class(), node_slice("n1"), theirs, claim("a"), claim("b")]
    sim, out = run(*objs, user("pa", "a"), user("pb", "b"))
    assert sorted(o.node or "" for o in out.values()) == ["", "n1"]
    mine = [
        c for c in sim.scheduler.cache.store(DraStore).claims.values() if c.name in ("a", "b") and c.allocated
    ]
    assert [a.id.device for c in mine for a in c.allocated or ()] == ["gpu-7"]


def test_cel_selector_on_product_and_memory_picks_nodes() -> None:
    a100 = node_slice("n1", product="NVIDIA A100", memory="40Gi")
    h100 = node_slice("n2", product="NVIDIA H100", memory="80Gi")
    big = claim("big", selectors=(f'device.capacity["{GPU}"].memory.compareTo(quantity("60Gi")) >= 0',))
    named = claim("named", selectors=(f'device.attributes["{GPU}"].productName == "NVIDIA A100"',))
    _, out = run(
        node("n1"), node("n2"), device_class(), a100, h100, big, named, user("pb", "big"), user("pn", "named")
    )
    assert out["uid-pb"].node == "n2"
    assert out["uid-pn"].node == "n1"


def test_template_claim_waits_for_the_controller_then_must_be_owned_by_the_pod() -> None:
    pod = claim_pod("p", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    _, out = run(node("n1"), device_class(), node_slice("n1"), pod)
    assert out["uid-p"].node is None
    assert 'pod "default/p": ResourceClaim not created yet' in out["uid-p"].message
    made = claim("p-gpu-x")
    made["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": "uid-p", "apiVersion": "v1"}]
    ready = claim_pod(
        "p",
        [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        [{"name": "gpu", "resourceClaimName": "p-gpu-x"}],
    )
    _, out = run(node("n1"), device_class(), node_slice("n1"), made, ready)
    assert out["uid-p"].node == "n1"
    del made["metadata"]["ownerReferences"]
    _, out = run(node("n1"), device_class(), node_slice("n1"), made, ready)
    assert "was not created for Pod default/p (Pod is not owner)" in out["uid-p"].message


def podgroup_claim_objects(owner: str) -> list[dict[str, Any]]:
    """A native gang ``train`` of two whose PodGroup lists the claim template ``chan``: the claim the
    controller made from it (owned by the PodGroup ``owner``), and the members, each naming it."""
    group = make_native_pod_group("train", min_count=2)
    group["metadata"]["uid"] = "uid-train"
    group["spec"]["resourceClaims"] = [{"name": "fabric", "resourceClaimTemplateName": "chan"}]
    made = claim("train-fabric-x")
    made["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "name": owner,
            "uid": "u",
            "controller": True,
        }
    ]
    members = [
        claim_pod(
            name,
            [{"name": "fabric", "resourceClaimTemplateName": "chan"}],
            [{"name": "fabric", "resourceClaimName": "train-fabric-x"}],
            schedulingGroup={"podGroupName": "train"},
        )
        for name in ("a", "b")
    ]
    return [group, made, *members]


def test_a_podgroup_claim_is_its_members_allocated_once_and_reserved_for_the_podgroup() -> None:
    sim, out = run(node("n1"), node("n2"), device_class(), node_slice("n2"), *podgroup_claim_objects("train"))
    assert out["uid-a"].node == out["uid-b"].node == "n2"
    got = sim.scheduler.cache.store(DraStore).claims["default/train-fabric-x"]
    assert got.allocated is not None and len(got.allocated) == 1
    assert [dict(c) for c in got.consumers] == [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "uid-train"}
    ]
    # a claim another PodGroup owns is not the members': refused, naming both possible owners
    _, out = run(node("n2"), device_class(), node_slice("n2"), *podgroup_claim_objects("other"))
    why = "was not created for Pod default/a (neither Pod nor PodGroup train is the owner)"
    assert out["uid-a"].node is None and why in out["uid-a"].message


def test_missing_claim_and_missing_class_are_named() -> None:
    _, out = run(node("n1"), device_class(), node_slice("n1"), user("p", "nope"))
    assert 'resourceclaim.resource.k8s.io "nope" not found' in out["uid-p"].message
    _, out = run(node("n1"), node_slice("n1"), claim("c", device_class_name="tpu"), user("p", "c"))
    assert "request gpu: device class tpu does not exist" in out["uid-p"].message


def test_a_driver_without_slices_and_a_slice_for_a_missing_node_are_named() -> None:
    tpu = device_class("tpu", expression='device.driver == "tpu.example.com"')
    objs = [node("n1"), node("n2"), device_class(), node_slice("n1"), tpu]
    _, out = run(*objs, claim("c", device_class_name="tpu"), user("p", "c"))
    why = "2 cannot allocate all claims: no device matches claim default/c, request gpu (device class tpu)"
    assert out["uid-p"].node is None and why in out["uid-p"].message, out["uid-p"].message
    # the only GPUs are published for a node that does not exist: the slice is named
    _, out = run(node("n1"), device_class(), node_slice("ghost"), claim("c"), user("p", "c"))
    msg = out["uid-p"].message
    assert out["uid-p"].node is None and "no device matches claim default/c" in msg, msg
    assert "ResourceSlice ghost-gpu.nvidia.com names node ghost, which does not exist" in msg, msg
    # devices that match but are all taken keep upstream's words alone
    theirs = allocated(claim("theirs", count=8), "n1", [f"gpu-{i}" for i in range(8)])
    _, out = run(node("n1"), device_class(), node_slice("n1"), theirs, claim("c"), user("p", "c"))
    assert "1 cannot allocate all claims." in out["uid-p"].message, out["uid-p"].message


def test_broken_cel_is_an_error_naming_claim_and_expression_never_a_match() -> None:
    bad = claim("c", selectors=(f'device.attributes["{GPU}"].nosuch == "x"',))
    pod = user("p", "c")
    sim = Simulation(InMemoryCluster([node("n1"), device_class(), node_slice("n1"), bad, pod]))
    framework = sim.scheduler.profiles["gpu-scheduler"]
    status = schedule_pod(framework, CycleState(), PodInfo.from_dict(pod), what_if=True).status
    assert status is not None and status.code == Code.ERROR
    assert "claim default/c, request gpu" in status.message and "nosuch" in status.message, status.message


def test_match_attribute_keeps_a_two_gpu_claim_on_one_pcie_root() -> None:
    # gpu-0..3 on pci0000, gpu-4..7 on pci0001; gpu-0..2 and gpu-4..6 are taken: no root has 2 free
    theirs = allocated(claim("theirs"), "n1", ["gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6"])
    pair = claim("pair", count=2, constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    _, out = run(node("n1"), device_class(), node_slice("n1"), theirs, pair, user("p", "pair"))
    assert out["uid-p"].node is None
    theirs = allocated(claim("theirs"), "n1", ["gpu-0", "gpu-1", "gpu-4", "gpu-5", "gpu-6"])
    sim, out = run(node("n1"), device_class(), node_slice("n1"), theirs, pair, user("p", "pair"))
    assert out["uid-p"].node == "n1"
    got = sim.scheduler.cache.store(DraStore).claims["default/pair"].allocated or ()
    assert sorted(a.id.device for a in got) == ["gpu-2", "gpu-3"]


def test_first_available_falls_back_and_all_mode_takes_every_device() -> None:
    raw = claim("c")
    raw["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": "h100",
                    "deviceClassName": GPU,
                    "selectors": [
                        {"cel": {"expression": f'device.attributes["{GPU}"].productName == "NVIDIA H100"'}}
                    ],
                },
                {"name": "any", "deviceClassName": GPU, "count": 2},
            ],
        }
    ]
    sim, out = run(node("n1"), device_class(), node_slice("n1"), raw, user("p", "c"))
    assert out["uid-p"].node == "n1"
    got = sim.scheduler.cache.store(DraStore).claims["default/c"].allocated or ()
    assert [a.request for a in got] == ["gpu/any", "gpu/any"]
    every = claim("all", mode="All")
    sim, out = run(node("n1"), device_class(), node_slice("n1", 4), every, user("p", "all"))
    assert len(sim.scheduler.cache.store(DraStore).claims["default/all"].allocated or ()) == 4
    theirs = allocated(claim("theirs"), "n1", ["gpu-0"])
    _, out = run(node("n1"), device_class(), node_slice("n1", 4), theirs, every, user("p", "all"))
    assert out["uid-p"].node is None


def test_shared_claim_allocated_elsewhere_pins_its_pods_to_that_node() -> None:
    shared = allocated(claim("shared"), "n2", ["gpu-0"], reserved=("uid-first",))
    sim, out = run(
        node("n1"),
        node("n2"),
        device_class(),
        node_slice("n1"),
        node_slice("n2"),
        shared,
        user("p", "shared"),
    )
    assert out["uid-p"].node == "n2"
    assert sim.scheduler.cache.store(DraStore).claims["default/shared"].reserved_for == ("uid-first", "uid-p")


def test_post_filter_deallocates_a_claim_no_pod_uses_that_keeps_its_pod_off_every_node() -> None:
    """kube-scheduler 1.37's PostFilter: the claim was allocated on n2 (its pod gone), the pod may
    only run on n1: the allocation is cleared, and the next attempt allocates it on n1."""
    stale = allocated(claim("c"), "n2", ["gpu-0"])
    objs = [node("n1"), node("n2"), device_class(), node_slice("n1"), node_slice("n2"), stale]
    sim, out = run(*objs, user("p", "c", nodeSelector={"kubernetes.io/hostname": "n1"}))
    assert out["uid-p"].node == "n1"
    got = sim.scheduler.cache.store(DraStore).claims["default/c"]
    assert got.allocated_node == "n1" and got.reserved_for == ("uid-p",)


def test_post_filter_leaves_a_claim_another_pod_uses_and_says_why_the_pod_waits() -> None:
    used = allocated(claim("c"), "n2", ["gpu-0"], reserved=("uid-other",))
    objs = [node("n1"), node("n2"), device_class(), node_slice("n1"), node_slice("n2"), used]
    sim, out = run(*objs, user("p", "c", nodeSelector={"kubernetes.io/hostname": "n1"}))
    assert out["uid-p"].node is None
    assert "resourceclaim not available on the node" in out["uid-p"].message
    assert "deallocation" not in out["uid-p"].message
    assert sim.scheduler.cache.store(DraStore).claims["default/c"].allocated_node == "n2"


def test_an_allocation_selector_with_more_than_a_node_name_is_evaluated_whole() -> None:
    """upstream's availableOnNodes matches the whole selector: here two OR'd terms, one node by
    name (cordoned) or any node of rack r2; the pod goes to the r2 node, not only the named one."""
    from shoal.plugins.dynamicresources.objects import ResourceClaimInfo

    named = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    rack = {"key": "rack", "operator": "In", "values": ["r2"]}
    terms = [{"matchFields": [named]}, {"matchExpressions": [rack]}]
    pinned = allocated(claim("shared"), "n1", ["gpu-0"], reserved=("uid-first",))
    pinned["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": terms}
    info = ResourceClaimInfo.from_dict(pinned)
    assert info.allocated_node == "" and len(info.allocated_terms) == 2
    cordoned = node("n1", rack="r1")
    cordoned["spec"]["unschedulable"] = True
    load = make_pod("load", cpu="8", node_name="n3")  # shoal's packing would pick n3 if it could
    _, out = run(
        cordoned,
        node("n2", rack="r2"),
        node("n3", rack="r3"),
        load,
        device_class(),
        pinned,
        user("p", "shared"),
    )
    assert out["uid-p"].node == "n2"


def test_an_allocation_from_a_node_selector_slice_keeps_that_selector() -> None:
    """As the allocator's createNodeSelector: devices of a slice shared by rack r1's nodes make an
    allocation available on every r1 node, not only the first pod's; a second pod sharing the claim
    may go to the other r1 node (here the first one is cordoned meanwhile), never to rack r2."""
    from shoal.core.state.objects import NodeSpec
    from shoal.kube.dra import allocation_body

    rack = {"key": "rack", "operator": "In", "values": ["r1"]}
    shared_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "rack-r1-fabric"},
        "spec": {
            "driver": GPU,
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [rack]}]},
            "pool": {"name": "rack-r1", "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu("rack-r1", i) for i in range(2)],
        },
    }
    nodes = [node("n1", rack="r1"), node("n2", rack="r1"), node("n3", rack="r2")]
    sim, out = run(*nodes, device_class(), shared_slice, claim("c"), user("p1", "c"))
    first = out["uid-p1"].node
    assert first in ("n1", "n2")
    held = sim.scheduler.cache.store(DraStore).claims["default/c"]
    assert held.allocated_node == "" and held.allocated_terms and held.allocated_terms[0].expressions
    body = allocation_body(held)
    assert body["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
    }
    cordoned = next(n for n in nodes if n["metadata"]["name"] == first)
    cordoned["spec"]["unschedulable"] = True
    sim.scheduler.on_node(NodeSpec.from_dict(cordoned))
    sim.submit(user("p2", "c"))
    assert sim.run_sync()["uid-p2"].node == ({"n1", "n2"} - {first}).pop()


@pytest.mark.parametrize(
    "selector",
    [
        "x",
        [1],
        {"nodeSelectorTerms": "ab"},
        {"nodeSelectorTerms": [{"matchFields": ["x"]}]},
        {"nodeSelectorTerms": [7]},
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": 5}]}]},
    ],
)
def test_a_malformed_allocation_selector_never_crashes_the_watch(selector: Any) -> None:
    from shoal.plugins.dynamicresources.objects import ResourceClaimInfo

    obj = allocated(claim("c"), "n1", ["gpu-0"])
    obj["status"]["allocation"]["nodeSelector"] = selector
    info = ResourceClaimInfo.from_dict(obj)
    assert info.allocated is not None and info.allocated_node == ""


def test_profile_without_dynamic_resources_refuses_the_pod_naming_the_field() -> None:
    profile = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "gpu-scheduler"},
        "spec": {"schedulerName": "gpu-scheduler", "plugins": {"filter": [{"name": "NodeName"}]}},
    }
    _, out = run(profile, node("n1"), device_class(), node_slice("n1"), claim("c"), user("p", "c"))
    assert "pod uses spec.resourceClaims, which this profile does not evaluate" in out["uid-p"].message
    assert "DynamicResources at filter" in out["uid-p"].message


def test_a_cycle_at_1000_nodes_by_8_devices() -> None:
    """Measured (printed with -s): the first batch pays the selector evaluations, the second is the
    steady state; both must stay well under a second per pod on this machine."""
    objs: list[dict[str, Any]] = [device_class()]
    for i in range(1000):
        objs += [node(f"n{i}"), node_slice(f"n{i}")]
    objs += [claim(f"c{i}") for i in range(40)]
    objs += [user(f"p{i}", f"c{i}") for i in range(20)]
    sim = Simulation(InMemoryCluster(objs))
    start = time.perf_counter()
    sim.run_sync()
    first = (time.perf_counter() - start) / 20
    for i in range(20, 40):
        sim.submit(user(f"p{i}", f"c{i}"))
    start = time.perf_counter()
    out = sim.run_sync()
    steady = (time.perf_counter() - start) / 20
    assert all(o.node for o in out.values())
    taken = [a.id for c in sim.scheduler.cache.store(DraStore).claims.values() for a in c.allocated or ()]
    assert len(taken) == len(set(taken)) == 40
    print(f"\n1,000 nodes x 8 devices, one-GPU claims: {first * 1000:.1f} ms per pod (first batch), ", end="")
    print(f"{steady * 1000:.1f} ms per pod (steady)")
    assert steady < 1.0


def test_admin_access_takes_a_device_in_use_and_leaves_it_to_others() -> None:
    """adminAccess (GA in 1.37): a monitoring pod's claim gets a GPU another claim holds; its
    result says so, and the GPU is not taken from anyone (a plain claim still gets it after)."""
    admin = claim("admin")
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    objs = [node("n1"), device_class(), node_slice("n1", 1), claim("c"), user("p", "c")]
    sim = Simulation(InMemoryCluster(objs))
    assert sim.run_sync()["uid-p"].node == "n1"  # the node's one GPU is in use
    sim.submit(admin)
    sim.submit(user("monitor", "admin"))
    assert sim.run_sync()["uid-monitor"].node == "n1"
    store = sim.scheduler.cache.store(DraStore)
    (result,) = store.claims["default/admin"].allocated or ()
    assert result.admin_access and result.id.device == "gpu-0"
    assert store.taken_by(result.id) == "default/c"  # still c's, not the admin's


def test_what_shoal_does_not_evaluate_is_refused_or_left_alone_never_guessed() -> None:
    # consumable capacity is evaluated: a dedicated 80Gi GPU holds a request for 10Gi of it whole
    capacity = claim("c")
    capacity["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": "10Gi"}}
    sim, out = run(node("n1"), device_class(), node_slice("n1", 1), capacity, user("p", "c"))
    (whole,) = sim.scheduler.cache.store(DraStore).claims["default/c"].allocated or ()
    assert out["uid-p"].node == "n1" and not whole.share_id and not whole.consumed
    # distinctAttribute is evaluated: two GPUs on different PCIe roots, none where every GPU of
    # the node has the same root
    distinct = claim("d", count=2, constraints=[{"distinctAttribute": "resource.kubernetes.io/pcieRoot"}])
    sim, out = run(node("n1"), device_class(), node_slice("n1"), distinct, user("p", "d"))
    got = sim.scheduler.cache.store(DraStore).claims["default/d"].allocated or ()
    assert out["uid-p"].node == "n1" and sorted(a.id.device for a in got) == ["gpu-0", "gpu-4"]
    _, out = run(node("n1"), device_class(), node_slice("n1", root="pci0000"), distinct, user("p", "d"))
    assert out["uid-p"].node is None and "cannot allocate all claims" in out["uid-p"].message
    # a kind of constraint shoal does not know (a later release's) is refused by name
    future = claim("f", count=2, constraints=[{"spreadAttribute": "resource.kubernetes.io/pcieRoot"}])
    _, out = run(node("n1"), device_class(), node_slice("n1"), future, user("p", "f"))
    assert (
        "claim default/f, constraint uses spreadAttribute, which shoal does not evaluate yet"
        in out["uid-p"].message
    )
    tainted = node_slice("n1", 1)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    _, out = run(node("n1"), device_class(), tainted, claim("c"), user("p", "c"))
    assert out["uid-p"].node is None and "cannot allocate all claims" in out["uid-p"].message


def test_a_taint_rule_keeps_devices_from_untolerating_claims_until_it_goes() -> None:
    """A DeviceTaintRule's NoExecute taint on n1's GPUs: a claim that does not tolerate it waits
    (``shoal explain`` names the taint), one that tolerates it is allocated with its tolerations
    in the result; deleting the rule retries the waiting pod, which is then placed."""
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": {"driver": GPU, "pool": "n1"},
            "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"},
        },
    }
    tolerant = claim("t")
    toleration = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [toleration]
    sim = Simulation(InMemoryCluster([node("n1"), device_class(), node_slice("n1", 2), rule]))
    for obj in (claim("c"), user("p", "c"), tolerant, user("q", "t")):
        sim.submit(obj)
    out = sim.run_sync()
    assert out["uid-p"].node is None and "cannot allocate all claims" in out["uid-p"].message
    assert out["uid-q"].node == "n1"
    held = sim.scheduler.cache.store(DraStore).claims["default/t"].allocated or ()
    assert [dict(t.raw) for t in held[0].tolerations] == [toleration]
    pending = PodInfo.from_dict(sim.cluster.pods["uid-p"])
    notes = sim.scheduler.explain(pending).notes["n1"]["DynamicResources"]
    assert "2 tainted (example.com/maintenance=true:NoExecute) and not tolerated" in notes
    sim.scheduler.on_object(DRA_DECODERS["DeviceTaintRule"](rule), deleted=True)
    assert sim.run_sync()["uid-p"].node == "n1"


def gang_member(name: str, claim_name: str, group: str) -> dict[str, Any]:
    pod = user(name, claim_name)
    pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    return pod


def test_gang_with_two_gpu_claims_is_all_or_nothing_and_a_rollback_leaves_no_allocation() -> None:
    def gang(members: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [make_pod_group("train", min_member=members)]
        for i in range(members):
            out += [claim(f"c{i}", count=2), gang_member(f"t{i}", f"c{i}", "train")]
        return out

    base = [node("n1"), node("n2"), device_class(), node_slice("n1", 4), node_slice("n2", 4)]
    sim, out = run(*base, *gang(4))
    assert sorted(o.node or "" for o in out.values()) == ["n1", "n1", "n2", "n2"]
    taken = [a.id for c in sim.scheduler.cache.store(DraStore).claims.values() for a in c.allocated or ()]
    assert len(taken) == len(set(taken)) == 8
    sim, out = run(*base, *gang(5))  # 5 x 2 GPUs on 8: none placed, nothing left allocated
    assert all(o.node is None for o in out.values())
    dra = sim.scheduler.cache.store(DraStore)
    assert not dra.assumed
    assert all(c.allocated is None for c in dra.claims.values())


def test_simulate_reads_dra_objects_from_a_snapshot_and_allocates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "snapshot.yaml"
    objs = [node("n1"), device_class(), node_slice("n1"), claim("c"), user("p", "c")]
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    assert main(["simulate", "--cluster", str(snapshot)]) == 0
    assert "1/1 pending pods placed" in capsys.readouterr().out


def test_queueing_hint_wakes_a_pod_only_for_claim_changes_that_may_free_or_make_its_claims() -> None:
    from shoal.core.framework.interfaces import ClusterEvent, EventKind
    from shoal.core.state.objects import PodInfo
    from shoal.plugins.dynamicresources.objects import ResourceClaimInfo, ResourceSliceInfo
    from shoal.plugins.dynamicresources.plugin import claim_change_may_help

    pod = PodInfo.from_dict(user("p", "mine"))

    def event(obj: object) -> ClusterEvent:
        return ClusterEvent(EventKind.DRA_CHANGE, obj)

    other_allocated = ResourceClaimInfo.from_dict(allocated(claim("other"), "n1", ["gpu-0"]))
    assert not claim_change_may_help(pod, event(other_allocated))  # it only took a device
    # another pod's claim created (unallocated): it cannot help; a deallocation comes as None
    assert not claim_change_may_help(pod, event(ResourceClaimInfo.from_dict(claim("other"))))
    assert claim_change_may_help(
        pod, event(ResourceClaimInfo.from_dict(allocated(claim("mine"), "n1", ["gpu-1"])))
    )
    assert claim_change_may_help(pod, event(None))  # a deletion or a deallocation
    assert claim_change_may_help(pod, event(ResourceSliceInfo.from_dict(node_slice("n2"))))


def test_explain_says_per_claim_how_many_devices_match_and_are_free(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from shoal.core.state.objects import PodInfo
    from shoal.explain_cli import print_text
    from shoal.views.explanation import explanation_doc

    theirs = allocated(claim("theirs"), "n1", [f"gpu-{i}" for i in range(8)], reserved=("x",))
    big = claim("big", selectors=(f'device.capacity["{GPU}"].memory.compareTo(quantity("60Gi")) >= 0',))
    objs = [
        node("n1"),
        node("n2"),
        device_class(),
        node_slice("n1"),
        node_slice("n2", memory="40Gi"),
        theirs,
        big,
    ]
    sim = Simulation(InMemoryCluster([*objs, user("p", "big"), user("q", "theirs")]))
    pod = PodInfo.from_dict(user("p", "big"))
    print_text(explanation_doc(sim.scheduler, pod, sim.scheduler.explain(pod)))
    out = capsys.readouterr().out
    assert (
        "claim default/big, request gpu (device class gpu.nvidia.com, count 1): "
        "8 of 16 devices match, 0 of them free" in out
    )
    plugin = sim.scheduler.profiles["gpu-scheduler"].plugins["DynamicResources"]
    assert isinstance(plugin, DynamicResources)
    [line] = plugin.describe(PodInfo.from_dict(user("q", "theirs")))
    assert (
        line.startswith("claim default/theirs: allocated on n1 (gpu.nvidia.com/n1/gpu-0,")
        and "1 consumer(s)" in line
    )


def test_a_claim_change_is_asked_only_of_its_pod_and_a_deallocation_of_every_pod() -> None:
    """Thousands of pods wait for their template claims at once: each claim created must not
    re-run PreEnqueue for every one of them (quadratic), only for the pod it was made for; a
    claim that frees devices (deallocated or deleted) may help any pod."""
    from shoal.core.framework.interfaces import ClusterEvent, EventKind
    from shoal.plugins.dynamicresources.objects import ResourceClaimInfo
    from shoal.plugins.dynamicresources.plugin import claim_consumers

    made_for = claim("c")
    made_for["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
    ]
    info = ResourceClaimInfo.from_dict(made_for)
    assert claim_consumers(ClusterEvent(EventKind.DRA_CHANGE, info)) == ("uid-p",)
    assert (
        claim_consumers(ClusterEvent(EventKind.DRA_CHANGE, ResourceClaimInfo.from_dict(claim("n")))) is None
    )
    assert claim_consumers(ClusterEvent(EventKind.DRA_CHANGE, None)) is None

    # the store says which event a change is: a deallocation carries no object (it may help anyone)
    store = DraStore()
    held = ResourceClaimInfo.from_dict(allocated(claim("a"), "n1", ["gpu-0"]))
    assert store.apply(held) == ClusterEvent(EventKind.DRA_CHANGE, held)
    deallocated = ResourceClaimInfo.from_dict(claim("a"))
    assert store.apply(deallocated) == ClusterEvent(EventKind.DRA_CHANGE, None)
    assert store.apply(deallocated, deleted=True) == ClusterEvent(EventKind.DRA_CHANGE, None)


def test_explain_says_per_node_how_many_of_its_devices_match_the_selectors_and_are_free(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from shoal.explain_cli import print_text
    from shoal.views.explanation import explanation_doc

    big = claim("big", selectors=(f'device.capacity["{GPU}"].memory.compareTo(quantity("60Gi")) >= 0',))
    theirs = allocated(claim("theirs"), "n1", [f"gpu-{i}" for i in range(6)], reserved=("x",))
    objs = [node("n1"), node("n2"), device_class(), node_slice("n1"), node_slice("n2", memory="40Gi")]
    sim = Simulation(InMemoryCluster([*objs, theirs, big, user("p", "big"), user("q", "theirs")]))
    pod = PodInfo.from_dict(user("p", "big"))
    print_text(explanation_doc(sim.scheduler, pod, sim.scheduler.explain(pod)))
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("n")}
    assert "8 of 8 devices match, 2 free, 1 wanted" in lines["n1"] and "fits" in lines["n1"]
    assert "rejected by DynamicResources" in lines["n2"]
    assert "0 of 8 devices match, 0 free, 1 wanted" in lines["n2"]
    assert "memory.compareTo" in lines["n2"] and "device class gpu.nvidia.com" in lines["n2"]


# -- DRA-backed extended resources (extended.py) --------------------------------------------------
def gpu_class_for(resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """NVIDIA's GPU class with the extended-resource mapping a platform team adds."""
    obj = device_class()
    obj["spec"]["extendedResourceName"] = resource
    return obj


def gpu_pod(name: str, resource: str = "nvidia.com/gpu", count: int = 1) -> dict[str, Any]:
    obj = make_pod(name, extra_requests={resource: str(count)})
    obj["metadata"]["uid"] = f"uid-{name}"
    return obj


def writer(sim: Simulation) -> Any:
    return sim.scheduler.handle.extras["claim-writer"]


def test_nvidia_gpu_on_a_dra_only_node_is_allocated_through_a_claim_made_for_the_pod() -> None:
    """kube-scheduler 1.37's flow: the node's allocatable lacks nvidia.com/gpu, a DeviceClass
    provides it, so a claim is made for the pod (generateName, annotation, the pod its controller),
    allocated, reserved for it, and named in the pod's status with the request mappings."""
    sim, out = run(node("n1"), gpu_class_for(), node_slice("n1"), gpu_pod("p", count=2))
    assert out["uid-p"].node == "n1", out["uid-p"].message
    store = sim.scheduler.cache.store(DraStore)
    (made,) = store.claims.values()
    assert made.name == "p-extended-resources-00001" and made.extended and made.owner_uid == "uid-p"
    assert made.reserved_for == ("uid-p",) and made.allocated_node == "n1"
    assert [r.request for r in made.allocated or ()] == ["container-0-request-2"] * 2
    assert [(r.name, r.device_class, r.count) for (r,) in made.requests] == [
        ("container-0-request-2", GPU, 2)  # the container's requests: cpu, memory, nvidia.com/gpu
    ]
    assert writer(sim).extended["uid-p"] == {
        "requestMappings": [
            {
                "containerName": "main",
                "resourceName": "nvidia.com/gpu",
                "requestName": "container-0-request-2",
            }
        ],
        "resourceClaimName": made.name,
    }
    assert not store.assumed


def test_a_device_plugin_node_serves_its_own_gpus_and_no_claim_is_made() -> None:
    plugin_node = make_node("dp", gpus=8)
    sim, out = run(plugin_node, gpu_class_for(), gpu_pod("p", count=1))
    assert out["uid-p"].node == "dp"
    assert not sim.scheduler.cache.store(DraStore).claims and not writer(sim).extended


def test_dra_only_gpus_run_out_with_upstreams_reason_and_the_implicit_name_works_too() -> None:
    implicit = f"deviceclass.resource.kubernetes.io/{GPU}"
    pods = [gpu_pod(f"p{i}", implicit, 3) for i in range(3)]
    sim, out = run(node("n1"), device_class(), node_slice("n1"), *pods)
    placed = sorted(k for k, o in out.items() if o.node == "n1")
    assert len(placed) == 2  # 3 + 3 of 8 GPUs
    (waiting,) = [o for o in out.values() if o.node is None]
    assert "1 cannot allocate all claims" in waiting.message
    assert len(sim.scheduler.cache.store(DraStore).claims) == 2


def test_a_profile_without_dynamic_resources_refuses_naming_the_class() -> None:
    profile = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "no-dra"},
        "spec": {"schedulerName": "gpu-scheduler", "plugins": {"filter": [{"name": "NodeResourcesFit"}]}},
    }
    _, out = run(
        profile,
        node("n1"),
        gpu_class_for(),
        node_slice("n1"),
        gpu_pod("p", count=1),
    )
    assert out["uid-p"].node is None
    assert f"offer nvidia.com/gpu only through DRA (DeviceClass {GPU})" in out["uid-p"].message


def test_a_claim_left_from_an_earlier_attempt_is_deleted_then_the_pod_gets_a_new_one() -> None:
    """A bind that failed after the claim was made (and a scheduler that restarted before its
    Unreserve): Filter refuses every node, PostFilter deletes the claim, the next attempt makes
    a fresh one."""
    stale = allocated(claim("p-extended-resources-old", count=1), "n1", ["gpu-0"])
    stale["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    stale["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
    ]
    objs = [node("n1"), gpu_class_for(), node_slice("n1"), stale]
    sim, out = run(*objs, gpu_pod("p", count=1))
    assert out["uid-p"].node == "n1" and out["uid-p"].attempts == 2
    (made,) = sim.scheduler.cache.store(DraStore).claims.values()
    assert made.name == "p-extended-resources-00001" and made.reserved_for == ("uid-p",)


def test_a_failed_bind_deletes_the_claim_it_made() -> None:
    sim = Simulation(
        InMemoryCluster(
            [
                node("n1"),
                gpu_class_for(),
                node_slice("n1"),
                gpu_pod("p", count=1),
            ]
        )
    )
    sim.binder.fail["uid-p"] = Status.error("the API server said no")
    out = sim.run_sync()
    store = sim.scheduler.cache.store(DraStore)
    assert out["uid-p"].node == "n1"  # the retry
    (made,) = store.claims.values()
    assert made.name == "p-extended-resources-00002" and not store.assumed


def test_the_newest_class_provides_an_extended_resource_name_and_every_class_its_implicit_one() -> None:
    """Upstream's extended-resource cache: of two classes naming nvidia.com/gpu the newer wins, of
    two as old the first by name."""
    store = DraStore()

    def add(name: str, created: str) -> None:
        obj = gpu_class_for()
        obj["metadata"] = {"name": name, "creationTimestamp": created}
        store.apply(DeviceClassInfo.from_dict(obj))

    add("b-old", "2026-01-01T00:00:00Z")
    add("c-new", "2026-06-01T00:00:00Z")
    assert (store.extended_class("nvidia.com/gpu") or DeviceClassInfo("")).name == "c-new"
    add("a-new", "2026-06-01T00:00:00Z")
    assert (store.extended_class("nvidia.com/gpu") or DeviceClassInfo("")).name == "a-new"
    for name in ("a-new", "b-old", "c-new"):
        assert (
            store.extended_class(f"deviceclass.resource.kubernetes.io/{name}") or DeviceClassInfo("")
        ).name == name
    assert store.extended_class("example.com/other") is None


def test_noderesourcesfit_wakes_a_pod_for_a_class_that_provides_what_it_asks() -> None:
    asks = PodInfo.from_dict(gpu_pod("p"))
    provides = DeviceClassInfo.from_dict(gpu_class_for())
    other = DeviceClassInfo.from_dict(device_class("other"))
    implicit = PodInfo.from_dict(gpu_pod("q", "deviceclass.resource.kubernetes.io/other"))
    event = ClusterEvent(EventKind.DRA_CHANGE, provides)
    assert class_provides_a_request(asks, event)
    assert not class_provides_a_request(asks, ClusterEvent(EventKind.DRA_CHANGE, other))
    assert class_provides_a_request(implicit, ClusterEvent(EventKind.DRA_CHANGE, other))
    assert not class_provides_a_request(asks, ClusterEvent(EventKind.DRA_CHANGE, None))


# -- binding conditions (binding.py) ---------------------------------------------------------------
def fabric_slice(node_name: str) -> dict[str, Any]:
    """A pool of one GPU attached over a fabric: usable once the driver says ``attached``."""
    obj = node_slice(node_name, 1)
    obj["metadata"]["name"] = f"{node_name}-fabric"
    obj["spec"]["pool"]["name"] = f"{node_name}-fabric"
    device = obj["spec"]["devices"][0]
    device.update(bindingConditions=["attached"], bindingFailureConditions=["failed"], bindsToNode=True)
    device["name"] = "fabric-gpu"
    return obj


async def claim_state(
    sim: Simulation, key: str, wanted: Callable[[ResourceClaimInfo], bool]
) -> ResourceClaimInfo:
    """The claim once the watch brings it in the ``wanted`` state (woken by each claim change;
    bounded)."""
    store = sim.scheduler.cache.store(DraStore)
    changed = asyncio.Event()
    store.watchers.append(changed.set)
    try:
        while (found := store.claims.get(key)) is None or not wanted(found):
            changed.clear()
            await asyncio.wait_for(changed.wait(), 30)
        return found
    finally:
        store.watchers.remove(changed.set)


async def allocated_for(sim: Simulation, key: str) -> ResourceClaimInfo:
    """The claim once PreBind wrote its allocation."""
    return await claim_state(sim, key, lambda c: c.allocated is not None)


def driver_says(sim: Simulation, claim_: ResourceClaimInfo, condition: str, reason: str = "Done") -> None:
    """The driver's write of ``status.devices[].conditions``: ``condition`` True on every device."""
    conditions = {
        a.id: {condition: ("True", reason, f"{condition} by the test")} for a in claim_.allocated or ()
    }
    sim.scheduler.on_object(replace(claim_, device_conditions=conditions))


def test_a_pool_without_binding_conditions_comes_first_and_the_other_binds_once_attached() -> None:
    """Upstream's BasicFlow: the first pod gets the plain GPU at once; the second gets the fabric
    GPU, whose result carries the device's conditions and is pinned to the node (bindsToNode), and
    binds only once the driver sets ``attached``."""
    objs = [node("n1"), device_class(), node_slice("n1", 1), fabric_slice("n1"), claim("c1"), claim("c2")]

    async def scenario() -> dict[str, Any]:
        sim = Simulation(InMemoryCluster([*objs, user("p1", "c1")]))
        first = await sim.run()
        assert first["uid-p1"].node == "n1"
        assert [
            a.id.device for a in sim.scheduler.cache.store(DraStore).claims["default/c1"].allocated or ()
        ] == ["gpu-0"]
        sim.submit(user("p2", "c2"))
        running = asyncio.create_task(sim.run())
        got = await allocated_for(sim, "default/c2")
        (result,) = got.allocated or ()
        assert result.id.device == "fabric-gpu" and result.binding_conditions == ("attached",)
        assert result.binding_failure_conditions == ("failed",) and got.allocated_node == "n1"
        assert got.allocated_at and not (sim.cluster.pods["uid-p2"].get("spec") or {}).get("nodeName")
        driver_says(sim, got, "attached")
        return await running

    out = asyncio.run(scenario())
    assert out["uid-p2"].node == "n1"


def test_a_failed_binding_is_an_error_then_the_claim_is_deallocated_for_another_try() -> None:
    objs = [node("n1"), device_class(), fabric_slice("n1"), claim("c")]

    async def scenario() -> tuple[str, list[str]]:
        sim = Simulation(InMemoryCluster([*objs, user("p", "c")]))
        running = asyncio.create_task(sim.run())
        got = await allocated_for(sim, "default/c")
        freed = asyncio.create_task(claim_state(sim, "default/c", lambda c: c.allocated is None))
        driver_says(sim, got, "failed", reason="AttachFailed")
        await freed  # PostFilter deallocated it
        failed = [m for _, _, m in sim.reporter.events if "device binding failed" in m]
        again = await allocated_for(sim, "default/c")  # and the next attempt allocated it anew
        driver_says(sim, again, "attached")
        out = await running
        return out["uid-p"].node or "", failed

    node_name, failed = asyncio.run(scenario())
    assert node_name == "n1"
    assert failed == [
        'device binding failed: claim=c, reason=AttachFailed, message="failed by the test"'
    ] or any(
        'device binding failed: claim=c, reason=AttachFailed, message="failed by the test"' in m
        for m in failed
    ), failed


def test_binding_conditions_that_never_come_time_out_as_the_profile_says() -> None:
    """``bindingTimeout`` (DynamicResourcesArgs) bounds PreBind's wait: an Error naming it, the pod
    back to the queue (where the claim, timed out, is deallocated for another try)."""
    profile = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "short-wait"},
        "spec": {
            "schedulerName": "gpu-scheduler",
            "pluginConfig": [{"name": "DynamicResources", "args": {"bindingTimeout": "1s"}}],
        },
    }
    objs = [profile, node("n1"), device_class(), fabric_slice("n1"), claim("c"), user("p", "c")]

    async def scenario() -> list[str]:
        sim = Simulation(InMemoryCluster(objs))
        running = asyncio.create_task(sim.run())
        await allocated_for(sim, "default/c")
        await claim_state(sim, "default/c", lambda c: c.allocated is None)  # timed out, deallocated
        running.cancel()
        await sim.scheduler.drain(grace=0)
        return [m for _, _, m in sim.reporter.events if "device binding timeout" in m]

    (first, *_) = asyncio.run(scenario())
    # the wait's own deadline, or the claim's (its allocationTimestamp is to the second): upstream's too
    assert (
        "device binding timeout: context deadline exceeded" in first
        or "device binding timeout: claim=c" in first
    )


# -- a gang's devices chosen together (beyond upstream) -------------------------------------------
def halves_slices(node_name: str) -> list[dict[str, Any]]:
    """One GPU published whole or as two halves (MIG-like), all three sharing its memory slices
    (a pool of two slices: the counters, the devices; as NVIDIA's driver publishes them)."""
    slots = {f"s{i}": {"value": "1"} for i in range(8)}

    def device(name: str, profile: str, used: range) -> dict[str, Any]:
        return {
            "name": name,
            "attributes": {"profile": {"string": profile}},
            "consumesCounters": [
                {"counterSet": "gpu-0", "counters": {f"s{i}": {"value": "1"} for i in used}}
            ],
        }

    spec = {
        "driver": GPU,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 2},
    }
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-counters"},
            "spec": {**spec, "sharedCounters": [{"name": "gpu-0", "counters": slots}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-gpu"},
            "spec": {
                **spec,
                "devices": [
                    device("whole", "7g", range(8)),
                    device("half-0", "3g", range(4)),
                    device("half-4", "3g", range(4, 8)),
                ],
            },
        },
    ]


def profile_is(p: str) -> str:
    return f'device.attributes["{GPU}"].profile == "{p}"'


def test_a_gang_members_greedy_choice_does_not_starve_another_its_devices_are_chosen_together() -> None:
    """kubernetes/kubernetes#138765: the first member would rather have the whole GPU
    (``firstAvailable``: whole, else a half), the second needs a half. One after the other, the
    first takes the whole GPU and the second finds nothing: kube-scheduler 1.37 leaves the gang
    pending. shoal searches the members' claims together on the node and gives each a half."""
    greedy = claim("greedy")
    greedy["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": "whole",
                    "deviceClassName": GPU,
                    "selectors": [{"cel": {"expression": profile_is("7g")}}],
                },
                {
                    "name": "half",
                    "deviceClassName": GPU,
                    "selectors": [{"cel": {"expression": profile_is("3g")}}],
                },
            ],
        }
    ]
    half = claim("half", selectors=(profile_is("3g"),))
    objs = [
        node("n1"),
        device_class(),
        *halves_slices("n1"),
        make_pod_group("pair", min_member=2),
        greedy,
        half,
        gang_member("first", "greedy", "pair"),
        gang_member("second", "half", "pair"),
    ]
    sim, out = run(*objs)
    assert out["uid-first"].node == out["uid-second"].node == "n1", out
    got = {
        k: [a.id.device for a in c.allocated or ()]
        for k, c in sim.scheduler.cache.store(DraStore).claims.items()
    }
    assert sorted(got.values()) == [["half-0"], ["half-4"]]
    assert [
        a.request for a in sim.scheduler.cache.store(DraStore).claims["default/greedy"].allocated or ()
    ] == ["gpu/half"]
    # a third member finds no half left: the gang fails whole, the moved allocations go back
    # with the rest, nothing is left held or allocated
    third = [claim("half2", selectors=(profile_is("3g"),)), gang_member("third", "half2", "pair")]
    trio = [o for o in objs if o.get("kind") != "PodGroup"] + [make_pod_group("pair", min_member=3), *third]
    sim, out = run(*trio)
    assert all(o.node is None for o in out.values()), out
    dra = sim.scheduler.cache.store(DraStore)
    assert not dra.assumed and all(c.allocated is None for c in dra.claims.values())
    # alone (no gang), the first pod takes the whole GPU, as kube-scheduler does
    sim, out = run(
        node("n1"), device_class(), *halves_slices("n1"), claim_copy(greedy), user("first", "greedy")
    )
    assert [
        a.id.device for a in sim.scheduler.cache.store(DraStore).claims["default/greedy"].allocated or ()
    ] == ["whole"]


def claim_copy(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    return copied


def test_a_claim_a_gang_shares_is_allocated_once_and_every_member_reserves_it() -> None:
    """kubernetes/kubernetes#137617 and #140053: the members of a gang share one claim; the first
    member's cycle allocates it, the others use that allocation (not "in the process of being
    allocated"), and each adds itself to reservedFor once the allocation is written."""
    objs = [node("n1"), node("n2"), device_class(), node_slice("n1", 1), node_slice("n2", 1)]
    members = [gang_member(f"m{i}", "shared", "trio") for i in range(3)]
    sim, out = run(*objs, make_pod_group("trio", min_member=3), claim("shared"), *members)
    placed = {o.node for o in out.values()}
    assert len(placed) == 1 and None not in placed, out  # all on the node of the claim's one GPU
    got = sim.scheduler.cache.store(DraStore).claims["default/shared"]
    assert sorted(got.reserved_for) == ["uid-m0", "uid-m1", "uid-m2"]
    assert got.allocated is not None and len(got.allocated) == 1


def test_partitions_taken_one_pod_at_a_time_spend_the_counters_and_a_freed_one_is_taken_again() -> None:
    """What each pool has left is kept between cycles: it follows every allocation and every
    release (pods one at a time on one MIG-like GPU: two halves, then nothing, then a half freed)."""
    sim = Simulation(InMemoryCluster([node("n1"), device_class(), *halves_slices("n1")]))
    store = sim.scheduler.cache.store(DraStore)
    for i in range(3):
        sim.submit(claim(f"h{i}", selectors=(profile_is("3g"),)))
        sim.submit(user(f"p{i}", f"h{i}"))
        out = sim.run_sync()
    held = {k: [a.id.device for a in c.allocated or ()] for k, c in store.claims.items()}
    assert held == {"default/h0": ["half-0"], "default/h1": ["half-4"], "default/h2": []}
    assert out["uid-p2"].node is None
    sim.submit(claim("whole", selectors=(profile_is("7g"),)))
    sim.submit(user("w", "whole"))
    assert sim.run_sync()["uid-w"].node is None
    # p0 goes and its claim is deallocated (as the watch brings it back): p2 gets that half
    sim.delete_pod("uid-p0")
    sim.submit(claim("h0", selectors=(profile_is("3g"),)))
    out = sim.run_sync()
    assert out["uid-p2"].node == "n1"
    assert [a.id.device for a in store.claims["default/h2"].allocated or ()] == ["half-0"]
    assert out["uid-w"].node is None


def test_what_is_kept_per_node_goes_with_a_deleted_node() -> None:
    """An autoscaler's nodes come and go under new names: the store's pools and the matcher's
    lists of a deleted node are not kept (they were, until 20,000 and 50,000 nodes)."""
    nodes = [node(f"n{i}") for i in range(3)]
    sim, out = run(*nodes, device_class(), node_slice("n2"), claim("c"), user("p", "c"))
    assert out["uid-p"].node == "n2"
    store = sim.scheduler.cache.store(DraStore)
    assert {"n0", "n1", "n2"} <= set(store._pools)
    (plugin,) = {
        p
        for fw in sim.scheduler.profiles.values()
        for p in fw.plugins.values()
        if isinstance(p, DynamicResources)
    }
    matcher = plugin.matcher
    for i in range(3, 200):  # nodes that came and went
        sim.scheduler.on_node(NodeSpec.from_dict(node(f"n{i}")))
        plugin.node_devices(sim.scheduler.cache.table, sim.scheduler.cache.table.index[f"n{i}"])
        sim.scheduler.on_node_deleted(f"n{i}")
    assert set(store._pools) <= {"n0", "n1", "n2"}
    plugin.node_devices(sim.scheduler.cache.table, sim.scheduler.cache.table.index["n2"])
    assert matcher.entries() <= 2 * len(sim.scheduler.cache.table) + 64 + 1
    assert "n2" in matcher._ordered
