"""bench/e2e_topology.py: the fleet's domains, the fragmentation, and the measures it reports."""

from __future__ import annotations

from bench import e2e_topology as t
from shoal.plugins.topologyplacement.domains import BLOCK, CLIQUE, RACK, ZONE


def test_levels_nest_clique_in_rack_in_block_in_zone() -> None:
    assert t.labels_of(0) == {ZONE: "zone-0", BLOCK: "block-0", RACK: "rack-0", CLIQUE: "clique-0"}
    assert t.labels_of(1023) == {ZONE: "zone-1", BLOCK: "block-7", RACK: "rack-31", CLIQUE: "clique-127"}
    assert t.in_one_domain(["gpu-00032", "gpu-00063"], RACK)
    assert not t.in_one_domain(["gpu-00031", "gpu-00032"], RACK)
    assert t.in_one_domain(["gpu-00031", "gpu-00032"], BLOCK)


def test_background_is_seeded_and_leaves_whole_racks() -> None:
    pods = t.background("ns")
    assert [p["metadata"]["name"] for p in pods] == [p["metadata"]["name"] for p in t.background("ns")]
    used = {p["spec"]["nodeName"] for p in pods}
    free = t.whole_free_racks(used)
    assert 0 < free < 32
    assert all(
        1 <= int(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]) <= 7 for p in pods
    )


def test_gang_objects_are_native_podgroups_with_a_required_level() -> None:
    group, *pods = t.gang_objects("g", 16, "ns", "gpu-scheduler")
    assert group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 16}}
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert len(pods) == 16 and all(p["spec"]["schedulingGroup"] == {"podGroupName": "g"} for p in pods)
