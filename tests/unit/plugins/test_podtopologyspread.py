"""PodTopologySpread: shoal's own behaviour tests (upstream's tables: test_podtopologyspread_upstream.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from shoal.plugins.podtopologyspread import MISSING_LABEL_REASON, REASON, score_for_count, skew_ok
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod


def zone_nodes(zones: int = 3, per_zone: int = 2, **kwargs: Any) -> list[dict[str, Any]]:
    return [
        make_node(f"z{z}-n{i}", cpu="16", labels={"topology.kubernetes.io/zone": f"z{z}"}, **kwargs)
        for z in range(zones)
        for i in range(per_zone)
    ]


def spread_pod(name: str, when: str = "DoNotSchedule", max_skew: int = 1, **extra: Any) -> dict[str, Any]:
    obj = make_pod(name, cpu="1", scheduler_name="gpu-scheduler", labels={"app": "api"})
    obj["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": max_skew,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "api"}},
            **extra,
        }
    ]
    return obj


def zones_of(sim: Simulation) -> Counter[str]:
    return Counter(node.split("-")[0] for node in sim.placements().values() if node)


def test_pure_checks() -> None:
    assert skew_ok(1, 1, 1, 1) and not skew_ok(2, 1, 0, 2)
    assert score_for_count(2, 3, 1.5) == 5.0


def test_hard_spread_keeps_zones_within_max_skew() -> None:
    sim = Simulation(InMemoryCluster(zone_nodes()))
    for i in range(7):
        sim.submit(spread_pod(f"api-{i}"))
    asyncio.run(sim.run())
    assert sorted(zones_of(sim).values()) == [2, 2, 3]


def test_soft_spread_prefers_the_emptiest_zone() -> None:
    sim = Simulation(InMemoryCluster(zone_nodes()))
    for i in range(6):
        sim.submit(spread_pod(f"api-{i}", when="ScheduleAnyway"))
    asyncio.run(sim.run())
    assert sorted(zones_of(sim).values()) == [2, 2, 2]


def test_a_node_without_the_key_is_unresolvable_and_a_full_domain_is_not() -> None:
    nodes = [*zone_nodes(zones=2, per_zone=1), make_node("nolabel", cpu="16")]
    sim = Simulation(InMemoryCluster(nodes))
    placed_first = sim.submit(spread_pod("api-0"))
    asyncio.run(sim.run())
    assert placed_first["spec"]["nodeName"] in ("z0-n0", "z1-n0")
    # a second pod cannot go to the first pod's zone (skew 2 > 1), and never to the unlabelled node
    probe = sim.submit(spread_pod("probe"))
    explained = sim.scheduler.explain(sim.scheduler.cache.pods[probe["metadata"]["uid"]])
    assert explained.best is not None and explained.best != placed_first["spec"]["nodeName"]
    reasons = {r for _, rs in explained.diagnosis.node_reasons.values() for r in rs}
    assert MISSING_LABEL_REASON in reasons and REASON in reasons


def test_min_domains_counts_missing_domains_as_empty() -> None:
    """With minDomains above the domains that exist, the global minimum is 0: at most maxSkew per zone."""
    sim = Simulation(InMemoryCluster(zone_nodes(zones=2, per_zone=3)))
    for i in range(5):
        sim.submit(spread_pod(f"api-{i}", minDomains=3))
    outcomes = asyncio.run(sim.run())
    assert sorted(zones_of(sim).values()) == [1, 1]
    pending = [o.message for o in outcomes.values() if o.node is None]
    assert len(pending) == 3 and all(REASON in m for m in pending)


def test_node_affinity_policy_decides_which_domains_count() -> None:
    """z1's only node is one the pod's node affinity rejects. Honor (the default) leaves z1 out, so
    z0 is the only domain; Ignore counts z1 as an empty domain, so z0 cannot take another pod."""
    nodes = zone_nodes(zones=2, per_zone=1)
    nodes[1]["metadata"]["labels"]["pool"] = "other"
    sim = Simulation(InMemoryCluster(nodes))
    sim.submit(make_pod("old", cpu="1", node_name="z0-n0", labels={"app": "api"}))
    avoid_other = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]
            }
        }
    }
    ignore = spread_pod("ignore", nodeAffinityPolicy="Ignore")
    ignore["spec"]["affinity"] = avoid_other
    sim.submit(ignore)
    outcomes = {o.pod: o for o in asyncio.run(sim.run()).values()}
    assert outcomes["default/ignore"].node is None
    assert REASON in outcomes["default/ignore"].message
    honour = spread_pod("honour")
    honour["spec"]["affinity"] = avoid_other
    sim.submit(honour)
    asyncio.run(sim.run())
    assert sim.placements()["default/honour"] == "z0-n0"
