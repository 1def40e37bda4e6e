import asyncio

import pytest
from pydantic import ValidationError

from shoal.core.framework.gates import PermitGate
from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins import coscheduling
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_native_pod_group, make_node, make_pod, make_pod_group
from tests.unit.helpers import cache_with, handle_for, pod, state


def setup(min_member: int = 3, members: int = 3, timeout: int | None = None):  # type: ignore[no-untyped-def]
    cache = cache_with([make_node("n", gpus=8)])
    cache.set_pod_group(
        PodGroupInfo.from_dict(make_pod_group("g", min_member=min_member, schedule_timeout_seconds=timeout))
    )
    pods = [pod(f"m{i}", pod_group="g", gpus=1) for i in range(members)]
    for p in pods:
        cache.upsert_pod(p)
    handle = handle_for(cache)
    return cache, handle, coscheduling.new(coscheduling.Args(), handle), pods


@pytest.mark.parametrize(
    ("members", "group_exists", "code"),
    [
        pytest.param(3, True, Code.SUCCESS, id="quorum-of-pods"),
        pytest.param(2, True, Code.UNSCHEDULABLE, id="below-quorum-gated"),
        pytest.param(3, False, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, id="podgroup-missing"),
    ],
)
def test_pre_enqueue(members: int, group_exists: bool, code: Code) -> None:
    cache, _, plugin, pods = setup(members=members)
    if not group_exists:
        cache.remove_pod_group("default/g")
    assert plugin.pre_enqueue(pods[0]).code is code
    assert plugin.pre_filter(state(), pods[0])[1].code is code


def test_pod_without_group_is_untouched() -> None:
    _, _, plugin, _ = setup()
    loner = pod("loner")
    assert plugin.pre_enqueue(loner).ok
    status, timeout = plugin.permit(state(), loner, "n")
    assert status.ok and timeout == 0.0
    assert plugin.pod_group(loner) is None


async def test_permit_waits_until_quorum_then_opens_all_gates() -> None:
    cache, handle, plugin, pods = setup(min_member=3, timeout=30)
    gates = []
    for p in pods[:2]:
        cache.assume(p, "n")
        status, timeout = plugin.permit(state(), p, "n")
        assert status.code is Code.WAIT and timeout == 30
        gate = PermitGate(p, "n", {coscheduling.NAME: timeout})
        handle.waiting.add(gate)
        gates.append(gate)
    cache.assume(pods[2], "n")
    status, _ = plugin.permit(state(), pods[2], "n")
    assert status.ok
    results = await asyncio.gather(*(g.wait() for g in gates))
    assert all(r.allowed for r in results)


async def test_unreserve_rejects_every_waiting_member() -> None:
    cache, handle, plugin, pods = setup(min_member=3)
    gates = []
    for p in pods[:2]:
        cache.assume(p, "n")
        _status, timeout = plugin.permit(state(), p, "n")
        gate = PermitGate(p, "n", {coscheduling.NAME: timeout})
        handle.waiting.add(gate)
        gates.append(gate)
    plugin.unreserve(state(), pods[2], "n")
    results = await asyncio.gather(*(g.wait() for g in gates))
    assert not any(r.allowed for r in results)
    assert "releasing the gang" in results[0].status.message


def test_default_timeout_is_60_seconds() -> None:
    cache, _, plugin, pods = setup()
    cache.assume(pods[0], "n")
    assert plugin.permit(state(), pods[0], "n")[1] == 60.0


def test_zero_timeout_means_the_default_as_kubeflow_trainer_writes_it() -> None:
    """Trainer copies its runtime's ``scheduleTimeoutSeconds: 0`` ("0 means default") verbatim."""
    cache, _, plugin, pods = setup(timeout=0)
    cache.assume(pods[0], "n")
    status, timeout = plugin.permit(state(), pods[0], "n")
    assert status.code is Code.WAIT and timeout == 60.0


def test_bad_args() -> None:
    with pytest.raises(ValidationError):
        coscheduling.Args.model_validate({"defaultScheduleTimeoutSeconds": 0})
    with pytest.raises(ValidationError):
        coscheduling.Args.model_validate({"defaultScheduleTimeoutSeconds": 901})


def test_quorum_rule() -> None:
    assert coscheduling.quorum_reached(3, 3)
    assert not coscheduling.quorum_reached(2, 3)


async def test_schedule_timeout_of_the_podgroup_expires_the_gate() -> None:
    # scheduleTimeoutSeconds: 1 on the PodGroup; the quorum (3) never arrives
    cache, handle, plugin, pods = setup(timeout=1)
    cache.assume(pods[0], "n")
    status, timeout = plugin.permit(state(), pods[0], "n")
    assert status.is_wait and timeout == 1.0
    gate = PermitGate(pods[0], "n", {coscheduling.NAME: timeout})
    handle.waiting.add(gate)
    result = await asyncio.wait_for(gate.wait(), 5)
    assert not result.allowed
    assert 0.9 <= result.waited < 3
    assert "timeout" in result.status.message and coscheduling.NAME in result.status.message


@pytest.mark.parametrize(
    ("nodes", "min_resources", "placed_first", "short"),
    [
        pytest.param(1, {"nvidia.com/gpu": "16"}, False, "needs 16 more nvidia.com/gpu", id="gpus-short"),
        pytest.param(2, {"nvidia.com/gpu": "16"}, False, "", id="gpus-enough"),
        pytest.param(1, {"nvidia.com/gpu": "16", "cpu": "100"}, False, "more cpu", id="cpu-short-named"),
        pytest.param(1, {"nvidia.com/gpu": "8"}, True, "", id="placed-member-counts-toward-it"),
        pytest.param(1, {}, False, "", id="no-min-resources"),
    ],
)
def test_min_resources_checked_at_prefilter(
    nodes: int, min_resources: dict[str, str], placed_first: bool, short: str
) -> None:
    cache = cache_with([make_node(f"n{i}", cpu="64", gpus=8) for i in range(nodes)])
    pg = make_pod_group("g", min_member=2)
    pg["spec"]["minResources"] = min_resources
    cache.set_pod_group(PodGroupInfo.from_dict(pg))
    members = [pod(f"m{i}", pod_group="g", gpus=4) for i in range(2)]
    for m in members:
        cache.upsert_pod(m)
    if placed_first:  # 4 GPUs held by a placed member: 4 more are needed, and the node has 4 left
        cache.assume(members[0], "n0")
        cache.assume(pod("other", gpus=0, cpu="1"), "n0")
    plugin = coscheduling.new(coscheduling.Args(), handle_for(cache))
    _, status = plugin.pre_filter(state(), members[1])
    if short:
        assert status.code is Code.UNSCHEDULABLE and short in status.message, status.message
    else:
        assert status.ok, status.message


def test_a_members_arrival_concerns_its_own_gang_and_only_once_it_is_whole() -> None:
    """POD_ADD asks only the arriving member's gang, and says yes only once the gang has the
    members its PreEnqueue waits for."""
    cache, _, plugin, pods = setup(min_member=3, members=2)
    cache.set_pod_group(PodGroupInfo.from_dict(make_pod_group("other", min_member=2)))
    stranger = pod("s0", pod_group="other", gpus=1)
    cache.upsert_pod(stranger)
    (add, *_) = (r for r in plugin.events_to_register() if r.kind & EventKind.POD_ADD)
    assert add.hint is not None and add.targets is not None
    arrival = ClusterEvent(EventKind.POD_ADD, pods[1])
    assert set(add.targets(arrival)) == {p.uid for p in pods}  # not the other gang's member
    assert not add.hint(pods[0], arrival)  # 2 of 3: the gang is still short
    third = pod("m2", pod_group="g", gpus=1)
    cache.upsert_pod(third)
    assert add.hint(pods[0], ClusterEvent(EventKind.POD_ADD, third))  # whole: release it
    assert not add.hint(stranger, ClusterEvent(EventKind.POD_ADD, third))  # another gang


async def test_a_gang_of_hundreds_arriving_one_by_one_costs_preenqueue_calls_in_proportion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each arrival used to re-run PreEnqueue for every gated member, each counting the gang
    (cubic in the gang's size: a gang of 1,000 kept shoal from starting for a minute)."""
    members = 400
    calls = 0
    original = coscheduling.Coscheduling.pre_enqueue

    def counted(self: coscheduling.Coscheduling, p: PodInfo) -> Status:
        nonlocal calls
        calls += 1
        return original(self, p)

    monkeypatch.setattr(coscheduling.Coscheduling, "pre_enqueue", counted)
    gang = [make_native_pod_group("big", min_count=members)] + [
        make_pod(f"big-{i}", cpu="100m", scheduling_group="big") for i in range(members)
    ]
    s = Simulation(InMemoryCluster([make_node("n0", cpu="64", pods=500), *gang]), [])
    await s.run()
    assert sum(1 for v in s.placements().values() if v) == members
    assert calls <= 3 * members
