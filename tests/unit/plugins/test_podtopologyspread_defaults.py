"""PodTopologySpread's default constraints (PodTopologySpreadArgs): which pods get them, what they
do, how the args are checked, and the scenario the differential test runs against kube-scheduler
(tests/integration/test_default_spread.py)."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.profile import ProfileError, validate_profile
from shoal.core.framework.whatif import shared_pre_filter
from shoal.core.state.objects import PodInfo
from shoal.core.state.spreadselectors import SelectorOwner
from shoal.plugins import podtopologyspread
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node
from tests.integration.default_spread_workloads import (
    CONTROLLER_WORKLOADS,
    SCENARIO_NODES,
    WORKLOADS,
    Workload,
    scenario_nodes,
    scenario_objects,
)
from tests.unit.helpers import all_rows, cache_with, handle_for

REAL_PODS = Path(__file__).resolve().parents[2] / "data" / "real" / "pods.yaml"
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
#: only PodTopologySpread scores: what the spreading alone decides (the differential test's profile)
SPREAD_ONLY = {"schedulerName": "spread", "plugins": {"score": [{"name": "PodTopologySpread", "weight": 2}]}}


def real_web_pod() -> dict[str, Any]:
    """The Deployment's pod of tests/data/real/pods.yaml (ReplicaSet owner, pod-template-hash)."""
    items = yaml.safe_load(REAL_PODS.read_text())["items"]
    pod: dict[str, Any] = next(p for p in items if p["metadata"]["name"] == "web-6d4cf56db6-7xk2p")
    return pod


def replica_set(name: str, namespace: str, match: dict[str, str]) -> dict[str, Any]:
    """As the Deployment controller writes it (the fields default spreading reads)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(match)},
        "spec": {"replicas": 6, "selector": {"matchLabels": dict(match)}},
    }


def web_replicas(n: int) -> list[dict[str, Any]]:
    """``n`` pods of the real Deployment (same owner and labels), for the ``spread`` profile."""
    out = []
    for i in range(n):
        pod = copy.deepcopy(real_web_pod())
        pod["metadata"]["name"] = f"web-6d4cf56db6-{i:05d}"
        pod["metadata"]["uid"] = f"uid-web-{i}"
        pod["metadata"].pop("annotations", None)
        pod["spec"]["schedulerName"] = "spread"
        out.append(pod)
    return out


def host_nodes(n: int = 4) -> list[dict[str, Any]]:
    return [make_node(f"n{i}", cpu="64", labels={HOST: f"n{i}"}) for i in range(n)]


def run(objects: Sequence[dict[str, Any]], profile: dict[str, Any]) -> Counter[str]:
    sim = Simulation(InMemoryCluster(list(objects)), [profile])
    asyncio.run(sim.run())
    return Counter(node for node in sim.placements().values() if node)


WEB_RS = replica_set("web-6d4cf56db6", "shop", {"app": "web", "pod-template-hash": "6d4cf56db6"})


def test_system_defaults_spread_a_deployments_pods_over_hostnames() -> None:
    placed = run([*host_nodes(), WEB_RS, *web_replicas(8)], SPREAD_ONLY)
    assert sorted(placed.values()) == [2, 2, 2, 2]


def test_a_service_selecting_the_pods_is_enough() -> None:
    pods = web_replicas(8)
    for p in pods:
        p["metadata"].pop("ownerReferences")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
    }
    assert sorted(run([*host_nodes(), service, *pods], SPREAD_ONLY).values()) == [2, 2, 2, 2]


def test_nothing_selects_the_pods_no_default_constraints() -> None:
    """The ReplicaSet is not known (not seen yet, or gone) and no Service selects the pods: the
    plugin skips them at PreFilter and PreScore, as upstream (an empty default selector)."""
    cache = cache_with(host_nodes())
    plugin = podtopologyspread.new(None, handle_for(cache))
    pod = PodInfo.from_dict(web_replicas(1)[0])
    rows = all_rows(cache.table)
    assert plugin.pre_filter(CycleState(), pod)[1].is_skip
    assert plugin.pre_score(CycleState(), pod, rows, cache.table).is_skip
    cache.spread_selectors.upsert(SelectorOwner.decode("ReplicaSet", WEB_RS))
    assert plugin.pre_score(CycleState(), pod, rows, cache.table).ok
    assert plugin.pre_filter(CycleState(), pod)[1].is_skip  # the system defaults are all soft


def test_the_gpu_scheduler_profile_does_not_spread_by_default() -> None:
    """defaultingType: List with no constraints: MostAllocated packs the Deployment's pods."""
    pods = web_replicas(4)
    for p in pods:
        p["spec"]["schedulerName"] = "gpu-scheduler"
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"
    placed = run([*host_nodes(), WEB_RS, *pods], DEFAULT_PROFILE_SPEC)
    assert list(placed.values()) == [4]
    # the same profile with PodTopologySpread's args left out: kube-scheduler's System defaults
    system = {**DEFAULT_PROFILE_SPEC, "pluginConfig": DEFAULT_PROFILE_SPEC["pluginConfig"][:-1]}
    assert system["pluginConfig"][-1]["name"] != "PodTopologySpread"
    assert len(run([*host_nodes(), WEB_RS, *pods], system)) > 1


def list_profile(*constraints: dict[str, Any]) -> dict[str, Any]:
    args = {"defaultingType": "List", "defaultConstraints": list(constraints)}
    return {**SPREAD_ONLY, "pluginConfig": [{"name": "PodTopologySpread", "args": args}]}


def test_listed_hard_defaults_filter_and_the_pods_own_constraints_replace_them() -> None:
    nodes = [
        make_node(f"{z}{i}", cpu="64", labels={ZONE: z, HOST: f"{z}{i}"}) for z in "ab" for i in range(2)
    ]
    profile = list_profile({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"})
    placed = run([*nodes, WEB_RS, *web_replicas(6)], profile)
    assert Counter(n[0] for n in placed.elements()) == {"a": 3, "b": 3}
    # own constraints (on another key, matching nothing placed): the defaults do not apply
    own = web_replicas(6)
    for p in own:
        p["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 6,
                "topologyKey": HOST,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "nobody"}},
            }
        ]
    assert run([*nodes, WEB_RS, *own], profile).total() == 6


def test_a_node_without_the_key_fails_a_listed_hard_default() -> None:
    nodes = [make_node("zoned", labels={ZONE: "a", HOST: "zoned"}), make_node("bare", labels={HOST: "bare"})]
    profile = list_profile({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"})
    sim = Simulation(InMemoryCluster([*nodes, WEB_RS, *web_replicas(1)]), [profile])
    fw = sim.scheduler.set_profile(profile)
    pod = PodInfo.from_dict(web_replicas(1)[0])
    plugin = fw.plugins["PodTopologySpread"]
    assert isinstance(plugin, podtopologyspread.PodTopologySpread)
    state = CycleState()
    _, status = plugin.pre_filter(state, pod)
    assert status.ok
    table = sim.scheduler.cache.table
    (rejection,) = plugin.filter_nodes(state, pod, table, table.valid_rows().copy())
    assert rejection.reason == podtopologyspread.MISSING_LABEL_REASON
    assert [table.names[r] for r in np.flatnonzero(rejection.mask)] == ["bare"]
    # and a what-if may not share this PreFilter: evicting matching pods changes the counts
    assert shared_pre_filter(fw, pod) is None
    assert shared_pre_filter(sim.scheduler.set_profile(SPREAD_ONLY), pod) is not None


def hard(key: str = HOST, **kw: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **kw}


def listed(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"defaultingType": "List", "defaultConstraints": list(constraints)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"defaultingType": "System", "defaultConstraints": [hard()]},
            "defaultingType: System cannot be used with defaultConstraints",
        ),
        ({"defaultingType": "Cluster"}, "defaultingType"),
        (listed(hard(maxSkew=0)), "maxSkew"),
        (listed(hard("")), "can not be empty"),
        (listed(hard("a b")), "not a qualified label key"),
        (listed({"maxSkew": 1, "topologyKey": HOST}), "whenUnsatisfiable"),
        (listed(hard(whenUnsatisfiable="Always")), "whenUnsatisfiable"),
        (listed(hard(labelSelector={"matchLabels": {"a": "b"}})), "must not define a selector"),
        (listed(hard(), hard(maxSkew=2)), f"duplicate {{{HOST}, DoNotSchedule}}"),
        ({"defaultConstraint": []}, "defaultConstraint"),
    ],
)
def test_bad_args_name_the_field(args: dict[str, Any], message: str) -> None:
    spec = {"schedulerName": "s", "pluginConfig": [{"name": "PodTopologySpread", "args": args}]}
    with pytest.raises(ProfileError) as err:
        validate_profile(spec, load_registry(), DEFAULT_PLUGINS)
    assert message in str(err.value) and "pluginConfig[0].args" in str(err.value)


def test_args_as_kube_scheduler_writes_them() -> None:
    args = podtopologyspread.ENTRY.parse_args(
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
                {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2},
            ],
        }
    )
    plugin = podtopologyspread.PodTopologySpread(cache_with([]), args)
    assert [(c.topology_key, c.max_skew, c.min_domains) for c in plugin.defaults] == [
        (ZONE, 1, 1),
        (HOST, 2, 2),
    ]
    assert not plugin.system_defaulted
    # minDomains 0 is accepted, as by kube-scheduler's args validation (it acts as 1)
    zero = podtopologyspread.ENTRY.parse_args(listed(hard(minDomains=0)))
    assert zero.default_constraints[0].min_domains == 0
    system = podtopologyspread.PodTopologySpread(cache_with([]), None)
    assert system.system_defaulted and [(c.topology_key, c.max_skew) for c in system.defaults] == [
        (HOST, 3),
        (ZONE, 5),
    ]


# -- the differential scenario -----------------------------------------------------------------------
def outcomes(workload: Workload) -> set[tuple[int, ...]]:
    """Every final count per node (in SCENARIO_NODES order) the workload's pods can end with when
    placed one at a time on a best-scoring node (the system defaults, PodTopologySpread alone
    scoring), over every way ties can be broken. One outcome: the result does not depend on
    tie-breaking, so kube-scheduler (random among the best) and shoal must both reach it."""
    owners, objs = scenario_objects(workload, "spread-test", "spread")
    prebound = [o for o in objs if o["spec"].get("nodeName")]
    pending = [o for o in objs if not o["spec"].get("nodeName")]
    names = [n for n, _ in SCENARIO_NODES]
    start = tuple(sum(1 for o in prebound if o["spec"]["nodeName"] == n) for n in names)
    seen: set[tuple[tuple[int, ...], int]] = set()
    finals: set[tuple[int, ...]] = set()

    def walk(counts: tuple[int, ...], step: int) -> None:
        if (counts, step) in seen:
            return
        seen.add((counts, step))
        if step == len(pending):
            finals.add(counts)
            return
        placed = []
        for name, c in zip(names, counts, strict=True):
            for j in range(c):
                obj = copy.deepcopy(objs[0])
                obj["metadata"]["name"] = obj["metadata"]["uid"] = f"placed-{name}-{j}"
                obj["spec"]["nodeName"] = name
                placed.append(obj)
        cache = cache_with(scenario_nodes(), placed)
        for o in owners:
            cache.spread_selectors.upsert(SelectorOwner.decode(o["kind"], o))
        plugin = podtopologyspread.new(None, handle_for(cache))
        pod = PodInfo.from_dict(pending[step])
        table, state = cache.table, CycleState()
        rows = np.array([table.index[n] for n in names], dtype=np.int64)
        assert plugin.pre_score(state, pod, rows, table).ok
        scores = plugin.normalize_scores(state, pod, plugin.score_nodes(state, pod, table, rows))
        best = int(scores.max())
        for i, s in enumerate(scores):
            if int(s) == best:
                walk(tuple(c + (k == i) for k, c in enumerate(counts)), step + 1)

    walk(start, 0)
    return finals


@pytest.mark.parametrize("workload", WORKLOADS + CONTROLLER_WORKLOADS, ids=lambda w: f"{w.kind}-{w.name}")
def test_the_differential_scenario_does_not_depend_on_tie_breaks(workload: Workload) -> None:
    """Each workload of tests/integration/test_default_spread.py has one outcome, asserted there
    for kube-scheduler and shoal alike."""
    assert outcomes(workload) == {workload.expected}


def test_the_constraints_upstream_expects_for_a_pod_a_service_selects() -> None:
    """upstream's ``want`` preFilterState of filtering_test.go TestPreFilterState "default
    constraints and a service" (the table case has no nodes, so only its status is compared
    there): the hard defaults, in order, each with the Service's selector."""
    args = podtopologyspread.ENTRY.parse_args(
        listed(
            hard("node", maxSkew=3),
            {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
            hard("rack", maxSkew=5),
        )
    )
    cache = cache_with([])
    service = {"apiVersion": "v1", "kind": "Service", "spec": {"selector": {"foo": "bar"}}}
    cache.spread_selectors.upsert(SelectorOwner.decode("Service", service))
    plugin = podtopologyspread.PodTopologySpread(cache, args)
    pod = PodInfo.from_dict({"metadata": {"name": "p", "labels": {"foo": "bar", "baz": "kar"}}})
    hard_ones = plugin.constraints(pod, "DoNotSchedule")
    assert [(c.topology_key, c.max_skew, c.min_domains) for c in hard_ones] == [
        ("node", 3, 1),
        ("rack", 5, 1),
    ]
    for c in hard_ones:
        assert c.selector is not None and [
            (r.key, r.operator, r.values) for r in c.selector.requirements
        ] == [("foo", "In", frozenset({"bar"}))]
        assert (c.node_affinity_policy, c.node_taints_policy) == ("Honor", "Ignore")
    assert [c.max_skew for c in plugin.constraints(pod, "ScheduleAnyway")] == [2]
