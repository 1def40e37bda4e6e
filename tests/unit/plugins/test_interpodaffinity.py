"""InterPodAffinity, shoal's own cases: JobSet-style exclusive zones, the first pod of a self-affine
group, anti-affinity across namespaces, and a gang whose members repel each other.

kube-scheduler's own tables run in test_interpodaffinity_upstream.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shoal.core.state.cache import ClusterCache
from shoal.core.state.status import Code
from shoal.plugins import interpodaffinity
from shoal.plugins.interpodaffinity import (
    AFFINITY_REASON,
    ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY_REASON,
    Args,
)
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import ZONE_LABEL, make_node, make_pod, make_pod_group
from tests.unit.helpers import cache_with, feasible, handle_for, pod, rejected_names, scores_by_name, state

HOST = "kubernetes.io/hostname"
JOB_KEY = "jobset.sigs.k8s.io/job-key"


def term(topology: str, selector: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    return {"topologyKey": topology, "labelSelector": selector, **extra}


def affinity(
    *, required: Iterable[dict[str, Any]] = (), anti: Iterable[dict[str, Any]] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(required)}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    return out


def filter_outcome(cache: ClusterCache, incoming: Any) -> tuple[bool, Any]:
    """(PreFilter skipped?, rejections) as the runtime runs them."""
    plugin = interpodaffinity.new(Args(), handle_for(cache))
    st = state()
    _, status = plugin.pre_filter(st, incoming)
    if status.is_skip:
        return True, []
    assert status.ok, status
    return False, list(plugin.filter_nodes(st, incoming, cache.table, cache.table.valid_rows()))


# -- JobSet exclusive placement: one job per zone ---------------------------------------------------
def jobset_pod(job: str, index: int) -> dict[str, Any]:
    """A pod as JobSet writes it for ``alpha.jobset.sigs.k8s.io/exclusive-topology: <zone key>``:
    affinity to its own job's pods, anti-affinity to every other job's pods in any namespace."""
    own = {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job]}]}
    others = {
        "matchExpressions": [
            {"key": JOB_KEY, "operator": "Exists"},
            {"key": JOB_KEY, "operator": "NotIn", "values": [job]},
        ]
    }
    return make_pod(
        f"{job}-{index}",
        cpu="8",  # big enough that MostAllocated would pack the jobs together, were they not exclusive
        labels={JOB_KEY: job},
        affinity=affinity(
            required=[term(ZONE_LABEL, own)],
            anti=[term(ZONE_LABEL, others, namespaceSelector={})],
        ),
    )


def sim(objects: list[dict[str, Any]]) -> Simulation:
    return Simulation(InMemoryCluster(objects), [], initial_backoff=0.01, max_backoff=0.05)


async def test_jobset_exclusive_topology_puts_each_job_alone_in_one_zone() -> None:
    nodes = [make_node(f"{z}-{i}", zone=z) for z in ("zone-a", "zone-b", "zone-c") for i in range(2)]
    pods = [jobset_pod(job, i) for job in ("job-a", "job-b") for i in range(2)]
    s = sim([*nodes, *pods])
    await s.run()
    placed = s.placements()
    assert all(placed.values()), placed
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE_LABEL] for n in nodes}
    zones = {
        job: {zone_of[str(placed[f"default/{job}-{i}"])] for i in range(2)} for job in ("job-a", "job-b")
    }
    assert len(zones["job-a"]) == 1 and len(zones["job-b"]) == 1  # each job inside one zone
    assert zones["job-a"] != zones["job-b"]  # and the two jobs in different zones


def test_jobset_second_job_is_kept_out_of_the_first_jobs_zone_by_both_sides() -> None:
    nodes = [make_node("a1", zone="zone-a"), make_node("b1", zone="zone-b")]
    placed = {**jobset_pod("job-a", 0), "spec": {**jobset_pod("job-a", 0)["spec"], "nodeName": "a1"}}
    cache = cache_with(nodes, [placed])
    skipped, rej = filter_outcome(cache, pod("job-b-0", **_kwargs(jobset_pod("job-b", 0))))
    assert not skipped
    # its own anti-affinity (Unschedulable) wins over job-a's (checked last)
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"a1"}}
    # a pod of job-a, on the other hand, must join it
    skipped, rej = filter_outcome(cache, pod("job-a-1", **_kwargs(jobset_pod("job-a", 1))))
    assert rejected_names(cache.table, rej) == {AFFINITY_REASON: {"b1"}}


def _kwargs(obj: dict[str, Any]) -> dict[str, Any]:
    """make_pod keyword arguments back from one of its manifests (labels and affinity)."""
    return {"labels": obj["metadata"]["labels"], "affinity": obj["spec"]["affinity"]}


# -- the first pod of a self-affine group ------------------------------------------------------------
def test_first_pod_of_self_affine_group_may_go_to_any_node_with_the_topology_key() -> None:
    nodes = [make_node("a1", zone="zone-a"), make_node("b1", zone="zone-b"), make_node("nozone")]
    cache = cache_with(nodes, [make_pod("other", labels={"app": "web"}, node_name="a1")])
    sel = {"matchLabels": {"app": "db"}}
    first = pod("db-0", labels={"app": "db"}, affinity=affinity(required=[term(ZONE_LABEL, sel)]))
    _, rej = filter_outcome(cache, first)
    assert feasible(cache.table, rej) == {"a1", "b1"}  # the topology key is still required
    assert all(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in rej)
    # a pod that does not match its own terms is not the first of anything
    stranger = pod("x", labels={"app": "x"}, affinity=affinity(required=[term(ZONE_LABEL, sel)]))
    _, rej = filter_outcome(cache, stranger)
    assert feasible(cache.table, rej) == set()
    # once one is placed, the rest follow it
    cache.upsert_pod(pod("db-1", labels={"app": "db"}, node_name="b1"))
    _, rej = filter_outcome(cache, first)
    assert feasible(cache.table, rej) == {"b1"}


# -- anti-affinity across namespaces -------------------------------------------------------------------
NS_NODES = [make_node("n1"), make_node("n2"), make_node("n3")]
DB = {"matchLabels": {"app": "db"}}


def ns_cache(namespaces: dict[str, dict[str, str]]) -> ClusterCache:
    cache = cache_with(
        NS_NODES,
        [
            make_pod("db", namespace="team-a", labels={"app": "db"}, node_name="n1"),
            make_pod("db", namespace="team-b", labels={"app": "db"}, node_name="n2"),
            make_pod("db", namespace="web", labels={"app": "db"}, node_name="n3"),
        ],
    )
    for name, labels in namespaces.items():
        cache.set_namespace(name, labels)
    return cache


def test_anti_affinity_across_namespaces_by_name() -> None:
    cache = ns_cache({})
    incoming = pod(
        "web", namespace="web", affinity=affinity(anti=[term(HOST, DB, namespaces=["team-a", "team-b"])])
    )
    _, rej = filter_outcome(cache, incoming)
    # the listed namespaces replace the pod's own: web/db on n3 does not count
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"n1", "n2"}}


def test_anti_affinity_across_namespaces_by_selector_with_known_labels() -> None:
    cache = ns_cache({"team-a": {"tier": "data"}, "team-b": {"tier": "batch"}, "web": {"tier": "data"}})
    sel = {"matchLabels": {"tier": "data"}}
    incoming = pod("web", namespace="web", affinity=affinity(anti=[term(HOST, DB, namespaceSelector=sel)]))
    _, rej = filter_outcome(cache, incoming)
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"n1", "n3"}}
    # namespaces and namespaceSelector add up
    both = pod(
        "web",
        namespace="web",
        affinity=affinity(anti=[term(HOST, DB, namespaceSelector=sel, namespaces=["team-b"])]),
    )
    _, rej = filter_outcome(cache, both)
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"n1", "n2", "n3"}}


def test_anti_affinity_by_selector_without_known_labels() -> None:
    cache = ns_cache({"team-a": {"tier": "data"}})  # team-b and web: labels unknown
    sel = {"matchLabels": {"tier": "data"}}
    incoming = pod("web", namespace="web", affinity=affinity(anti=[term(HOST, DB, namespaceSelector=sel)]))
    _, rej = filter_outcome(cache, incoming)
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"n1"}}  # unknown: no match
    negative = {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}
    incoming = pod(
        "web", namespace="web", affinity=affinity(anti=[term(HOST, DB, namespaceSelector=negative)])
    )
    _, rej = filter_outcome(cache, incoming)
    # an unknown namespace is not one the selector selects, even a negative one (as upstream, which
    # lists the known namespaces a selector matches)
    assert rejected_names(cache.table, rej) == {}
    # the empty selector is every namespace, known or not
    everything = pod("web", namespace="web", affinity=affinity(anti=[term(HOST, DB, namespaceSelector={})]))
    _, rej = filter_outcome(cache, everything)
    assert rejected_names(cache.table, rej) == {ANTI_AFFINITY_REASON: {"n1", "n2", "n3"}}


def test_placed_pods_anti_affinity_sees_an_unknown_namespace_as_unlabelled() -> None:
    negative = {"matchExpressions": [{"key": "trusted", "operator": "DoesNotExist"}]}
    guard = make_pod(
        "guard",
        namespace="secure",
        labels={"app": "guard"},
        node_name="n1",
        affinity=affinity(anti=[term(HOST, {}, namespaceSelector=negative)]),
    )
    cache = cache_with(NS_NODES, [guard])
    incoming = pod("x", namespace="somewhere")
    # the incoming pod's namespace is unknown: no labels, so "trusted" does not exist on it
    skipped, rej = filter_outcome(cache, incoming)
    assert not skipped
    assert rejected_names(cache.table, rej) == {EXISTING_ANTI_AFFINITY_REASON: {"n1"}}
    cache.set_namespace("somewhere", {"trusted": "yes"})
    skipped, rej = filter_outcome(cache, incoming)
    assert skipped and rej == []


# -- a gang whose members repel each other -------------------------------------------------------------
def repelling_gang(name: str, members: int) -> list[dict[str, Any]]:
    own = {"matchLabels": {"gang": name}}
    return [make_pod_group(name, min_member=members)] + [
        make_pod(
            f"{name}-{i}",
            cpu="8",  # MostAllocated alone would stack all four on one node
            pod_group=name,
            labels={"gang": name},
            affinity=affinity(anti=[term(HOST, own)]),
        )
        for i in range(members)
    ]


async def test_gang_members_placed_in_one_cycle_repel_each_other() -> None:
    s = sim([*[make_node(f"n{i}") for i in range(4)], *repelling_gang("spread", 4)])
    await s.run()
    placed = {k: v for k, v in s.placements().items() if k.startswith("default/spread-")}
    assert len(placed) == 4 and all(placed.values())
    assert len(set(placed.values())) == 4  # the members assumed earlier in the cycle counted


async def test_gang_that_cannot_spread_binds_nothing() -> None:
    s = sim([*[make_node(f"n{i}") for i in range(3)], *repelling_gang("spread", 4)])
    outcomes = await s.run()
    placed = {k: v for k, v in s.placements().items() if k.startswith("default/spread-")}
    assert not any(placed.values()), placed
    assert any(ANTI_AFFINITY_REASON in o.message for o in outcomes.values())


# -- terms the API would refuse ---------------------------------------------------------------------------
def test_invalid_selector_key_or_value_is_refused_at_prefilter_and_an_error_at_prescore() -> None:
    cache = cache_with(NS_NODES)
    plugin = interpodaffinity.new(Args(), handle_for(cache))
    for bad in ({"matchLabels": {"bad key": "x"}}, {"matchLabels": {"app": "-x-"}}):
        incoming = pod("p", affinity=affinity(anti=[term(HOST, bad)]))
        assert "Invalid value" in incoming.pod_affinity_error
        _, status = plugin.pre_filter(state(), incoming)
        assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.message.startswith("parsing pod: spec.affinity: ")
        status = plugin.pre_score(state(), incoming, cache.table.valid_rows().nonzero()[0], cache.table)
        assert status.code is Code.ERROR


def test_placed_pods_preferred_terms_see_an_unknown_namespace_as_unlabelled() -> None:
    negative = {"matchExpressions": [{"key": "trusted", "operator": "DoesNotExist"}]}
    avoid = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": term(HOST, {}, namespaceSelector=negative)}
            ]
        }
    }
    cache = cache_with(NS_NODES, [make_pod("shy", namespace="secure", node_name="n1", affinity=avoid)])
    plugin = interpodaffinity.new(Args(), handle_for(cache))
    incoming = pod("x", namespace="somewhere")
    rows = cache.table.valid_rows().nonzero()[0]
    st = state()
    assert plugin.pre_score(st, incoming, rows, cache.table).ok
    scores = plugin.normalize_scores(st, incoming, plugin.score_nodes(st, incoming, cache.table, rows))
    assert scores_by_name(cache.table, scores) == {"n1": 0, "n2": 100, "n3": 100}
    cache.set_namespace("somewhere", {"trusted": "yes"})
    assert plugin.pre_score(state(), incoming, rows, cache.table).is_skip
