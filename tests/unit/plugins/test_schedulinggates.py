"""SchedulingGates: gated pods wait before the queue and enter it when their last gate is lifted."""

from __future__ import annotations

import asyncio
import copy

from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code
from shoal.plugins.schedulinggates import NAME, SchedulingGates
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import pod


def gated(name: str, *gates: str) -> dict[str, object]:
    obj = make_pod(name, cpu="1", scheduler_name="gpu-scheduler")
    obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return obj


def test_no_gates_is_success() -> None:
    assert SchedulingGates().pre_enqueue(pod("free")).ok


def test_gates_are_unresolvable_with_kube_schedulers_wording() -> None:

    status = SchedulingGates().pre_enqueue(
        PodInfo.from_dict(gated("g", "example.com/foo", "example.com/bar"))
    )
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == NAME
    assert status.message == "waiting for scheduling gates: [example.com/foo example.com/bar]"


def test_only_the_pods_own_update_is_a_hint() -> None:

    (reg,) = SchedulingGates().events_to_register()
    mine = PodInfo.from_dict(gated("g", "x"))
    other = PodInfo.from_dict(make_pod("other"))
    assert reg.kind == EventKind.POD_UPDATE and reg.hint is not None
    assert reg.hint(mine, ClusterEvent(EventKind.POD_UPDATE, mine))
    assert not reg.hint(mine, ClusterEvent(EventKind.POD_UPDATE, other))


def test_a_gated_pod_is_never_bound_and_is_placed_once_ungated() -> None:
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster)
    stored = sim.submit(gated("kueue-pod", "kueue.x-k8s.io/admission"))
    outcomes = asyncio.run(sim.run())
    (outcome,) = outcomes.values()
    assert outcome.node is None
    assert "held before the queue (SchedulingGates)" in outcome.message
    assert "kueue.x-k8s.io/admission" in outcome.message
    assert not stored["spec"].get("nodeName")
    # Kueue admits the workload: the gate is removed by an update of the pod
    ungated = copy.deepcopy(stored)
    ungated["spec"]["schedulingGates"] = []
    cluster.pods[stored["metadata"]["uid"]] = ungated
    sim.scheduler.on_pod(PodInfo.from_dict(ungated))
    asyncio.run(sim.run())
    assert ungated["spec"]["nodeName"] == "n1"
