from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shoal.core.framework.interfaces import ClusterEvent, EventKind, EventRegistration
from shoal.core.scheduling.queue import PreEnqueue, SchedulingQueue, SortKey
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from tests.unit.helpers import pod


class Profiles:
    """The queue's view of one profile "s" (the Scheduler answers these in the product)."""

    def __init__(self) -> None:
        self.hints: list[tuple[str, EventRegistration]] = []
        self.gate: PreEnqueue | None = None

    def sort_key_for(self, profile: str) -> SortKey | None:
        def key(p: PodInfo, t: float) -> tuple[Any, ...]:
            return (-p.priority, t)

        return key

    def pre_enqueue_for(self, profile: str) -> PreEnqueue | None:
        return self.gate

    def hints_for(self, profile: str) -> Sequence[tuple[str, EventRegistration]]:
        return self.hints


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    return SchedulingQueue(clock=clock, profiles=Profiles()), clock


def profiles_of(q: SchedulingQueue) -> Profiles:
    assert isinstance(q.profiles, Profiles)
    return q.profiles


def test_priority_then_fifo() -> None:
    q, clock = queue()
    q.add(pod("low"), "s")
    clock.t += 1
    q.add(pod("high", priority=100), "s")
    clock.t += 1
    q.add(pod("low2"), "s")
    order = [q.pop_nowait().pod.name for _ in range(3)]  # type: ignore[union-attr]
    assert order == ["high", "low", "low2"]
    assert q.pop_nowait() is None


def test_backoff_doubles_to_ten_seconds() -> None:
    q, clock = queue()
    q.add(pod("a"), "s")
    waits = []
    for _ in range(6):
        qpi = q.pop_nowait()
        assert qpi is not None
        q.requeue_backoff(qpi, "error")
        waits.append(qpi.backoff_until - clock.t)
        assert q.pop_nowait() is None  # still backing off
        clock.t = qpi.backoff_until
    assert waits == [1, 2, 4, 8, 10, 10]


def test_unschedulable_moves_back_on_relevant_event_only() -> None:
    q, clock = queue()
    profiles_of(q).hints = [("Fit", EventRegistration(EventKind.NODE_ADD))]
    q.add(pod("a"), "s")
    qpi = q.pop_nowait()
    assert qpi is not None
    q.requeue_unschedulable(qpi, {"Fit"}, "0/1 nodes are available")
    assert q.counts()["unschedulable"] == 1
    assert q.on_event(ClusterEvent(EventKind.POD_UPDATE)) == 0
    assert q.on_event(ClusterEvent(EventKind.NODE_ADD)) == 1
    clock.t += 1  # backoff of the first attempt
    assert q.pop_nowait() is qpi


def test_unschedulable_flushed_after_five_minutes() -> None:
    q, clock = queue()
    q.add(pod("a"), "s")
    qpi = q.pop_nowait()
    assert qpi is not None
    q.requeue_unschedulable(qpi, {"X"})
    clock.t += 299
    assert q.pop_nowait() is None
    clock.t += 1
    assert q.pop_nowait() is qpi


def test_pre_enqueue_gates_until_event() -> None:
    q, _ = queue()
    allowed = {"ok": False}

    def gate(p: PodInfo) -> Status:
        return Status() if allowed["ok"] else Status.unschedulable("wait", plugin="G")

    profiles_of(q).hints = [("G", EventRegistration(EventKind.POD_ADD))]
    profiles_of(q).gate = gate
    q.add(pod("a"), "s")
    assert q.counts()["gated"] == 1 and q.pop_nowait() is None
    allowed["ok"] = True
    q.on_event(ClusterEvent(EventKind.POD_ADD))
    assert q.pop_nowait() is not None


def test_pop_group_takes_members_from_everywhere() -> None:
    q, _clock = queue()
    members = [pod(f"m{i}", pod_group="g") for i in range(3)]
    for m in members:
        q.add(m, "s")
    q.add(pod("other"), "s")
    first = q.pop_nowait()
    assert first is not None and first.pod.pod_group == "g"
    second = q.pop_nowait()
    assert second is not None
    q.requeue_unschedulable(second, {"X"})
    rest = q.pop_group("default/g", exclude=first.uid)
    assert {r.pod.name for r in rest} == {m.name for m in members} - {first.pod.name}
    assert q.pop_nowait().pod.name == "other"  # type: ignore[union-attr]


def test_delete_removes_everywhere() -> None:
    q, _ = queue()
    q.add(pod("a"), "s")
    q.delete("uid-a")
    assert q.pop_nowait() is None and len(q) == 0
    assert sum(q.counts().values()) == 0


def test_an_event_asks_only_the_pods_its_targets_name_and_those_parked_without_a_plugin() -> None:
    """A registration with ``targets`` (a pod's own update, a claim made for one pod) is asked only
    about those pods; the rest of the parked pods are not even looked at (thousands of parked pods
    times thousands of events was quadratic), and pods move in the order they were parked."""
    q, _ = queue()
    asked: list[str] = []

    def hint(p: PodInfo, event: ClusterEvent) -> bool:
        asked.append(p.name)
        return True

    def only(event: ClusterEvent) -> tuple[str, ...]:
        return tuple(event.obj)

    profiles_of(q).hints = [
        ("Own", EventRegistration(EventKind.POD_UPDATE, hint, only)),
        ("Any", EventRegistration(EventKind.NODE_ADD, hint)),
    ]
    parked = {}
    for name, plugins in (("a", {"Own"}), ("b", {"Own"}), ("c", {"Any"}), ("d", set()), ("e", {"Own"})):
        q.add(pod(name), "s")
        qpi = q.pop_nowait()
        assert qpi is not None
        q.requeue_unschedulable(qpi, plugins)
        parked[name] = qpi
    uid = {name: qpi.uid for name, qpi in parked.items()}

    assert q.on_event(ClusterEvent(EventKind.POD_UPDATE, (uid["e"], uid["a"]))) == 3  # a, e and d
    assert asked == ["a", "e"]  # d has no plugin to ask; b and c were not looked at
    assert [parked[n].where for n in "abcde"] == [
        "backoff",
        "unschedulable",
        "unschedulable",
        "backoff",
        "backoff",
    ]

    asked.clear()
    assert q.on_event(ClusterEvent(EventKind.NODE_ADD)) == 1
    assert asked == ["c"]
    assert q.on_event(ClusterEvent(EventKind.POD_UPDATE, ())) == 0  # no target, nobody


def test_an_event_runs_pre_enqueue_again_before_moving_a_parked_pod() -> None:
    """As kube's move to the active queue: a parked pod an event helps is gated if a PreEnqueue
    plugin now says no, and is not tried (no attempt, no backoff doubling) until admitted."""
    q, clock = queue()
    profiles_of(q).hints = [("Fit", EventRegistration(EventKind.POD_DELETE))]
    q.add(pod("a"), "s")
    qpi = q.pop_nowait()
    assert qpi is not None
    q.requeue_unschedulable(qpi, {"Fit"}, "0/1 nodes are available")
    holding = {"on": True}
    profiles_of(q).gate = lambda p: Status.unschedulable("busy", plugin="H") if holding["on"] else Status()
    assert q.on_event(ClusterEvent(EventKind.POD_DELETE)) == 0  # moved, but to the gate
    assert qpi.where == "gated" and qpi.gate is not None and qpi.gate.plugin == "H"
    clock.t += 5
    assert q.pop_nowait() is None
    holding["on"] = False
    q.activate(["nobody", qpi.uid])
    assert q.pop_nowait() is qpi
    assert qpi.attempts == 2


def test_activate_leaves_active_and_in_flight_pods_alone() -> None:
    q, _ = queue()
    q.add(pod("a"), "s")
    q.add(pod("b"), "s")
    first = q.pop_nowait()
    assert first is not None
    q.activate([first.uid])
    assert first.where == "inFlight"
    second = q.pop_nowait()
    assert second is not None and second is not first
    assert q.pop_nowait() is None
