"""Operator lifecycle without a server: vital tasks, /livez, and a Lease campaign that never dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Status
from shoal.kube.informer import DELETED, LISTED
from shoal.kube.kinds import KIND_PODGROUPS
from shoal.kube.leader import LeaseElector
from shoal.operator_app.app import RunSettings, ShoalOperator
from shoal.operator_app.health import Health, run_vital, vital
from shoal.operator_app.leadership import Leadership
from shoal.operator_app.metrics import HealthServer, PromMetrics
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry
from shoal.testing.objects import make_node, make_pod, make_pod_group


async def _get(port: int, path: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status


async def test_a_vital_task_that_ends_fails_livez_and_gives_up_the_lease() -> None:
    health = Health()
    health.started = True
    server = HealthServer(PromMetrics(), health.ready, alive=health.alive, host="127.0.0.1", port=0)
    await server.start()
    election_cancelled = asyncio.Event()

    async def election() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            election_cancelled.set()  # stepping down releases the Lease for a healthy replica
            raise

    async def crash() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("loop bug")

    try:
        assert await _get(server.port, "/livez") == 200
        # run_vital returns once a vital task ended: the others are cancelled, health says why
        await asyncio.wait_for(run_vital(health, {"election": election(), "scheduling-loop": crash()}), 5)
        assert (
            health.broken is not None and "scheduling-loop" in health.broken and "loop bug" in health.broken
        )
        assert await _get(server.port, "/livez") == 503
        assert await _get(server.port, "/readyz") == 503
        assert await _get(server.port, "/healthz") == 200  # the process itself still answers
        assert election_cancelled.is_set()
    finally:
        await server.stop()


async def test_a_vital_task_that_returns_is_broken_too() -> None:
    health = Health()

    async def returns() -> None:
        return None

    await asyncio.wait_for(run_vital(health, {"podgroup-status": returns()}), 5)
    assert health.broken == "task podgroup-status ended"


async def test_tasks_cancelled_by_stop_do_not_count_as_broken() -> None:
    health = Health()
    task = asyncio.create_task(run_vital(health, {"podgroup-status": asyncio.sleep(3600)}))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert health.alive()


async def test_a_scheduling_loop_that_fails_ends_the_term_and_the_leadership() -> None:
    health = Health()
    sched = three_pending_pods(SlowBinder(0))

    async def broken_loop(batch_seconds: float = 0.005) -> None:
        raise RuntimeError("loop bug")

    sched.run = broken_loop  # type: ignore[method-assign]
    leadership = Leadership(sched, PromMetrics(), health)
    await asyncio.wait_for(run_vital(health, {"leadership": leadership.run()}), 5)
    assert health.broken is not None and "scheduling-loop" in health.broken
    assert not leadership.leading


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(aiohttp.ServerDisconnectedError(), id="server-disconnected"),
        pytest.param(aiohttp.ClientPayloadError("truncated"), id="payload-error"),
        pytest.param(ConnectionResetError(), id="connection-reset"),
        pytest.param(ValueError("not JSON"), id="bad-json"),
        pytest.param(None, id="hangs"),
    ],
)
async def test_a_failed_lease_call_counts_as_not_renewed(failure: BaseException | None) -> None:
    elector = LeaseElector(
        client.ApiClient(),
        namespace="ns",
        name="l",
        identity="me",
        lease_duration=3,
        renew_deadline=2,
        retry_period=1,
    )

    async def call(*args: Any, **kwargs: Any) -> Any:
        if failure is not None:
            raise failure
        await asyncio.sleep(3600)  # hangs: the call timeout cuts it short

    began = time.monotonic()
    assert await elector._call(call) == (0, {})
    assert time.monotonic() - began < elector.call_timeout + 1  # a hanging call is cut short
    api: Any = elector.api
    await api.api_client.close()


class HeldBinder:
    """Binds once the test releases it (an API server that takes as long as the test needs)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.bound: list[str] = []

    async def bind(self, pod: PodInfo, node: str) -> Status:
        await self.release.wait()
        self.bound.append(pod.name)
        return Status()


class SlowBinder:
    """Binds after ``seconds`` (an API server that takes its time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.bound: list[str] = []

    async def bind(self, pod: PodInfo, node: str) -> Status:
        await asyncio.sleep(self.seconds)
        self.bound.append(pod.name)
        return Status()


def three_pending_pods(binder: SlowBinder | HeldBinder) -> Scheduler:
    """A scheduler with the default profile, one node and three pods waiting for it."""
    sched = Scheduler(load_registry(third_party=False), binder, defaults=DEFAULT_PLUGINS)
    sched.set_profile(DEFAULT_PROFILE_SPEC)
    sched.on_node(NodeSpec.from_dict(make_node("n1")))
    for i in range(3):
        sched.on_pod(PodInfo.from_dict(make_pod(f"p{i}")))
    return sched


@pytest.mark.parametrize(
    ("lost", "bound", "requeued"),
    [
        pytest.param(True, 0, 3, id="lease-lost-cancels-and-requeues-at-once"),
        pytest.param(False, 3, 0, id="graceful-stop-lets-bindings-finish"),
    ],
)
async def test_stepping_down(lost: bool, bound: int, requeued: int) -> None:
    binder = HeldBinder()
    sched = three_pending_pods(binder)
    leadership = Leadership(sched, PromMetrics(), Health(), renew_deadline=5.0)
    await leadership.lead()
    for _ in range(2000):  # all three assumed and binding (held until released below)
        if sched.in_flight == 3:
            break
        await asyncio.sleep(0.005)
    assert sched.in_flight == 3
    if not lost:  # a graceful stop: the API server answers while the bindings drain
        binder.release.set()
    began = time.monotonic()
    await leadership.follow(lost)
    took = time.monotonic() - began
    assert len(binder.bound) == bound
    assert sched.in_flight == 0
    assert len(sched.queue.pods_in("backoff")) == requeued  # nothing lost: retried by whoever leads
    # lost: no binding finished (they were held), so they were cancelled at once; graceful: all
    # three finished, so the drain waited for them (no wall-clock bound beyond a generous one)
    assert took < 5.0
    if lost:  # reservations released (bound pods stay assumed until the watch confirms them)
        assert not any(sched.cache.is_assumed(f"default/p{i}") for i in range(3))


class RecordingWriter:
    """A StatusWriter that records what it is asked to write."""

    def __init__(self) -> None:
        self.written: list[tuple[str, dict[str, Any], str]] = []
        self.patches: list[str] = []
        self.during: Any = None

    async def write(self, path: str, status: Mapping[str, Any], what: str, *, patch: str = "") -> bool:
        self.written.append((path, dict(status), what))
        self.patches.append(patch)
        if self.during is not None:
            await self.during()
        return True


async def test_a_podgroup_deleted_mid_loop_does_not_break_the_status_loop() -> None:
    op = ShoalOperator(RunSettings(status_interval=0.01))
    writer = RecordingWriter()
    op.compose(Scheduler(load_registry(third_party=False), SlowBinder(0), defaults=DEFAULT_PLUGINS), writer)
    assert op.leadership is not None and op.podgroups is not None
    op.leadership.leading = True
    for name in ("a", "b"):
        await op.informer.deliver(KIND_PODGROUPS, LISTED, make_pod_group(name, min_member=1))

    async def delete_b() -> None:  # while group a's status is written, group b is deleted
        await op.informer.deliver(KIND_PODGROUPS, DELETED, make_pod_group("b", min_member=1))

    writer.during = delete_b
    task = asyncio.create_task(vital(op.health, "podgroup-status", op.podgroups.run()))
    await asyncio.sleep(0.2)
    try:
        assert not task.done() and op.health.broken is None
        assert [what for _, _, what in writer.written] == ["PodGroup default/a"]
        path, status, _ = writer.written[0]
        assert path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/a/status"
        assert status["phase"] == "Pending"
    finally:
        task.cancel()


class _Resp:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body

    async def json(self) -> dict[str, Any]:
        return self.body

    def release(self) -> None:
        pass


class SlowLeases:
    """Lease calls of an API server that turns slow: reads just inside the call timeout, then
    updates that never answer."""

    def __init__(self) -> None:
        self.rv, self.slow = 1, False
        self.spec: dict[str, Any] = {}

    async def read_namespaced_lease(self, name: str, ns: str, **_: Any) -> _Resp:
        if self.slow:
            await asyncio.sleep(0.9)
        meta = {"name": name, "namespace": ns, "resourceVersion": str(self.rv)}
        return _Resp(200, {"metadata": meta, "spec": dict(self.spec)})

    async def create_namespaced_lease(self, ns: str, body: dict[str, Any], **_: Any) -> _Resp:
        self.spec = body["spec"]
        return _Resp(201, body)

    async def replace_namespaced_lease(self, name: str, ns: str, body: dict[str, Any], **_: Any) -> _Resp:
        if self.slow:
            await asyncio.sleep(3600)
        self.rv += 1
        self.spec = body["spec"]
        return _Resp(200, body)


async def test_a_leader_steps_down_by_the_renew_deadline_even_when_calls_are_slow() -> None:
    api = client.ApiClient()
    elector = LeaseElector(
        api, namespace="ns", name="l", identity="me", lease_duration=3, renew_deadline=2, retry_period=0.5
    )
    leases = SlowLeases()
    elector.api = leases  # type: ignore[assignment]
    renewed_at: list[float] = []
    real = elector.try_acquire_or_renew

    async def tracked() -> bool:
        ok = await real()
        if ok:
            renewed_at.append(time.monotonic())
        return ok

    elector.try_acquire_or_renew = tracked  # type: ignore[method-assign]
    stepped_down = asyncio.get_running_loop().create_future()

    async def started() -> None:
        asyncio.get_running_loop().call_later(0.6, lambda: setattr(leases, "slow", True))

    async def stopped(lost: bool) -> None:
        stepped_down.set_result((lost, time.monotonic()))

    task = asyncio.create_task(elector.run(started, stopped))
    try:
        lost, when = await asyncio.wait_for(stepped_down, 10)
    finally:
        task.cancel()
        await api.close()
    assert lost
    # client-go's rule: never lead past renew_deadline after the last renewal (the lease is 3 s)
    assert when - renewed_at[-1] <= elector.renew_deadline + 0.3


async def test_a_graceful_drain_stops_when_the_lease_cannot_be_renewed() -> None:
    api = client.ApiClient()
    binder = SlowBinder(30)  # bindings that would outlast the Lease
    sched = three_pending_pods(binder)
    elector = LeaseElector(
        api, namespace="ns", name="l", identity="me", lease_duration=3, renew_deadline=2, retry_period=0.5
    )
    leases = SlowLeases()
    elector.api = leases  # type: ignore[assignment]
    leadership = Leadership(sched, PromMetrics(), Health(), elector=elector, renew_deadline=2)
    drained_at: list[float] = []

    async def follow(lost: bool) -> None:
        await leadership.follow(lost)
        drained_at.append(time.monotonic())

    campaign = asyncio.create_task(elector.run(leadership.lead, follow))
    try:
        for _ in range(100):
            if sched.in_flight == 3:
                break
            await asyncio.sleep(0.02)
        assert leadership.leading and sched.in_flight == 3
        leases.slow = True  # the API server turns slow: renewals fail from now on
        await asyncio.sleep(1.2)
        campaign.cancel()  # a graceful stop begins late in the renew deadline: drain, renewing meanwhile
        await asyncio.wait_for(asyncio.gather(campaign, return_exceptions=True), 10)
        # renewals failed, so the drain was cut at the renew deadline, not run to its 2 s grace + 30 s
        assert drained_at and drained_at[0] - elector.last_renew <= elector.renew_deadline + 0.5
        assert binder.bound == [] and sched.in_flight == 0
        assert len(sched.queue.pods_in("backoff")) == 3  # requeued for whoever leads next
    finally:
        campaign.cancel()
        await api.close()


async def test_a_follower_takes_a_lapsed_lease_at_once_but_never_before_it_lapses() -> None:
    api = client.ApiClient()
    elector = LeaseElector(
        api, namespace="ns", name="l", identity="me", lease_duration=3, renew_deadline=2.9, retry_period=2.8
    )
    leases = SlowLeases()
    # held by a leader that renewed once and then died (SIGKILL: no release)
    leases.spec = {
        "holderIdentity": "other",
        "leaseDurationSeconds": 3,
        "renewTime": "2026-11-30T10:00:00.000000Z",
    }
    elector.api = leases  # type: ignore[assignment]
    led = asyncio.get_running_loop().create_future()

    async def started() -> None:
        led.set_result((time.monotonic(), leases.spec["holderIdentity"]))

    async def stopped(lost: bool) -> None:
        pass

    began = time.monotonic()  # the first poll observes the renewal now
    task = asyncio.create_task(elector.run(started, stopped))
    try:
        at, holder = await asyncio.wait_for(led, 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    took = at - began
    assert holder == "me"
    # safety: not before the 3 s lease lapsed as observed here; speed: polled right at that moment
    # instead of at the next 2.8 s retry (5.6 s)
    assert 3.0 <= took < 4.5, took
