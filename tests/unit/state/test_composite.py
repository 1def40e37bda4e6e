"""CompositePodGroups (1.38): gangs of gangs placed in one cycle, all or nothing at every level,
each level inside one domain of its key (core/state/hierarchy.py, the gang cycle's TreeCycle).
Without a server: the simulator holds the objects as the API server would."""

from __future__ import annotations

import dataclasses
from typing import Any

from shoal.core.state.hierarchy import (
    COMPOSITE_INITIALLY_SCHEDULED,
    Hierarchy,
    build_tree,
    composite_initially_scheduled,
    composite_pod_group,
    ready,
)
from shoal.core.state.workloads import native_pod_group
from shoal.sim.cluster import InMemoryCluster, Outcome, Simulation
from shoal.testing.objects import (
    RACK_LABEL,
    ZONE_LABEL,
    make_composite_pod_group,
    make_native_pod_group,
    make_node,
    make_pod,
)

WL = ("job", "t")


def sim(objects: list[dict[str, Any]]) -> Simulation:
    return Simulation(InMemoryCluster(objects), [], initial_backoff=0.01, max_backoff=0.05)


def where(s: Simulation, prefix: str) -> dict[str, str | None]:
    return {k.split("/", 1)[1]: v for k, v in s.placements().items() if k.startswith(f"default/{prefix}")}


def message(outcomes: dict[str, Outcome], pod: str) -> str:
    return next(o.message for o in outcomes.values() if o.pod == f"default/{pod}")


def replica(
    name: str, parent: str, size: int, *, cpu: str = "1", key: str | None = RACK_LABEL
) -> list[dict[str, Any]]:
    """A child PodGroup (gang of ``size``, inside one ``key`` domain) and its pods."""
    group = make_native_pod_group(name, min_count=size, workload=WL, topology_key=key, parent=parent)
    return [group] + [make_pod(f"{name}-{i}", cpu=cpu, scheduling_group=name) for i in range(size)]


def test_a_composite_pod_group_maps_to_the_model() -> None:
    obj = make_composite_pod_group("job", namespace="ml", min_groups=3, workload=WL, topology_key=ZONE_LABEL)
    obj["metadata"].update(uid="u", generation=2)
    obj["spec"]["priority"] = 7
    info = composite_pod_group(obj)
    assert (info.key, info.gang, info.min_groups, info.topology_required) == ("ml/job", True, 3, ZONE_LABEL)
    assert (info.workload, info.priority, info.generation, info.parent) == ("job", 7, 2, None)
    basic = composite_pod_group(make_composite_pod_group("b", min_groups=None, parent="job"))
    assert (basic.gang, basic.min_groups, basic.parent) == (False, 1, "job")
    child = native_pod_group(make_native_pod_group("r0", min_count=2, parent="job"))
    assert child.parent == "job" and child.unevaluated == ()


def test_the_tree_is_read_in_creation_order_and_validated() -> None:
    h = Hierarchy()
    root = composite_pod_group(make_composite_pod_group("job", min_groups=2, workload=WL))
    h.set_composite(root)
    groups = {}
    for name, created in (("b", 2.0), ("a", 1.0), ("c", 1.0)):
        g = native_pod_group(make_native_pod_group(name, min_count=2, workload=WL, parent="job"))
        g = dataclasses.replace(g, created=created)
        groups[g.key] = g
        h.link_group(g, add=True)
    tree, problem = build_tree(h, groups, root)
    assert problem == ""
    assert [c.key.split("/")[1].split("@")[0] for c in tree.children] == ["a", "c", "b"]
    sizes = {"default/a@scheduling.k8s.io": 2, "default/c@scheduling.k8s.io": 1}
    assert not ready(tree, lambda k: sizes.get(k, 0))  # one ready child of the two needed
    sizes["default/b@scheduling.k8s.io"] = 2
    assert ready(tree, lambda k: sizes.get(k, 0))
    # a gang parent with a basic child, another Workload: refused, naming the rule
    h.set_composite(
        composite_pod_group(make_composite_pod_group("sub", min_groups=None, workload=WL, parent="job"))
    )
    _, problem = build_tree(h, groups, root)
    assert "is a gang (minGroupCount) and its child composite pod group default/sub is basic" in problem
    h.remove_composite("default/sub")
    other = native_pod_group(make_native_pod_group("x", min_count=1, workload=("other", "t"), parent="job"))
    groups[other.key] = other
    h.link_group(other, add=True)
    _, problem = build_tree(h, groups, root)
    assert "pod group workload does not match root workload" in problem


def test_depth_beyond_four_and_cycles_are_refused() -> None:
    h = Hierarchy()
    names = ["l1", "l2", "l3", "l4"]
    for i, name in enumerate(names):
        h.set_composite(
            composite_pod_group(
                make_composite_pod_group(name, min_groups=1, parent=names[i - 1] if i else None)
            )
        )
    _, problem = build_tree(h, {}, h.composites["default/l1"])
    assert problem == 'hierarchy depth exceeds maximum allowed depth 4 at "compositepodgroup/default/l4"'
    h.set_composite(composite_pod_group(make_composite_pod_group("l1", min_groups=1, parent="l3")))
    _, problem, missing = h.chain("default", "l2")
    assert "form a cycle" in problem and not missing
    _, problem, missing = h.chain("default", "nowhere")
    assert problem == "CompositePodGroup default/nowhere not found" and missing


def test_the_condition_is_final_once_true() -> None:
    info = composite_pod_group(make_composite_pod_group("job", min_groups=2))
    failed = composite_initially_scheduled(info, False, "no room", [], "t0")
    assert failed is not None and (failed["status"], failed["reason"]) == ("False", "Unschedulable")
    assert composite_initially_scheduled(info, False, "no room", [failed], "t1") is None
    done = composite_initially_scheduled(info, True, "", [failed], "t2")
    assert done is not None and (done["type"], done["status"], done["reason"]) == (
        COMPOSITE_INITIALLY_SCHEDULED,
        "True",
        "Scheduled",
    )
    assert composite_initially_scheduled(info, False, "gone", [done], "t3") is None


async def test_zone_and_rack_as_kube_schedulers_own_test() -> None:
    """kube-scheduler 1.38's cpg_tas_test "zone and rack": zone-2's one rack has 3 CPUs free, so
    the first replica would fit there and the second not; the whole job goes to zone-1, each
    replica inside one rack."""
    nodes = [
        make_node("node1", cpu="2", rack="rack-1", zone="zone-1"),
        make_node("node2", cpu="2", rack="rack-2", zone="zone-1"),
        make_node("node3", cpu="2", rack="rack-1", zone="zone-2"),
        make_node("node4", cpu="2", rack="rack-1", zone="zone-2"),
    ]
    busy = make_pod("busy", cpu="1", node_name="node3")
    root = make_composite_pod_group("cpg-root", min_groups=2, workload=WL, topology_key=ZONE_LABEL)
    s = sim([*nodes, busy, root, *replica("pg1", "cpg-root", 2), *replica("pg2", "cpg-root", 2)])
    await s.run()
    placed = where(s, "pg")
    assert set(placed.values()) == {"node1", "node2"}
    assert placed["pg1-0"] == placed["pg1-1"] and placed["pg2-0"] == placed["pg2-1"]


async def test_all_or_nothing_at_the_root() -> None:
    """Three replicas of a full node each, room for two: nothing is placed, and each member says
    how many child groups fit of the three needed."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    root = make_composite_pod_group("job", min_groups=3, workload=WL)
    objs = [*nodes, root, *(o for r in range(3) for o in replica(f"rep{r}", "job", 2))]
    s = sim(objs)
    outcomes = await s.run()
    assert not any(where(s, "rep").values())
    why = message(outcomes, "rep0-0")
    assert "composite pod group default/job: 2 of the 3 child groups it needs (minGroupCount) fit" in why
    assert "nothing was reserved" in why
    status = s.scheduler.gangs.composite_outcomes["default/job"]
    assert status[0] is False and "2 of the 3 child groups" in status[1]


async def test_min_group_count_below_the_children_places_what_holds() -> None:
    """minGroupCount 2 of three replicas, room for two: two bind, the third keeps its own failure."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    root = make_composite_pod_group("job", min_groups=2, workload=WL)
    s = sim([*nodes, root, *(o for r in range(3) for o in replica(f"rep{r}", "job", 2))])
    outcomes = await s.run()
    placed = where(s, "rep")
    assert sum(1 for v in placed.values() if v) == 4
    assert placed["rep2-0"] is None and placed["rep2-1"] is None
    # its own failure, not the tree's (which held)
    assert "no topology.shoal.dev/rack domain can hold its members" in message(outcomes, "rep2-0")
    assert s.scheduler.gangs.composite_outcomes["default/job"][0] is True


async def test_members_wait_for_a_ready_root_and_for_a_missing_parent() -> None:
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    s = sim([*nodes, *replica("rep0", "job", 2)])
    outcomes = await s.run()
    assert "CompositePodGroup default/job not found" in message(outcomes, "rep0-0")
    s.submit(make_composite_pod_group("job", min_groups=2, workload=WL))
    outcomes = await s.run()
    assert not any(where(s, "rep").values())
    assert "which has 1 of the 2 ready child groups it needs (minGroupCount" in message(outcomes, "rep0-0")
    for obj in replica("rep1", "job", 2):
        s.submit(obj)
    await s.run()
    assert all(where(s, "rep").values())


async def test_a_job_in_one_block_each_replica_in_one_rack() -> None:
    """Two blocks of two racks of two nodes; block b0 is half full. A job of two replicas, each
    needing a whole rack, goes to block b1: a rack each, never split across blocks."""
    nodes = []
    for b in range(2):
        for r in range(2):
            for n in range(2):
                nodes.append(
                    make_node(
                        f"b{b}r{r}n{n}", cpu="2", rack=f"b{b}-r{r}", labels={"block": f"b{b}"}, zone="z"
                    )
                )
    busy = make_pod("busy", cpu="2", node_name="b0r0n0")
    root = make_composite_pod_group("job", min_groups=2, workload=WL, topology_key="block")
    s = sim([*nodes, busy, root, *replica("rep0", "job", 4), *replica("rep1", "job", 4)])
    await s.run()
    placed = where(s, "rep")
    assert all(v is not None and v.startswith("b1") for v in placed.values()), placed
    racks = {r: {v[:4] for k, v in placed.items() if k.startswith(r) and v} for r in ("rep0", "rep1")}
    assert racks["rep0"] != racks["rep1"] and all(len(v) == 1 for v in racks.values())


async def test_min_group_count_is_mutable_and_a_lower_one_releases_the_job() -> None:
    """A job waiting for a third replica that never comes: scaled down to two (the field is
    mutable), its two replicas are placed."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    job = make_composite_pod_group("job", min_groups=3, workload=WL)
    s = sim([*nodes, job, *replica("rep0", "job", 2), *replica("rep1", "job", 2)])
    outcomes = await s.run()
    assert not any(where(s, "rep").values())
    assert "which has 2 of the 3 ready child groups it needs" in message(outcomes, "rep0-0")
    s.submit(make_composite_pod_group("job", min_groups=2, workload=WL))
    await s.run()
    assert all(where(s, "rep").values())
    assert s.scheduler.gangs.composite_outcomes["default/job"][0] is True


async def test_a_tree_that_breaks_a_rule_is_refused_whole_with_an_error() -> None:
    """A replica of another Workload under the job: kube-scheduler's runtime validation fails the
    whole tree (retried with backoff); nothing is placed."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    job = make_composite_pod_group("job", min_groups=2, workload=WL)
    odd = make_native_pod_group(
        "rep1", min_count=2, workload=("other", "t"), topology_key=RACK_LABEL, parent="job"
    )
    pods = [make_pod(f"rep1-{i}", cpu="1", scheduling_group="rep1") for i in range(2)]
    s = sim([*nodes, job, *replica("rep0", "job", 2), odd, *pods])
    outcomes = await s.run()
    assert not any(where(s, "rep").values())
    why = message(outcomes, "rep0-0")
    assert "pod group workload does not match root workload, got: 'other', want: 'job'" in why


async def test_explain_shows_the_tree_a_pod_group_is_in() -> None:
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    job = make_composite_pod_group("job", min_groups=3, workload=WL, topology_key=ZONE_LABEL)
    s = sim([*nodes, job, *replica("rep0", "job", 2)])
    await s.run()
    pod = next(p for p in s.scheduler.cache.pods.values() if p.name == "rep0-0")
    lines = s.scheduler.explain(pod).gang
    assert lines[1] == (
        "  composite pod group default/job: minGroupCount 3, one topology.kubernetes.io/zone domain, "
        "1 of 1 child group(s) ready"
    )


async def test_a_level_offers_every_domain_whatever_its_childrens_shapes() -> None:
    """A driver (8 CPUs, CPU nodes) and a worker (a GPU) in one block: the level does not judge a
    block by one member's nodes or by the largest request of all (each child places itself)."""
    nodes = []
    for b in range(2):
        nodes.append(make_node(f"cpu{b}", cpu="8", labels={"block": f"b{b}"}, zone="z"))
        nodes.append(make_node(f"gpu{b}", cpu="2", gpus=1, labels={"block": f"b{b}"}, zone="z"))
    job = make_composite_pod_group("job", min_groups=2, workload=WL, topology_key="block")
    driver = make_native_pod_group("driver", min_count=1, workload=WL, parent="job")
    worker = make_native_pod_group("worker", min_count=1, workload=WL, parent="job")
    pods = [
        make_pod("driver-0", cpu="8", scheduling_group="driver"),
        make_pod("worker-0", cpu="1", gpus=1, scheduling_group="worker"),
    ]
    s = sim([*nodes, job, driver, worker, *pods])
    await s.run()
    placed = {k.split("/")[1]: v for k, v in s.placements().items()}
    assert placed["driver-0"] is not None and placed["worker-0"] is not None
    assert placed["driver-0"][-1] == placed["worker-0"][-1]  # one block


async def test_every_domain_of_a_level_is_tried_not_only_the_first_three() -> None:
    """Three fragmented blocks (a CPU free on each rack) and an empty fourth: the job goes there."""
    nodes, busy = [], []
    for b in range(4):
        for r in range(2):
            name = f"b{b}r{r}"
            nodes.append(make_node(name, cpu="2", rack=f"b{b}-r{r}", labels={"block": f"b{b}"}, zone="z"))
            if b < 3:
                busy.append(make_pod(f"busy-{name}", cpu="1", node_name=name))
    job = make_composite_pod_group("job", min_groups=2, workload=WL, topology_key="block")
    s = sim([*nodes, *busy, job, *replica("rep0", "job", 2), *replica("rep1", "job", 2)])
    await s.run()
    assert {v for v in where(s, "rep").values()} <= {"b3r0", "b3r1"}
    assert all(where(s, "rep").values())


async def test_a_lower_min_group_count_after_a_failed_cycle_places_the_job() -> None:
    """Three replicas needed, room for two: the cycle fails; lowered to two, the job is retried
    (its pods wait on the gang plugin too, not only on the Filters that rejected them)."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    s = sim([*nodes, make_composite_pod_group("job", min_groups=3, workload=WL)])
    for r in range(3):
        for obj in replica(f"rep{r}", "job", 2):
            s.submit(obj)
    await s.run()
    assert not any(where(s, "rep").values())
    s.submit(make_composite_pod_group("job", min_groups=2, workload=WL))
    await s.run()
    assert sum(1 for v in where(s, "rep").values() if v) == 4


async def test_a_tree_gone_before_its_cycle_waits_and_comes_back_with_its_parent() -> None:
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    job = make_composite_pod_group("job", min_groups=2, workload=WL)
    s = sim([*nodes, job, *replica("rep0", "job", 2), *replica("rep1", "job", 2)])
    s.scheduler.on_composite(composite_pod_group(job), deleted=True)  # gone while queued
    outcomes = await s.run()
    assert not any(where(s, "rep").values())
    assert "CompositePodGroup default/job not found" in message(outcomes, "rep0-0")
    s.submit(job)
    await s.run()
    assert all(where(s, "rep").values())


async def test_groups_under_a_failed_level_name_it() -> None:
    """A basic job over a gang level c1 {a fits, b does not} and a group c: c binds; a, released
    with c1, says c1 failed (kube-scheduler: 'ancestor composite pod group ... is unschedulable')."""
    nodes = [make_node(f"n{i}", cpu="2", rack=f"r{i}", zone="z") for i in range(2)]
    objs: list[dict[str, Any]] = [
        make_composite_pod_group("job", min_groups=None, workload=WL),
        make_composite_pod_group("c1", min_groups=2, workload=WL, parent="job"),
        *replica("a", "c1", 2),
        *replica("b", "c1", 2, cpu="2"),
        *replica("c", "job", 2),
    ]
    s = sim([*nodes, *objs])
    outcomes = await s.run()
    placed = {k.split("/")[1]: v for k, v in s.placements().items()}
    assert placed["c-0"] and placed["c-1"] and not placed["a-0"] and not placed["b-0"]
    assert message(outcomes, "a-0").startswith("ancestor composite pod group default/c1 is unschedulable")
    assert s.scheduler.gangs.composite_outcomes["default/c1"][0] is False


async def test_a_broken_tree_is_a_composite_pod_group_error() -> None:
    nodes = [make_node("n0", cpu="2", rack="r0", zone="z")]
    job = make_composite_pod_group("job", min_groups=1, workload=WL)
    odd = make_native_pod_group("odd", min_count=1, workload=("other", "t"), parent="job")
    s = sim([*nodes, job, odd, make_pod("odd-0", cpu="1", scheduling_group="odd")])
    await s.run()
    held, why, reason = s.scheduler.gangs.composite_outcomes["default/job"]
    assert (held, reason) == (False, "CompositePodGroupError")
    assert "pod group workload does not match root workload" in why


async def test_arrivals_ask_the_tree_once_per_change_not_once_per_member() -> None:
    """64 replicas of 8 pods created one by one: the tree is judged about once per member and per
    replica that becomes ready (it was once per member per arrival: cubic)."""
    nodes = [make_node(f"n{i}", cpu="64", rack=f"r{i % 8}", zone="z") for i in range(8)]
    groups = [make_native_pod_group(f"rep{r}", min_count=8, workload=WL, parent="job") for r in range(64)]
    s = sim([*nodes, make_composite_pod_group("job", min_groups=64, workload=WL), *groups])
    builds = 0
    group_tree = s.scheduler.cache.group_tree

    def counted(group: Any) -> Any:
        nonlocal builds
        builds += 1
        return group_tree(group)

    s.scheduler.cache.group_tree = counted  # type: ignore[method-assign]
    for r in range(64):
        for i in range(8):
            s.submit(make_pod(f"rep{r}-{i}", cpu="1", scheduling_group=f"rep{r}"))
    await s.run()
    assert sum(1 for v in where(s, "rep").values() if v) == 512
    assert builds < 512 * 4
