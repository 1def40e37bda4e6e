"""The Cycle: what one scheduling cycle assumed is either handed to binding or given back."""

from __future__ import annotations

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.queue import QueuedPodInfo
from shoal.core.scheduling.schedule_one import Cycle
from shoal.core.state.status import Status
from tests.unit.framework.test_runtime import CALLS, Recorder, build
from tests.unit.helpers import pod


def setup(**behaviour: object) -> tuple[Framework, Cycle, list[QueuedPodInfo]]:
    a = Recorder("A", **behaviour)
    fw = build({"reserve": [{"name": "A"}], "permit": [{"name": "A"}]}, [a])
    pods = [QueuedPodInfo(pod(f"m{i}"), fw.name, 0.0) for i in range(3)]
    for q in pods:
        fw.handle.cache.upsert_pod(q.pod)
    cycle = Cycle(fw, fw.handle.cache, fw.handle.waiting, pods[0])
    cycle.add_members(pods[1:])
    return fw, cycle, pods


async def test_assume_reserves_and_permits_and_release_undoes_it_all() -> None:
    fw, cycle, pods = setup(permit=Status.wait(), timeout=5.0)
    assumed, status = cycle.assume(fw, pods[0], CycleState(), "n0")
    assert status.is_wait and assumed.reserved and assumed.gate is not None
    assert fw.handle.cache.is_assumed("uid-m0") and fw.handle.waiting.get("uid-m0") is assumed.gate
    cycle.release(fw, assumed)
    assert not fw.handle.cache.is_assumed("uid-m0") and fw.handle.waiting.get("uid-m0") is None
    assert assumed.gate.rejected and cycle.assumed == []
    assert CALLS == ["A.reserve", "A.permit", "A.unreserve"]


def test_a_failed_reserve_is_not_unreserved_twice_on_release() -> None:
    fw, cycle, pods = setup(reserve=Status.unschedulable("full"))
    assumed, status = cycle.assume(fw, pods[0], CycleState(), "n0")
    assert status.plugin == "A" and not assumed.reserved and assumed.gate is None
    cycle.release(fw, assumed)
    assert CALLS == ["A.reserve", "A.unreserve"]  # by run_reserve, once
    assert not fw.handle.cache.is_assumed("uid-m0")


def test_handed_over_pods_survive_a_rollback_and_the_others_are_requeued() -> None:
    fw, cycle, pods = setup()
    binding, _ = cycle.assume(fw, pods[0], CycleState(), "n0")
    cycle.hand_over(binding)  # a binding task owns it now
    cycle.assume(fw, pods[1], CycleState(), "n1")
    cycle.assume(fw, pods[2], CycleState(), "n2")
    CALLS.clear()
    fw.handle.cache.remove_pod("uid-m2")  # deleted meanwhile: nothing to requeue
    requeue = cycle.rollback()
    assert [q.uid for q in requeue] == ["uid-m1"]
    assert fw.handle.cache.is_assumed("uid-m0") and not fw.handle.cache.is_assumed("uid-m1")
    assert cycle.assumed == []
    assert CALLS == ["A.unreserve", "A.unreserve"]  # m2 then m1: reverse order
