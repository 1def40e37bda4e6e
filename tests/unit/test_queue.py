from shoal.core.interfaces import ClusterEvent, EventKind, EventRegistration
from shoal.core.queue import SchedulingQueue
from shoal.core.status import Status
from tests.unit.helpers import pod


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def queue() -> tuple[SchedulingQueue, Clock]:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    q.sort_keys["s"] = lambda p, t: (-p.priority, t)
    return q, clock


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
    q.hints["s"] = [("Fit", EventRegistration(EventKind.NODE_ADD))]
    q.add(pod("a"), "s")
    qpi = q.pop_nowait()
    assert qpi is not None
    q.requeue_unschedulable(qpi, {"Fit"}, "0/1 nodes are available")
    assert q.counts()["unschedulable"] == 1
    assert q.on_event(ClusterEvent(EventKind.POD_UPDATE), lambda p: None) == 0
    assert q.on_event(ClusterEvent(EventKind.NODE_ADD), lambda p: None) == 1
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

    def gate(p):  # type: ignore[no-untyped-def]
        return Status() if allowed["ok"] else Status.unschedulable("wait", plugin="G")

    q.hints["s"] = [("G", EventRegistration(EventKind.POD_ADD))]
    q.add(pod("a"), "s", gate)
    assert q.counts()["gated"] == 1 and q.pop_nowait() is None
    allowed["ok"] = True
    q.on_event(ClusterEvent(EventKind.POD_ADD), lambda profile: gate)
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
