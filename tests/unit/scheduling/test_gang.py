"""Gang scheduling: all or nothing, no deadlock, no starvation."""

from __future__ import annotations

from typing import Any

from shoal.core.framework.profile import PluginEntry
from shoal.core.state.status import Status
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.unit.scheduling.test_scheduler import approval_profile, approval_registry


def sim(objects: list[dict[str, Any]], **kwargs: Any) -> Simulation:
    kwargs.setdefault("initial_backoff", 0.01)
    kwargs.setdefault("max_backoff", 0.05)
    return Simulation(InMemoryCluster(objects), kwargs.pop("profiles", []), **kwargs)


def gang(
    name: str, members: int, min_member: int | None = None, gpus: int = 8, **pg: Any
) -> list[dict[str, Any]]:
    return [make_pod_group(name, min_member=min_member or members, **pg)] + [
        make_pod(f"{name}-{i}", gpus=gpus, pod_group=name) for i in range(members)
    ]


def bound(s: Simulation, prefix: str) -> int:
    return sum(1 for k, v in s.placements().items() if k.startswith(f"default/{prefix}") and v)


def gpus_requested(s: Simulation) -> int:
    table = s.scheduler.cache.table
    return int(table.requested[table.resource_row("nvidia.com/gpu"), : table.n].sum())


async def test_whole_gang_binds() -> None:
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(8)], *gang("train", 8)])
    await s.run()
    assert bound(s, "train") == 8
    assert len({v for v in s.placements().values()}) == 8


async def test_quorum_of_pods_gates_the_gang() -> None:
    objs = gang("train", 3, min_member=4)
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(4)], *objs])
    await s.run()
    assert bound(s, "train") == 0
    assert s.scheduler.queue.counts()["gated"] == 3
    s.submit(make_pod("train-3", gpus=8, pod_group="train"))
    await s.run()
    assert bound(s, "train") == 4


async def test_gang_that_never_fits_holds_nothing_and_small_pods_still_run() -> None:
    s = sim(
        [
            *[make_node(f"n{i}", gpus=8) for i in range(4)],
            *gang("huge", 6),
            *[make_pod(f"small-{i}", gpus=1) for i in range(5)],
        ]
    )
    outcomes = await s.run()
    assert bound(s, "huge") == 0
    assert bound(s, "small") == 5
    assert gpus_requested(s) == 5  # only the small pods hold GPUs
    msg = next(o.message for o in outcomes.values() if o.pod.startswith("default/huge"))
    assert "pod group default/huge: only 4 of the 6 pending member(s) it needs fit" in msg
    assert "nothing was reserved" in msg


async def test_two_gangs_of_60_percent_finish_one_after_the_other() -> None:
    nodes = [make_node(f"n{i}", gpus=8) for i in range(10)]
    s = sim([*nodes, *gang("a", 6), *gang("b", 6)])
    await s.run()
    first, second = ("a", "b") if bound(s, "a") else ("b", "a")
    assert bound(s, first) == 6 and bound(s, second) == 0
    assert gpus_requested(s) == 48  # the waiting gang holds nothing: no deadlock
    for uid, pod in list(s.cluster.pods.items()):  # the first job finishes
        if pod["metadata"]["name"].startswith(first + "-"):
            s.delete_pod(uid)
    await s.run(settle=0.05)
    assert bound(s, second) == 6


async def test_small_pods_arriving_while_gang_cannot_fit_are_scheduled() -> None:
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(2)], *gang("big", 3)])
    await s.run()
    for i in range(10):
        s.submit(make_pod(f"small-{i}", gpus=1))
    await s.run()
    assert bound(s, "small") == 10 and bound(s, "big") == 0


async def test_member_beyond_quorum_that_does_not_fit_is_retried_alone() -> None:
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(3)], *gang("elastic", 4, min_member=3)])
    await s.run()
    assert bound(s, "elastic") == 3


async def test_gate_timeout_releases_every_member() -> None:
    s = sim(
        [*[make_node(f"n{i}", gpus=8) for i in range(4)], *gang("g", 4, schedule_timeout_seconds=5)],
        profiles=[approval_profile()],
        registry=approval_registry(),
    )
    await s.run()
    assert bound(s, "g") == 0
    assert gpus_requested(s) == 0
    assert len(s.scheduler.waiting) == 0
    messages = [e[2] for e in s.reporter.events]
    assert any("rejected due to timeout" in m or "releasing the gang" in m for m in messages)


async def test_member_binding_failure_is_retried_and_gang_completes() -> None:
    from shoal.core.state.status import Status

    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(4)], *gang("g", 4)])
    victim = next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == "g-2")
    s.binder.fail[victim] = Status.error("transient")
    await s.run()
    assert bound(s, "g") == 4


async def test_min_resources_beyond_the_cluster_fails_fast_with_the_reason() -> None:
    # 2 members x 4 GPUs would fit, but the PodGroup declares it needs 32 GPUs in all
    objs = gang("greedy", 2, gpus=4)
    objs[0]["spec"]["minResources"] = {"nvidia.com/gpu": "32"}
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(2)], *objs])
    outcomes = await s.run()
    assert bound(s, "greedy") == 0
    assert gpus_requested(s) == 0  # nothing held
    messages = {o.message for o in outcomes.values()}
    assert any(
        "minResources needs 32 more nvidia.com/gpu, the schedulable nodes have 16 free" in m for m in messages
    )


class Forgetful:
    """A Reserve plugin with a bug: it forgets ``return SUCCESS`` for every member but the first."""

    name = "Forgetful"

    def __init__(self) -> None:
        self.calls = 0

    def reserve(self, state: Any, pod: Any, node: str) -> Any:
        self.calls += 1
        return Status() if self.calls == 1 else None

    def unreserve(self, state: Any, pod: Any, node: str) -> None:
        pass


async def test_a_plugin_bug_inside_a_gang_releases_everything_and_backs_off() -> None:
    plugin = Forgetful()
    registry = load_registry(
        third_party=False, extra=[PluginEntry("Forgetful", lambda a, h: plugin, None, Forgetful)]
    )
    profile = {**DEFAULT_PROFILE_SPEC, "plugins": {"reserve": [{"name": "Forgetful"}]}}
    s = sim(
        [*[make_node(f"n{i}", gpus=8) for i in range(3)], *gang("g", 3)],
        profiles=[profile],
        registry=registry,
    )
    outcomes = await s.run()
    assert bound(s, "g") == 0 and gpus_requested(s) == 0  # nothing assumed is left behind
    assert not any(s.scheduler.cache.is_assumed(uid) for uid in s.cluster.pods)
    assert len(s.scheduler.queue.pods_in("backoff")) == 3  # errors back off; none parked or lost
    assert all("running Forgetful: returned None instead of a Status" in o.message for o in outcomes.values())


async def test_a_cycle_that_raises_after_assuming_gives_everything_back() -> None:
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(3)], *gang("g", 3)])
    sched = s.scheduler
    fw = sched.profiles["gpu-scheduler"]
    real = fw.run_permit
    calls: list[str] = []

    def permit_breaks_on_the_second_member(state: Any, pod: Any, node: str) -> Any:
        calls.append(pod.name)
        if len(calls) == 2:
            raise RuntimeError("framework bug")
        return real(state, pod, node)

    fw.run_permit = permit_breaks_on_the_second_member  # type: ignore[method-assign]
    qpi = sched.queue.pop_nowait()
    assert qpi is not None
    sched._schedule_guarded(qpi)
    assert len(calls) == 2  # the first member was assumed and waiting at its gate when it broke
    assert gpus_requested(s) == 0
    assert not any(sched.cache.is_assumed(uid) for uid in s.cluster.pods)
    assert len(sched.waiting) == 0
    assert len(sched.queue.pods_in("backoff")) == 3  # the whole gang, popped together, is back
    fw.run_permit = real  # type: ignore[method-assign]
    await s.run()
    assert bound(s, "g") == 3


async def test_a_gang_refused_for_min_resources_is_retried_when_a_node_is_added() -> None:
    objs = gang("greedy", 2, gpus=4)
    objs[0]["spec"]["minResources"] = {"nvidia.com/gpu": "16"}
    s = sim([make_node("n0", gpus=8), *objs])
    await s.run()
    assert bound(s, "greedy") == 0
    assert len(s.scheduler.queue.pods_in("unschedulable")) == 2
    s.submit(make_node("n1", gpus=8))  # now 16 GPUs are free: no 5-minute wait
    await s.run()
    assert bound(s, "greedy") == 2


def _count_places(s: Simulation) -> list[str]:
    """The pods each placement attempt was for (the cycles' ``place``, wrapped)."""
    tried: list[str] = []
    place = s.scheduler.cycles.place

    def counting(fw: Any, state: Any, pod: Any, **kw: Any) -> Any:
        tried.append(pod.name)
        return place(fw, state, pod, **kw)

    s.scheduler.cycles.place = counting  # type: ignore[method-assign]
    return tried


async def test_placement_feasible_ends_a_trial_once_the_quorum_is_out_of_reach() -> None:
    """Room for 4 of a gang of 8: Coscheduling at PlacementFeasible stops after the first member
    that does not fit (4 placed + 3 left < 8) instead of trying the last three against every node;
    a profile without it tries all eight. Nothing binds either way."""
    objs = [*[make_node(f"n{i}", gpus=8) for i in range(4)], *gang("big", 8)]
    s = sim(objs)
    tried = _count_places(s)
    outcomes = await s.run()
    assert bound(s, "big") == 0
    first_cycle = tried[: tried.index("big-0", 1)] if tried.count("big-0") > 1 else tried
    assert len(first_cycle) == 5
    message = next(o.message for o in outcomes.values() if o.pod == "default/big-7")
    assert (
        "3 member(s) not tried: minMember 8 is out of reach in this placement (4 placed, 1 fit nowhere)"
        in message
    )
    assert "only 4 of the 8 pending member(s) it needs fit" in message

    spec = {**DEFAULT_PROFILE_SPEC, "plugins": {"placementFeasible": []}}
    s = sim(objs, profiles=[spec])
    tried = _count_places(s)
    await s.run()
    first_cycle = tried[: tried.index("big-0", 1)] if tried.count("big-0") > 1 else tried
    assert bound(s, "big") == 0 and len(first_cycle) == 8
