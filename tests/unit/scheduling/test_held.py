"""Pods held before the queue (issue 16 part 6): which PreEnqueue rejections are reported, under
which reason, and how often (``HeldPacer``), without a server."""

from __future__ import annotations

from typing import Any

from shoal.core.scheduling.reporting import HeldPacer, held_reason
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.unit.helpers import pod


def test_reasons_by_plugin_and_code() -> None:
    fw = Simulation(InMemoryCluster([])).scheduler.profiles["gpu-scheduler"]
    gang = fw.plugins["Coscheduling"]
    waiting = Status(Code.UNSCHEDULABLE, ("pod group default/g has 1 of the 3 pods",), "Coscheduling")
    assert held_reason(gang, waiting) == "WaitingForGang"
    missing = Status.unschedulable("PodGroup default/g not found", plugin="Coscheduling", resolvable=False)
    assert held_reason(gang, missing) == "PodGroupMissing"
    gated = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("waiting for scheduling gates",), "SchedulingGates")
    # the API server's SchedulingGated condition says it
    assert held_reason(fw.plugins["SchedulingGates"], gated) is None
    assert held_reason(fw.plugins["DefaultPreemption"], gated) is None  # a moment's wait
    claim = Status.unschedulable("ResourceClaim not created yet", plugin="DynamicResources", resolvable=False)
    assert held_reason(fw.plugins["DynamicResources"], claim) == "NotReadyForScheduling"
    assert held_reason(None, claim) == "NotReadyForScheduling"


def test_pacer_waits_the_delay_then_reports_once() -> None:
    pacer, p = HeldPacer(delay=5, interval=600), pod("a")
    assert pacer.hold(p, "WaitingForGang", "has 1 of 3", "gpu", now=100) == 105
    assert pacer.due(p.uid, 101) == (None, 105)  # too soon: a burst may reach its quorum
    entry, again = pacer.due(p.uid, 105)
    assert entry is not None and (entry.reason, entry.message, again) == (
        "WaitingForGang",
        "has 1 of 3",
        None,
    )
    # re-evaluated with the same verdict: nothing more, ever
    pacer.hold(p, "WaitingForGang", "has 1 of 3", "gpu", now=106)
    assert pacer.due(p.uid, 106) == (None, None)
    assert pacer.due(p.uid, 10_000) == (None, None)


def test_pacer_bounds_a_changing_message_and_lets_a_new_reason_through() -> None:
    pacer, p = HeldPacer(delay=5, interval=600), pod("a")
    pacer.hold(p, "WaitingForGang", "has 1 of 3", "gpu", now=0)
    assert pacer.due(p.uid, 5)[0] is not None
    for t in range(6, 300):  # a member joins every second: no report per re-evaluation
        pacer.hold(p, "WaitingForGang", f"has 2 of 3 ({t})", "gpu", now=t)
        assert pacer.due(p.uid, t) == (None, 605)
    entry, _ = pacer.due(p.uid, 605)
    assert entry is not None and entry.message == "has 2 of 3 (299)"  # the latest, once
    pacer.hold(p, "PodGroupMissing", "PodGroup default/g not found", "gpu", now=606)
    assert pacer.due(p.uid, 606) == (None, 610)  # a new reason, no sooner than delay after the last
    entry, _ = pacer.due(p.uid, 610)
    assert entry is not None and entry.reason == "PodGroupMissing"
    pacer.release(p.uid)
    assert len(pacer) == 0 and pacer.due(p.uid, 700) == (None, None)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None:
        pass

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None:
        pass

    def held(self, pod: PodInfo, reason: str, message: str, profile: str) -> None:
        self.calls.append((pod.name, reason))

    def released(self, pod: PodInfo) -> None:
        self.calls.append((pod.name, "released"))


def _gated(name: str) -> dict[str, Any]:
    obj = make_pod(name, gpus=1)
    obj["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    return obj


def _sim(objects: list[dict[str, Any]]) -> tuple[Simulation, _Recorder]:
    s = Simulation(InMemoryCluster([]), [], initial_backoff=0.01, max_backoff=0.05)
    recorder = _Recorder()
    s.scheduler.reporter = recorder
    for obj in objects:
        s.submit(obj)
    return s, recorder


async def test_the_queue_reports_holds_and_releases() -> None:
    s, rec = _sim(
        [
            make_node("n0", gpus=8),
            make_node("n1", gpus=8),
            make_pod_group("g", min_member=2),
            make_pod("g-0", gpus=1, pod_group="g"),
            make_pod("orphan", gpus=1, pod_group="nowhere"),
            _gated("gated"),
        ]
    )
    await s.run()
    assert ("g-0", "WaitingForGang") in rec.calls
    assert ("orphan", "PodGroupMissing") in rec.calls
    assert not any(name == "gated" and reason != "released" for name, reason in rec.calls)
    rec.calls.clear()
    s.submit(make_pod("g-1", gpus=1, pod_group="g"))  # the quorum: both leave the gate
    await s.run()
    assert ("g-0", "released") in rec.calls
    assert s.placements()["default/g-0"] and s.placements()["default/g-1"]
