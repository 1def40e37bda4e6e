"""Faults at the API boundary: shoal behind a proxy that answers a share of its requests with 429
(Retry-After), 500, 504, a slow answer or a connection cut after the API server acted, and cuts
its watches every few seconds. shoal retries, re-lists, binds every pod once and loses none."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.faultproxy import FAULTS, FaultPlan, FaultProxy
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.integration.test_operator import profile_ready
from tests.reliability.conftest import FAULT_ENV, assert_invariants, placements, profile, record


async def ready(op: OperatorProcess, timeout: float) -> None:
    """Wait for ``/readyz`` without blocking the event loop the proxy serves from."""

    async def check() -> bool:
        assert op.alive(), op.tail()
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    f"http://127.0.0.1:{op.metrics_port}/readyz", timeout=aiohttp.ClientTimeout(total=1)
                ) as r,
            ):
                return r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    await wait_for(check, timeout, what="the operator ready behind the faulty proxy")


async def test_api_faults_at_a_rate_lose_no_pod_and_bind_each_once(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"n{i}", cpu="32", gpus=8) for i in range(6)])
    await create(api, profile(sched))
    plan = FaultPlan(rate=0.2, retry_after=1, slow_seconds=0.5, watch_drop_after=5.0, seed=7)
    async with FaultProxy(crds.url, plan) as proxy:
        kubeconfig = proxy.kubeconfig(crds.kubeconfig, tmp_path / "through-faults.kubeconfig")
        op = OperatorProcess(
            kubeconfig, tmp_path / "op.log", lease_name=f"rel-{uuid.uuid4().hex[:6]}", env=FAULT_ENV
        )
        with op:
            await ready(op, 90)  # not wait_ready: it would block this loop, and the proxy runs in it
            pods: list[dict[str, Any]] = [
                make_pod(f"p{i:02d}", namespace=namespace, cpu="1", scheduler_name=sched) for i in range(60)
            ]
            gang = [
                make_pod(f"g{i}", namespace=namespace, gpus=8, scheduler_name=sched, pod_group="g")
                for i in range(4)
            ]
            began = time.monotonic()
            await create(api, make_pod_group("g", namespace=namespace, min_member=4))
            await create_many(api, [*pods, *gang])

            async def settled() -> bool:
                bound = all((await placements(api, namespace)).values())
                ready = await profile_ready(api, sched)  # a status write that met a fault is redone
                bound = bound and ready is not None and ready["status"] == "True"
                # every fault really happened while shoal worked (its lease renewals and events
                # keep requests flowing, so this is a state to reach, not a time to wait)
                return bound and all(proxy.injected[f] for f in (*FAULTS, "watch-drop"))

            await wait_for(settled, 240, interval=0.5, what="every pod bound, every fault injected")
            record(
                "API faults at 20 % of requests (429, 500, 504, slow, cut) and watches cut every ≤5 s",
                pods=len(pods) + len(gang),
                settle_s=round(time.monotonic() - began, 1),
                injected=dict(sorted(proxy.injected.items())),
            )
            await assert_invariants(api)  # no pod bound twice, no partial gang, no over-commit
            assert op.alive(), op.tail()
        # every fault was one line saying what failed and what shoal does next, never a traceback
        assert "Traceback" not in op.log.read_text(), op.tail()
