"""Faults: a killed operator, a restarted API server, an expired watch, a rival binder, a node or
a pod deleted at the wrong moment, a leader killed during a burst."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from shoal.kube.binder import post_binding
from shoal.kube.rest import RawClient
from shoal.testing.cluster import OperatorProcess, apply_crds, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.integration.conftest import wait_ready
from tests.reliability.conftest import assert_invariants, operator, placements, profile, record, slow_bind


async def test_operator_killed_mid_gang_then_restarted(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(8)])
    await create(api, slow_bind(sched, seconds=3.0, spread=True))
    await create(api, make_pod_group("train", namespace=namespace, min_member=8))
    first = operator(crds, tmp_path / "first.log", identity="first")
    with first:
        wait_ready(first)
        await create_many(
            api,
            [
                make_pod(f"train-{i}", namespace=namespace, gpus=8, scheduler_name=sched, pod_group="train")
                for i in range(8)
            ],
        )

        async def some_bound() -> bool:
            return any((await placements(api, namespace)).values())

        await wait_for(some_bound, 30, interval=0.05, what="the first member bound")
        first.kill()  # SIGKILL: no clean-up, no lease release
    partly = sum(1 for v in (await placements(api, namespace)).values() if v)
    assert 0 < partly < 8, f"{partly} members bound when the operator died"
    second = operator(
        crds,
        tmp_path / "second.log",
        identity="second",
        lease_name=first.argv[first.argv.index("--lease-name") + 1],
    )
    with second:
        wait_ready(second)

        async def all_bound() -> bool:
            return all((await placements(api, namespace)).values())

        began = time.monotonic()
        await wait_for(all_bound, 60, what="the rest of the gang after restart")
        record(
            "operator SIGKILL mid-gang", bound_at_kill=partly, recovery_s=round(time.monotonic() - began, 1)
        )
    await assert_invariants(api)


async def test_apiserver_restart_during_burst(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"n{i}", cpu="32", pods=110) for i in range(10)])
    await create(api, slow_bind(sched, seconds=4.0, spread=True))  # bindings spread over 4 s
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        pods = [
            make_pod(f"p{i:03d}", namespace=namespace, cpu="500m", scheduler_name=sched) for i in range(300)
        ]
        await create_many(api, pods)
        await asyncio.sleep(1.0)
        bound_before = sum(1 for v in (await placements(api, namespace)).values() if v)
        # on this (main) thread: a child gets PR_SET_PDEATHSIG, which fires when the *thread*
        # that started it ends, so never restart it from a short-lived executor thread
        crds.restart_apiserver()
        fresh = await config.new_client_from_config(config_file=str(crds.kubeconfig))
        try:

            async def all_bound() -> bool:
                return all((await placements(fresh, namespace)).values())

            began = time.monotonic()
            await wait_for(all_bound, 90, what="every pod bound after the restart")
            record(
                "kube-apiserver restarted during a burst of 300 pods",
                bound_before_restart=bound_before,
                settle_after_restart_s=round(time.monotonic() - began, 1),
            )
            assert bound_before < 300  # the restart hit bindings in flight
            await assert_invariants(fresh)
        finally:
            await fresh.close()
        assert op.alive(), op.tail()


async def test_expired_watch_relists_without_losing_pods(tmp_path: Path) -> None:
    """Watches served from etcd (no watch cache) and compacted every second: a watch re-opened
    after a pause gets 410 Gone, kopf re-lists, and shoal notices the pods deleted meanwhile."""
    cp = ControlPlane(extra_apiserver_args=["--watch-cache=false", "--etcd-compaction-interval=1s"])
    cp.start()
    try:
        api = await config.new_client_from_config(config_file=str(cp.kubeconfig))
        try:
            await apply_crds(api)
            ns = "relist"
            await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            await create(api, make_node("only", cpu="4", pods=110))
            await create(api, profile("relist"))
            op = operator(cp, tmp_path / "op.log", extra=["--watch-timeout", "2", "--verbose"])
            with op:
                wait_ready(op)
                # a pod holds the whole node
                await create(api, make_pod("hog", namespace=ns, cpu="4", scheduler_name="relist"))
                await wait_for(lambda: _bound(api, ns, "hog"), 30, what="hog bound")
                os.kill(op.pid, signal.SIGSTOP)  # the operator misses everything from here
                try:
                    await client.CoreV1Api(api).delete_namespaced_pod("hog", ns, grace_period_seconds=0)
                    await create_many(
                        api,
                        [
                            make_pod(f"new-{i}", namespace=ns, cpu="1", scheduler_name="relist")
                            for i in range(4)
                        ],
                    )
                    await asyncio.sleep(6)  # the watch times out server-side; etcd compacts past it
                finally:
                    os.kill(op.pid, signal.SIGCONT)

                async def all_new_bound() -> bool:
                    p = await placements(api, ns)
                    return all(p.get(f"new-{i}") for i in range(4))

                await wait_for(all_new_bound, 60, what="pods created during the gap bound (hog forgotten)")
                # the whole log: a slow relist can be followed by more lines than any tail holds
                log = op.log.read_text(errors="replace")
                assert "Restarting the watch-stream for pods" in log, op.tail()
                # the re-list is streamed (sendInitialEvents), not fetched whole
                await wait_for(
                    lambda: "Streamed the listing of pods.v1: " in op.log.read_text(errors="replace"),
                    30,
                    what="the pods re-listed as a stream",
                )
                assert "listed instead of streamed" not in op.log.read_text(errors="replace"), op.tail()
                record(
                    "watch expired (410) during a 6 s pause",
                    relisted=True,
                    pods_created_in_gap=4,
                    pod_deleted_in_gap=1,
                )
            await assert_invariants(api)
        finally:
            await api.close()
    finally:
        cp.stop()


async def _bound(api: client.ApiClient, namespace: str, name: str) -> bool:
    return bool((await placements(api, namespace)).get(name))


async def test_rival_binder_gets_there_first(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"n{i}", cpu="16", pods=110) for i in range(4)])
    # every binding waits 3 s in PreBind, and the rival starts only once all of them are there, so
    # its bindings land first on every pod it tries instead of racing shoal's
    await create(api, slow_bind(sched, seconds=3.0))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        names = [f"p{i:03d}" for i in range(60)]
        await create_many(
            api, [make_pod(n, namespace=namespace, cpu="100m", scheduler_name=sched) for n in names]
        )
        await wait_for(
            lambda: _logged(op, *(f"SlowBind: {namespace}/{n} waiting on node " for n in names)),
            30,
            interval=0.05,
            what="every binding waiting in PreBind",
        )
        raw = RawClient(api)
        core: Any = client.CoreV1Api(api)
        targets = (await list_all(core.list_namespaced_pod, namespace))[::2]  # every other pod
        codes = await asyncio.gather(
            *(
                post_binding(raw, namespace, obj["metadata"]["name"], obj["metadata"]["uid"], "n3")
                for obj in targets
            )
        )
        rival = sum(code == 201 for code, _ in codes)

        async def all_bound() -> bool:
            return all((await placements(api, namespace)).values())

        await wait_for(all_bound, 60, what="every pod bound by one of the two")

        def conflicts() -> int:  # the whole log: a tail may not reach back to the first of them
            return op.log.read_text(errors="replace").count("was bound by someone else")

        # shoal logs its 409 after its own POST, which may come after the rival's pods show bound
        await wait_for(lambda: conflicts() >= rival, 30, what="shoal's 409 for every pod the rival took")
        record(
            "another actor binds pods first (409)", rival_bindings=rival, conflicts_seen_by_shoal=conflicts()
        )
        assert rival == len(targets), codes  # all in PreBind: the rival won every race
        assert conflicts() == rival  # shoal met a 409 for each and forgot the pod instead of retrying
    await assert_invariants(api)


def _logged(op: OperatorProcess, *lines: str) -> bool:
    """Whether the operator's log holds every one of ``lines`` (SlowBind writes one as a binding
    enters PreBind, HoldPermit one as it parks a pod). One read of the log for all of them."""
    if not op.log.exists():
        return False
    log = op.log.read_text(errors="replace")
    return all(line in log for line in lines)


async def _refused(api: client.ApiClient, namespace: str, pod: str, text: str) -> bool:
    """A FailedScheduling event for ``pod`` whose note holds ``text`` (e.g. the node its binding
    was abandoned on)."""
    events: Any = client.EventsV1Api(api)
    return any(
        e.get("reason") == "FailedScheduling"
        and (e.get("regarding") or {}).get("name") == pod
        and text in (e.get("note") or "")
        for e in await list_all(events.list_namespaced_event, namespace)
    )


async def test_node_deleted_while_its_pod_is_binding(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("doomed", gpus=8))
    # 10 s in PreBind: ample time, even on a loaded machine, for the operator to see the node's
    # deletion before the binding leaves PreBind and is checked against the nodes it knows
    await create(api, slow_bind(sched, seconds=10.0))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create(api, make_pod("p", namespace=namespace, gpus=1, scheduler_name=sched))
        pod = f"{namespace}/p"
        await wait_for(
            lambda: _logged(op, f"SlowBind: {pod} waiting on node doomed"),
            20,
            interval=0.05,
            what="p placed on doomed and waiting in PreBind",
        )
        assert (await placements(api, namespace))["p"] is None  # still in flight
        await client.CoreV1Api(api).delete_node("doomed")
        await wait_for(lambda: _logged(op, f"SlowBind: {pod} done on node doomed"), 30, what="PreBind over")
        await wait_for(lambda: _refused(api, namespace, "p", "doomed"), 20, what="the binding refused")
        assert (await placements(api, namespace))["p"] is None
        await create(api, make_node("spare", gpus=8))
        await wait_for(lambda: _bound(api, namespace, "p"), 30, what="p bound to the spare node")
        assert (await placements(api, namespace))["p"] == "spare"
    await assert_invariants(api)


async def test_pod_deleted_while_waiting_at_permit_releases_its_node(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    held, normal = f"held-{uuid.uuid4().hex[:4]}", f"s-{uuid.uuid4().hex[:4]}"
    await create(api, make_node("only", gpus=4))
    await create(api, profile(held, plugins={"permit": [{"name": "Coscheduling"}, {"name": "HoldPermit"}]}))
    await create(api, profile(normal))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create(api, make_pod("waiting", namespace=namespace, gpus=4, scheduler_name=held))
        # HoldPermit logs once "waiting" is assumed on "only" and parked at the gate; readiness is
        # not leadership (the Lease is taken in the background), so no sleep can promise that
        await wait_for(
            lambda: _logged(op, f"HoldPermit: {namespace}/waiting held on node only"),
            30,
            interval=0.05,
            what="waiting parked at Permit on only",
        )
        await create(api, make_pod("next", namespace=namespace, gpus=4, scheduler_name=normal))
        await wait_for(
            lambda: _refused(api, namespace, "next", "0/1 nodes are available"),
            30,
            what="next tried and refused",
        )
        assert (await placements(api, namespace))["next"] is None  # the node is reserved
        await client.CoreV1Api(api).delete_namespaced_pod("waiting", namespace, grace_period_seconds=0)
        await wait_for(lambda: _bound(api, namespace, "next"), 30, what="the freed node taken")
    await assert_invariants(api)


async def test_leader_killed_during_burst(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"n{i}", cpu="32", pods=110) for i in range(10)])
    await create(api, profile(sched))
    # production lease settings: 15 s lease, 10 s renew deadline, 2 s retry
    a = operator(crds, tmp_path / "a.log", identity="a", lease_name=lease, lease_duration=15)
    b = operator(crds, tmp_path / "b.log", identity="b", lease_name=lease, lease_duration=15)
    with a, b:
        wait_ready(a)
        wait_ready(b)
        leader, follower = await wait_for(lambda: _who_leads(a, b), 30, what="one replica leads")
        await create_many(
            api,
            [
                make_pod(f"p{i:03d}", namespace=namespace, cpu="100m", scheduler_name=sched)
                for i in range(500)
            ],
        )

        async def some_bound() -> bool:
            return sum(1 for v in (await placements(api, namespace)).values() if v) >= 100

        await wait_for(some_bound, 60, interval=0.05, what="a burst under way")
        killed = time.monotonic()
        leader.kill()
        await wait_for(follower.is_leader, 40, interval=0.1, what="the follower takes over")
        failover = time.monotonic() - killed

        async def all_bound() -> bool:
            return all((await placements(api, namespace)).values())

        await wait_for(all_bound, 90, what="the burst finished by b")
        record(
            "leader SIGKILLed during a burst of 500 pods", failover_s=round(failover, 1), lease_duration_s=15
        )
        assert failover <= 20, f"failover took {failover:.1f} s"
    await assert_invariants(api)


def _who_leads(a: Any, b: Any) -> tuple[Any, Any] | None:
    if a.is_leader():
        return a, b
    if b.is_leader():
        return b, a
    return None


async def test_graceful_stop_lets_bindings_in_flight_finish(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("n", cpu="16"))
    # 5 s in PreBind: well past the spread of the 10 pods' arrival there, so none is bound when the
    # stop below begins; the stop's 40 s grace still covers the drain many times over
    await create(api, slow_bind(sched, seconds=5.0))
    op = operator(crds, tmp_path / "op.log")
    op.start()
    wait_ready(op)
    await create_many(api, [make_pod(f"p{i}", namespace=namespace, scheduler_name=sched) for i in range(10)])
    # readiness is not leadership (the Lease is taken in the background): wait until SlowBind has
    # logged every pod entering PreBind rather than guess how long that takes
    await wait_for(
        lambda: _logged(op, *(f"SlowBind: {namespace}/p{i} waiting on node n" for i in range(10))),
        30,
        interval=0.05,
        what="all 10 bindings waiting in PreBind",
    )
    assert not any((await placements(api, namespace)).values())  # all 10 in flight
    stopped = time.monotonic()
    code = await asyncio.to_thread(op.stop, 40)  # SIGTERM: kopf's cleanup drains the bindings
    record(
        "graceful stop with 10 bindings in flight",
        exit_code=code,
        stop_s=round(time.monotonic() - stopped, 1),
    )
    assert code == 0, op.tail()
    assert all((await placements(api, namespace)).values())
    assert "released lease" in op.tail(50)
    # the pods bound during the drain got their Scheduled events too (written before exit)
    ev: Any = client.EventsV1Api(api)
    events = await list_all(ev.list_namespaced_event, namespace)
    scheduled = {e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled"}
    assert scheduled == {f"p{i}" for i in range(10)}, op.tail()
    await assert_invariants(api)
