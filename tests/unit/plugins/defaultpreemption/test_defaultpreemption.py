"""DefaultPreemption through the in-memory cluster: victims, the chosen node, nominations."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from shoal.core.scheduling.queue import QueuedPodInfo
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.objects import PodInfo
from shoal.plugins.defaultpreemption import plugin as defaultpreemption
from shoal.plugins.defaultpreemption.evaluator import Candidate, Victim, pick_one_node, split_by_pdb
from shoal.plugins.defaultpreemption.plugin import DefaultPreemption
from shoal.plugins.defaultpreemption.ports import PREEMPTION_EXECUTOR
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.unit.helpers import pod as make_info


def running(
    name: str, node: str, *, priority: int, cpu: str = "1", start: str | None = None, **kw: Any
) -> Any:
    obj = make_pod(name, cpu=cpu, memory=None, priority=priority, node_name=node, **kw)
    obj.setdefault("status", {})["phase"] = "Running"
    if start is not None:
        obj["status"]["startTime"] = start
    return obj


def sim_with(*objects: Any) -> Simulation:
    return Simulation(InMemoryCluster(list(objects)), initial_backoff=0.01, max_backoff=0.01)


async def test_higher_priority_pod_preempts_and_binds_to_the_nominated_node() -> None:
    s = sim_with(make_node("n1", cpu="2"), running("low", "n1", priority=0, cpu="2"))
    s.submit(make_pod("high", cpu="2", memory=None, priority=1000))
    await s.run()
    assert s.placements() == {"default/high": "n1"}  # the victim is gone
    (p,) = s.preemption.preemptions
    assert (p.preemptor, p.node, p.victims) == ("default/high", "n1", ["default/low"])
    first = s.reporter.events[0]
    assert first[1] == "FailedScheduling"
    assert first[2].endswith(
        "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    )


async def test_preemption_policy_never_preempts_nothing() -> None:
    s = sim_with(make_node("n1", cpu="2"), running("low", "n1", priority=0, cpu="2"))
    obj = make_pod("polite", cpu="2", memory=None, priority=1000)
    obj["spec"]["preemptionPolicy"] = "Never"
    s.submit(obj)
    outcomes = await s.run()
    assert s.placements() == {"default/low": "n1", "default/polite": None}
    assert s.preemption.preemptions == []
    message = next(o.message for o in outcomes.values() if o.pod == "default/polite")
    assert message.endswith("preemption: not eligible due to preemptionPolicy=Never.")


async def test_equal_priority_is_never_a_victim() -> None:
    s = sim_with(make_node("n1", cpu="2"), running("peer", "n1", priority=5, cpu="2"))
    s.submit(make_pod("same", cpu="2", memory=None, priority=5))
    outcomes = await s.run()
    message = next(o.message for o in outcomes.values() if o.pod == "default/same")
    assert message.endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


async def test_only_the_fewest_least_important_pods_are_evicted() -> None:
    s = sim_with(
        make_node("n1", cpu="3"),
        running("old", "n1", priority=10, start="2026-01-01T00:00:00Z"),
        running("young", "n1", priority=10, start="2026-01-02T00:00:00Z"),
        running("lowest", "n1", priority=1, start="2025-01-01T00:00:00Z"),
    )
    s.submit(make_pod("high", cpu="2", memory=None, priority=100))
    await s.run()
    (p,) = s.preemption.preemptions
    # both priority-10 pods cannot stay; the older is reprieved first
    assert sorted(p.victims) == ["default/lowest", "default/young"]
    assert s.placements()["default/old"] == "n1"
    assert s.placements()["default/high"] == "n1"


async def test_a_pdb_steers_preemption_to_the_node_without_violations() -> None:
    s = sim_with(
        make_node("n1", cpu="1"),
        make_node("n2", cpu="1"),
        running("guarded", "n1", priority=0, labels={"app": "db"}),
        running("free", "n2", priority=0, labels={"app": "batch"}),
    )
    s.scheduler.cache.pdbs["default/db"] = PDBInfo.from_dict(
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    s.submit(make_pod("high", cpu="1", memory=None, priority=100))
    await s.run()
    (p,) = s.preemption.preemptions
    assert (p.node, p.victims) == ("n2", ["default/free"])


async def test_nominated_pod_keeps_its_room_from_lower_priority_pods() -> None:
    s = sim_with(make_node("n1", cpu="2"))
    nominated = PodInfo.from_dict(make_pod("nominee", cpu="2", memory=None, priority=100))
    nominated.uid = "uid-nominee"
    s.scheduler.cache.nominator.nominate(nominated, "n1")
    s.submit(make_pod("low", cpu="1", memory=None, priority=1))
    s.submit(make_pod("higher", cpu="1", memory=None, priority=1000))
    await s.run()
    placements = s.placements()
    assert placements["default/low"] is None  # the nominee's room is kept for it
    assert placements["default/higher"] == "n1"  # a higher priority pod may take it


def test_split_by_pdb_spends_budgets_in_order() -> None:
    pdb = PDBInfo.from_dict(
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}},
            "status": {"disruptionsAllowed": 1},
        }
    )
    a, b, c = (make_info(n, labels={"app": "x"}) for n in "abc")
    violating, others = split_by_pdb([Victim((a,)), Victim((b,)), Victim((c,))], [pdb])
    assert [v.pods[0].name for v in others] == ["a"]
    assert [(v.pods[0].name, n) for v, n in violating] == [("b", 1), ("c", 1)]
    empty = PDBInfo.from_dict({"metadata": {"name": "e"}, "spec": {"selector": {}}})
    assert not empty.matches(a)  # an empty selector matches nothing


def test_pick_one_node_criteria_in_order() -> None:
    def cand(node: str, *prios: int, violations: int = 0) -> Candidate:
        return Candidate(
            node, [make_info(f"{node}-{i}", priority=p) for i, p in enumerate(prios)], violations
        )

    best = pick_one_node([cand("a", 1, violations=1), cand("b", 100)])
    assert best is not None and best.node == "b"  # fewer PDB violations first
    best = pick_one_node([cand("a", 50), cand("b", 10, 10)])
    assert best is not None and best.node == "b"  # lower highest priority
    best = pick_one_node([cand("a", 10, 5), cand("b", 10, 1)])
    assert best is not None and best.node == "b"  # smaller sum
    best = pick_one_node([cand("a", 10, 0, 0), cand("b", 10, 0)])
    assert (
        best is not None and best.node == "b"
    )  # each priority is shifted by 2^31 in the sum, so fewer victims win there


def full_cluster(nodes: int) -> list[Any]:
    """``nodes`` nodes of 2 cpu, each running two 1-cpu pods of priority 0 (oldest on n0)."""
    objs: list[Any] = []
    for i in range(nodes):
        objs.append(make_node(f"n{i}", cpu="2"))
        for j in range(2):
            objs.append(running(f"low-{i}-{j}", f"n{i}", priority=0, start=f"2026-01-0{1 + i}T00:00:0{j}Z"))
    return objs


def gang(s: Simulation, name: str, size: int, *, priority: int, cpu: str = "1") -> None:
    s.submit(make_pod_group(name, min_member=size))
    for i in range(size):
        s.submit(make_pod(f"{name}-{i}", cpu=cpu, memory=None, priority=priority, pod_group=name))


async def test_a_gang_preempts_exactly_what_it_needs_then_binds_whole() -> None:
    s = sim_with(*full_cluster(4))
    gang(s, "train", 4, priority=100)
    await s.run()
    victims = [v for p in s.preemption.preemptions for v in p.victims]
    assert len(victims) == 4 and len(set(victims)) == 4  # 4 cpus needed, 4 pods evicted, once each
    placements = s.placements()
    assert all(placements[f"default/train-{i}"] for i in range(4))
    assert sum(1 for k, v in placements.items() if k.startswith("default/low") and v) == 4


async def test_a_gang_that_cannot_fit_even_after_preemption_evicts_nothing() -> None:
    s = sim_with(*full_cluster(2))
    gang(s, "huge", 2, priority=100, cpu="3")  # 3 cpus per member, nodes have 2
    outcomes = await s.run()
    assert s.preemption.preemptions == []
    assert all(v for k, v in s.placements().items() if k.startswith("default/low"))
    message = next(o.message for o in outcomes.values() if o.pod == "default/huge-0")
    assert message.endswith(
        "preemption: pod group default/huge does not fit even with every lower-priority pod preempted"
    )


async def test_two_gangs_preempting_at_once_both_bind_and_spare_each_other() -> None:
    s = sim_with(*full_cluster(2))
    gang(s, "a", 2, priority=100)
    gang(s, "b", 2, priority=100)
    gang(s, "c", 2, priority=100)  # no room left for it once a and b run: it must not evict them
    await s.run()
    placements = s.placements()
    assert all(placements[f"default/{g}-{i}"] for g in "ab" for i in range(2))
    assert not any(placements[f"default/c-{i}"] for i in range(2))
    victims = [v for p in s.preemption.preemptions for v in p.victims]
    assert sorted(victims) == sorted(f"default/low-{i}-{j}" for i in range(2) for j in range(2))


async def test_a_gang_is_evicted_whole_or_not_at_all() -> None:
    s = sim_with(
        make_node("n1", cpu="2"),
        make_node("n2", cpu="2"),
        make_pod_group("batch", min_member=2),
        running("m0", "n1", priority=0, pod_group="batch"),
        running("m1", "n2", priority=0, pod_group="batch"),
        running("s1", "n1", priority=5),
        running("s2", "n2", priority=5),
    )
    s.submit(make_pod("high", cpu="1", memory=None, priority=100))
    await s.run()
    (p,) = s.preemption.preemptions
    # one member would do, but the gang goes whole: both members, the single pods stay
    assert sorted(p.victims) == ["default/m0", "default/m1"]
    placements = s.placements()
    assert (placements["default/s1"], placements["default/s2"]) == ("n1", "n2")
    assert placements["default/high"] == p.node


def test_evaluate_says_what_would_be_preempted_and_changes_nothing() -> None:
    s = sim_with(make_node("n1", cpu="2"), running("low", "n1", priority=0, cpu="2"))
    high = PodInfo.from_dict(make_pod("high", cpu="2", memory=None, priority=1000))
    explanation = s.scheduler.explain(high)
    plugin = s.scheduler.profiles["gpu-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    verdict = plugin.evaluate(high, explanation.diagnosis)
    assert verdict.best is not None and verdict.best.node == "n1"
    assert [v.name for v in verdict.best.victims] == ["low"]
    assert s.preemption.preemptions == [] and s.scheduler.cache.nominator.node_of(high.uid) == ""


async def test_a_topology_constrained_gang_preempts_inside_one_domain() -> None:
    # rack ra: 3 nodes (1 free), rack rb: 5 nodes (2 free); low-priority pods fill the rest. Anywhere,
    # one victim would make room for 4 members; inside one rack (required), only rb can hold 4,
    # with 2 victims there, and nothing is evicted in ra.
    nodes = [make_node(f"ra-{i}", cpu="2", rack="ra") for i in range(3)]
    nodes += [make_node(f"rb-{i}", cpu="2", rack="rb") for i in range(5)]
    busy = ["ra-1", "ra-2", "rb-2", "rb-3", "rb-4"]
    s = sim_with(*nodes, *(running(f"low-{n}", n, priority=0, cpu="2") for n in busy))
    s.submit(
        make_pod_group(
            "train", min_member=4, annotations={"shoal.dev/topology-required": "topology.shoal.dev/rack"}
        )
    )
    for i in range(4):
        s.submit(make_pod(f"train-{i}", cpu="2", memory=None, priority=100, pod_group="train"))
    await s.run()
    victims = sorted(v for p in s.preemption.preemptions for v in p.victims)
    assert len(victims) == 2 and all(v.startswith("default/low-rb-") for v in victims)
    placements = s.placements()
    assert {placements[f"default/train-{i}"] for i in range(4)} <= {f"rb-{i}" for i in range(5)}
    assert placements["default/low-ra-1"] == "ra-1" and placements["default/low-ra-2"] == "ra-2"


async def test_a_gang_clears_the_sparse_nodes_not_the_crowded_ones() -> None:
    # 8 nodes hold one 2-cpu pod, 8 hold two; 8 whole-node members: the fewest victims are the 8
    # singles (a greedy reprieve in start order alone would evict the 16 pods of the crowded nodes)
    nodes = [make_node(f"g{i:02d}", cpu="4") for i in range(16)]
    low = [
        running(f"low-{i:02d}-{j}", f"g{i:02d}", priority=0, cpu="2")
        for i in range(16)
        for j in range(1 if i < 8 else 2)
    ]
    s = sim_with(*nodes, *low)
    gang(s, "gang", 8, priority=100, cpu="4")
    await s.run()
    victims = sorted(v for p in s.preemption.preemptions for v in p.victims)
    assert victims == [f"default/low-{i:02d}-0" for i in range(8)]
    assert all(s.placements()[f"default/gang-{i}"] for i in range(8))


class HeldExecutor:
    """A preemption executor whose API calls have not returned yet: ``finish`` returns them."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.calls: list[tuple[PodInfo, list[PodInfo], Callable[[bool], None]]] = []

    def preempt(
        self,
        preemptor: PodInfo,
        node: str,
        victims: Sequence[PodInfo],
        unnominate: Sequence[PodInfo],
        done: Callable[[bool], None],
    ) -> None:
        self.calls.append((preemptor, list(victims), done))

    def nominate(self, pod: PodInfo, node: str) -> None:
        pass

    def finish(self, ok: bool = True) -> None:
        for _, _, done in self.calls:
            done(ok)


async def test_a_preemptor_is_held_at_pre_enqueue_until_its_executor_is_done() -> None:
    """kube 1.37's PreEnqueue gate: a victim's deletion seen while the executor is still at work
    does not retry the preemptor; the executor's completion activates it, and it binds."""
    s = sim_with(make_node("n1", cpu="2"), running("low", "n1", priority=0, cpu="2"))
    held = HeldExecutor(s)
    s.scheduler.handle.extras[PREEMPTION_EXECUTOR] = held
    high = s.submit(make_pod("high", cpu="2", memory=None, priority=1000))
    uid = high["metadata"]["uid"]
    await s.run()
    ((preemptor, victims, _),) = held.calls
    assert (preemptor.key, [v.key for v in victims]) == ("default/high", ["default/low"])
    qpi = s.scheduler.queue.get(uid)
    assert qpi is not None and qpi.where == "unschedulable" and qpi.attempts == 1
    s.delete_pod(victims[0].uid)  # the victim's deletion is seen before the executor returns
    assert qpi.where == "gated"
    assert qpi.gate is not None and qpi.gate.reasons == (
        "waiting for the preemption for this pod to be finished",
    )
    await s.run()
    assert s.placements()["default/high"] is None and qpi.attempts == 1
    assert not any(e[1] == "NotReadyForScheduling" for e in s.reporter.events)  # no event for it
    held.finish()
    assert qpi.where in ("active", "backoff")
    await s.run()
    assert s.placements()["default/high"] == "n1"
    assert qpi.attempts == 2


async def preempting_two_victims() -> tuple[Simulation, HeldExecutor, QueuedPodInfo | None, list[PodInfo]]:
    """A 2-cpu pod preempting two 1-cpu pods on n1 through a held executor (calls not returned)."""
    s = sim_with(
        make_node("n1", cpu="2"),
        running("low-a", "n1", priority=0, cpu="1"),
        running("low-b", "n1", priority=0, cpu="1"),
    )
    held = HeldExecutor(s)
    s.scheduler.handle.extras[PREEMPTION_EXECUTOR] = held
    high = s.submit(make_pod("high", cpu="2", memory=None, priority=1000))
    qpi = s.scheduler.queue.get(high["metadata"]["uid"])
    await s.run()
    ((_, victims, _),) = held.calls
    return s, held, qpi, victims


async def test_an_executor_done_before_the_victims_deletion_is_seen_leaves_the_wakeup_to_it() -> None:
    """When the executor returns before the watch has reported any victim gone, the pod (still
    parked as unschedulable) is not retried: that could only fail and double its backoff. The
    victims' deletions wake it, and it binds at its second attempt."""
    s, held, qpi, victims = await preempting_two_victims()
    assert sorted(v.key for v in victims) == ["default/low-a", "default/low-b"]
    assert qpi is not None and qpi.where == "unschedulable"
    held.finish()  # both victims are still in the cache: no retry now
    await s.run()
    assert qpi.where == "unschedulable" and qpi.attempts == 1
    assert s.placements()["default/high"] is None
    for victim in victims:
        s.delete_pod(victim.uid)
    await s.run()
    assert s.placements()["default/high"] == "n1" and qpi.attempts == 2


async def test_a_pod_the_gate_held_stays_held_for_a_victim_still_cached_when_its_executor_is_done() -> None:
    """A victim's deletion seen while the executor is at work parks the pod behind the gate; when
    the executor is done the gate re-checks it and, a victim still being cached, holds it for that
    victim; the victim's deletion opens the gate and the pod binds at its second attempt."""
    s, held, qpi, victims = await preempting_two_victims()
    s.delete_pod(victims[0].uid)
    assert qpi is not None and qpi.where == "gated"
    held.finish()
    assert qpi.where == "gated"
    s.delete_pod(victims[1].uid)
    assert qpi.where in ("active", "backoff")
    await s.run()
    assert s.placements()["default/high"] == "n1" and qpi.attempts == 2


async def test_the_first_victims_deletion_does_not_retry_a_preemptor_whose_other_victims_remain() -> None:
    """After the executor is done, the deletion of one victim of two holds the preemptor at
    PreEnqueue instead of retrying it (an attempt that could only fail: a second
    FailedScheduling and a doubled backoff); the last deletion admits it."""
    s, held, qpi, victims = await preempting_two_victims()
    held.finish()
    assert qpi is not None and qpi.where == "unschedulable"
    s.delete_pod(victims[0].uid)
    assert qpi.where == "gated" and qpi.gate is not None
    assert qpi.gate.reasons == ("waiting for the preemption for this pod to be finished",)
    await s.run()
    assert qpi.attempts == 1 and s.placements()["default/high"] is None
    unschedulable = [e for e in s.reporter.events if e[0] == "default/high" and e[1] == "FailedScheduling"]
    s.delete_pod(victims[1].uid)
    await s.run()
    assert s.placements()["default/high"] == "n1" and qpi.attempts == 2
    after = [e for e in s.reporter.events if e[0] == "default/high" and e[1] == "FailedScheduling"]
    assert after == unschedulable  # no second FailedScheduling


async def test_the_hold_for_victims_lapses_so_a_stuck_victim_does_not_keep_the_preemptor_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A victim that never goes (say, terminating on a node that is gone) holds the preemptor for
    at most VICTIM_HOLD_SECONDS; then it is tried again, and fits on a node added meanwhile."""
    monkeypatch.setattr(defaultpreemption, "VICTIM_HOLD_SECONDS", 0.05)
    s, held, qpi, victims = await preempting_two_victims()
    held.finish()
    s.delete_pod(victims[0].uid)
    assert qpi is not None and qpi.where == "gated"
    s.submit(make_node("n2", cpu="2"))
    assert qpi.where == "gated"  # a node added does not open the gate; the hold's end does
    handle, activated = s.scheduler.handle, asyncio.Event()
    activate = handle.activate

    def observed(uids: Iterable[str]) -> None:
        activate(uids)
        activated.set()

    handle.activate = observed
    await asyncio.wait_for(activated.wait(), 5)  # the hold lapses on the loop's timer
    assert qpi.where in ("active", "backoff")
    await s.run()
    assert s.placements()["default/high"] == "n2"


def test_a_preemptor_is_forgotten_when_its_victims_are_gone() -> None:
    """Book-keeping for victims does not grow without bound: a preemptor whose victims are all gone
    leaves ``evicting`` when the plugin next looks (as the sweep of a new preemption does)."""
    s = sim_with(make_node("n1", cpu="2"))
    plugin = s.scheduler.profiles["gpu-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    plugin.evicting = {f"p{i}": {f"gone-{i}"} for i in range(64)}
    plugin._evicted_by = {f"gone-{i}": f"p{i}" for i in range(64)}
    assert not plugin.waiting_for_victims("p0")
    assert "p0" not in plugin.evicting and "gone-0" not in plugin._evicted_by
