"""Two operator replicas: only the Lease holder binds; stopping it hands over."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod
from tests.integration.conftest import wait_ready
from tests.integration.test_operator import profile, wait_profile

pytestmark = pytest.mark.slow


async def reporters(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """pod name -> reportingInstance of its Scheduled event."""
    ev: Any = client.EventsV1Api(api)
    return {
        e["regarding"]["name"]: e["reportingInstance"]
        for e in await list_all(ev.list_namespaced_event, namespace)
        if e["reason"] == "Scheduled"
    }


async def test_only_leader_binds_and_stop_hands_over(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    lease = f"lease-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("n", cpu="64", pods=200))
    a = OperatorProcess(crds.kubeconfig, tmp_path / "a.log", identity="replica-a", lease_name=lease)
    b = OperatorProcess(crds.kubeconfig, tmp_path / "b.log", identity="replica-b", lease_name=lease)
    with a:
        wait_ready(a)
        await wait_for(a.is_leader, 20, what="replica-a leads")
        with b:
            wait_ready(b)
            await create(api, profile(sched))
            await wait_profile(api, sched, "True")
            await create_many(
                api, [make_pod(f"first-{i}", namespace=namespace, scheduler_name=sched) for i in range(5)]
            )

            async def first_done() -> dict[str, str]:
                r = await reporters(api, namespace)
                return r if len(r) == 5 else {}

            first = await wait_for(first_done, 30, what="first batch bound")
            assert {v for v in first.values()} == {f"{sched}-replica-a"}
            assert not b.is_leader()
            a.stop()  # graceful: releases the Lease
            # timed from a's exit (how long kopf takes to shut down is not the point): with the
            # Lease released b leads at its next poll; without, only after the 15 s Lease lapses
            began = time.monotonic()
            await wait_for(b.is_leader, 30, what="replica-b takes over")
            handover = time.monotonic() - began
            await create_many(
                api, [make_pod(f"second-{i}", namespace=namespace, scheduler_name=sched) for i in range(5)]
            )

            async def second_done() -> dict[str, str]:
                r = await reporters(api, namespace)
                return r if len(r) == 10 else {}

            both = await wait_for(second_done, 30, what="second batch bound")
            assert {v for k, v in both.items() if k.startswith("second-")} == {f"{sched}-replica-b"}
            assert handover < 10, f"hand-over took {handover:.1f} s"
