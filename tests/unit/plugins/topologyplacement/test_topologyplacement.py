"""TopologyPlacement: gangs inside one domain, bin-packed, falling back level by level, never silently."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from shoal.core.state.objects import PodGroupInfo
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.plugins.topologyplacement import plugin as topologyplacement
from shoal.plugins.topologyplacement.domains import RACK, ZONE
from shoal.sim.cluster import InMemoryCluster, Simulation, format_table
from shoal.testing.objects import make_node, make_pod, make_pod_group

JSON = dict[str, Any]


def fleet() -> list[JSON]:
    """zone za: rack ra (4 nodes), rack rb (6 nodes); zone zb: rack rc (3 nodes). 8 GPUs each."""
    nodes = [make_node(f"ra-{i}", gpus=8, zone="za", rack="ra") for i in range(4)]
    nodes += [make_node(f"rb-{i}", gpus=8, zone="za", rack="rb") for i in range(6)]
    nodes += [make_node(f"rc-{i}", gpus=8, zone="zb", rack="rc") for i in range(3)]
    return nodes


def gang(name: str, members: int, gpus: int, annotations: dict[str, str], **pod: Any) -> list[JSON]:
    return [make_pod_group(name, min_member=members, annotations=annotations)] + [
        make_pod(f"{name}-{i}", gpus=gpus, pod_group=name, **pod) for i in range(members)
    ]


def sim(objects: list[JSON], profiles: list[JSON] | None = None) -> Simulation:
    return Simulation(InMemoryCluster(objects), profiles or [], initial_backoff=0.01, max_backoff=0.05)


def nodes_of(s: Simulation, prefix: str) -> list[str]:
    return [v for k, v in s.placements().items() if k.startswith(f"default/{prefix}-") and v]


def rack_of(node: str) -> str:
    return node.split("-")[0]


async def test_gang_takes_the_tightest_rack_that_holds_it_on_the_fewest_nodes() -> None:
    # 8 members x 4 GPUs = 32 GPUs: ra (32 free) holds it exactly, rb (48) too, rc (24) does not
    s = sim([*fleet(), *gang("train", 8, 4, {"shoal.dev/topology-preferred": f"{RACK},{ZONE}"})])
    await s.run()
    placed = nodes_of(s, "train")
    assert len(placed) == 8
    assert {rack_of(n) for n in placed} == {"ra"}  # bin-packed: rb stays whole for a bigger gang
    assert len(set(placed)) == 4  # the fewest nodes: two members per 8-GPU node
    event = next(m for k, r, m in s.reporter.events if k == "default/train-0" and r == "Scheduled")
    assert "in topology.shoal.dev/rack domain ra" in event and "worst pairwise network cost 4" in event


async def test_gang_no_rack_holds_falls_back_to_a_zone_and_says_so() -> None:
    nodes = [make_node(f"ra-{i}", gpus=8, zone="za", rack="ra") for i in range(2)]
    nodes += [make_node(f"rb-{i}", gpus=8, zone="za", rack="rb") for i in range(2)]
    nodes += [make_node(f"rc-{i}", gpus=8, zone="zb", rack="rc") for i in range(3)]
    s = sim([*nodes, *gang("wide", 4, 8, {"shoal.dev/topology-preferred": f"{RACK},{ZONE}"})])
    await s.run()
    placed = nodes_of(s, "wide")
    assert len(placed) == 4 and {rack_of(n) for n in placed} == {"ra", "rb"}  # zone za, not zb's rack
    event = next(m for k, r, m in s.reporter.events if k == "default/wide-0" and r == "Scheduled")
    assert "in topology.kubernetes.io/zone domain za" in event
    assert "preferred topology.shoal.dev/rack could not hold it" in event
    assert "worst pairwise network cost 16" in event


async def test_required_level_no_domain_holds_leaves_the_gang_pending_holding_nothing() -> None:
    s = sim([*fleet(), *gang("big", 7, 8, {"shoal.dev/topology-required": RACK})])
    outcomes = await s.run()
    assert nodes_of(s, "big") == []
    table = s.scheduler.cache.table
    assert int(table.requested[table.resource_row("nvidia.com/gpu"), : table.n].sum()) == 0
    message = outcomes[next(u for u, o in outcomes.items() if o.pod == "default/big-0")].message
    assert "no topology.shoal.dev/rack domain can hold its members (required)" in message
    assert (
        "the best topology.shoal.dev/rack domain, rb, has room for 6 of the 7 member(s) needed (short 1)"
        in message
    )
    assert "nothing was reserved" in message


async def test_a_domain_that_only_looks_big_enough_is_tried_then_the_next_one() -> None:
    # one member per node (anti-affinity): by GPUs rack ra holds all 5, by the real Filter it holds 4
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"job": "spread"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        *fleet(),
        *gang("spread", 5, 1, {"shoal.dev/topology-required": RACK}, labels={"job": "spread"}, affinity=anti),
    ]
    s = sim(objs)
    await s.run()
    placed = nodes_of(s, "spread")
    assert len(placed) == 5 and len(set(placed)) == 5
    assert {rack_of(n) for n in placed} == {"rb"}


async def test_members_placed_earlier_pin_the_domain() -> None:
    objs = [*fleet(), *gang("grow", 2, 8, {"shoal.dev/topology-required": RACK})]
    s = sim(objs)
    await s.run()
    first = {rack_of(n) for n in nodes_of(s, "grow")}
    assert len(first) == 1
    s.submit(make_pod("grow-2", gpus=8, pod_group="grow"))  # beyond minMember: placed alone, same rack
    await s.run()
    assert {rack_of(n) for n in nodes_of(s, "grow")} == first and len(nodes_of(s, "grow")) == 3


async def test_profile_without_the_plugin_refuses_a_constrained_gang_naming_the_field() -> None:
    profile = copy.deepcopy(DEFAULT_PROFILE_SPEC)
    profile["plugins"] = {"filter": [{"name": "NodeResourcesFit"}]}
    s = sim([*fleet(), *gang("train", 2, 1, {"shoal.dev/topology-required": RACK})], profiles=[profile])
    outcomes = await s.run()
    assert nodes_of(s, "train") == []
    message = next(o.message for o in outcomes.values() if o.pod == "default/train-0")
    assert "uses shoal.dev/topology-required, which this profile does not evaluate" in message
    assert "TopologyPlacement at filter" in message


async def test_profile_default_applies_to_gangs_that_declare_nothing() -> None:
    profile = copy.deepcopy(DEFAULT_PROFILE_SPEC)
    profile["pluginConfig"] = [
        *profile["pluginConfig"],
        {"name": "TopologyPlacement", "args": {"defaultPreferred": [RACK]}},
    ]
    s = sim([*fleet(), *gang("train", 6, 8, {})], profiles=[profile])
    await s.run()
    assert Counter(rack_of(n) for n in nodes_of(s, "train")) == {"rb": 6}


def test_levels_of_group_then_profile_defaults() -> None:
    args = topologyplacement.Args(default_preferred=[RACK, ZONE])
    declared = PodGroupInfo("ns", "g", topology_required=ZONE, topology_preferred=(RACK,))
    assert topologyplacement.levels_of(declared, args) == ((RACK, ZONE), True)
    assert topologyplacement.levels_of(PodGroupInfo("ns", "g"), args) == ((RACK, ZONE), False)
    required = topologyplacement.Args(default_required=ZONE, default_preferred=[ZONE, RACK])
    assert topologyplacement.levels_of(PodGroupInfo("ns", "g"), required) == ((RACK, ZONE), True)


@pytest.mark.parametrize(
    "bad", [{"domainsPerLevel": 0}, {"levelCosts": [{"key": "", "cost": 1}]}, {"acrossCost": 0}]
)
def test_bad_args_are_refused(bad: JSON) -> None:
    with pytest.raises(ValidationError):
        topologyplacement.Args.model_validate(bad)


def test_explain_lists_the_domains_the_gang_would_try_and_the_network_costs() -> None:
    objs = [*fleet(), *gang("train", 8, 4, {"shoal.dev/topology-preferred": f"{RACK},{ZONE}"})]
    s = sim(objs)
    pod = s.scheduler.cache.pods[
        next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == "train-0")
    ]
    result = s.scheduler.explain(pod)
    assert result.gang[0] == "pod group default/train: minMember 8, 0 placed, 8 pending"
    assert result.gang[1].startswith(
        "  try 1: in topology.shoal.dev/rack domain ra (room for 8 member(s) on 4 node(s))"
    )
    assert any("domain rb" in line for line in result.gang)


def test_explain_says_why_a_required_gang_has_no_placement() -> None:
    s = sim([*fleet(), *gang("big", 7, 8, {"shoal.dev/topology-required": RACK})])
    pod = s.scheduler.cache.pods[
        next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == "big-0")
    ]
    lines = s.scheduler.explain(pod).gang
    assert "no placement: no topology.shoal.dev/rack domain can hold its members (required)" in lines[1]


async def test_simulate_table_ends_with_where_each_gang_went() -> None:
    s = sim([*fleet(), *gang("train", 8, 4, {"shoal.dev/topology-preferred": f"{RACK},{ZONE}"})])
    outcomes = await s.run()
    text = format_table(outcomes.values())
    assert "\ngangs:\n  pod group default/train in topology.shoal.dev/rack domain ra, on 4 node(s)" in text


async def test_explain_shows_the_network_cost_behind_the_score() -> None:
    objs = [*fleet(), *gang("pair", 2, 8, {}), make_pod("pair-2", gpus=8, pod_group="pair")]
    s = sim(objs)
    await s.run()
    placed = nodes_of(s, "pair")
    assert len(placed) == 3
    extra = make_pod("pair-3", gpus=8, pod_group="pair")
    s.submit(extra)
    pod = s.scheduler.cache.pods[
        next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == "pair-3")
    ]
    costs = s.scheduler.explain(pod).costs
    assert costs and all("NetworkLatency" in c for c in costs.values())
    assert min(c["NetworkLatency"] for c in costs.values()) < max(c["NetworkLatency"] for c in costs.values())


def native_group(name: str, policy: JSON, key: str) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": policy, "schedulingConstraints": {"topology": [{"key": key}]}},
    }


def native_member(name: str, group: str, gpus: int) -> JSON:
    pod = make_pod(name, gpus=gpus)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


@pytest.mark.parametrize("policy", [{"gang": {"minCount": 5}}, {"basic": {}}], ids=["gang", "basic"])
async def test_native_podgroup_topology_constraint_is_required(policy: JSON) -> None:
    objs = [
        *fleet(),
        native_group("job", policy, RACK),
        *(native_member(f"job-{i}", "job", 8) for i in range(5)),
    ]
    s = sim(objs)
    await s.run()
    placed = nodes_of(s, "job")
    assert len(placed) == 5 and {rack_of(n) for n in placed} == {"rb"}  # only rb has 5 whole nodes
