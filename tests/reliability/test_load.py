"""A burst of 10,000 pending pods: every pod scheduled or clearly reported, memory bounded."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from bench.e2e_schedulers import process_status_kb
from shoal.testing.cluster import create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod
from tests.reliability.conftest import assert_invariants, operator, profile, record, wait_ready

PODS, UNFIT = 10_000, 500
MAX_RSS_MB = 600


def rss_mb(pid: int) -> tuple[float, float]:
    kb = process_status_kb(pid, "VmRSS", "VmHWM")
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


# pytest's global timeout (300 s) would end the test before its own 300 s wait could report which
# pods are stuck; the burst settles in about 45 s (docs/reliability.md).
@pytest.mark.timeout(600)
async def test_burst_of_ten_thousand_pods(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    # 100 nodes x 110 pods: room for 11,000 small pods; 500 pods ask for a GPU no node has
    await create_many(api, [make_node(f"n{i:03d}", cpu="64", memory="256Gi", pods=110) for i in range(100)])
    await create(api, profile(sched))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        began = time.monotonic()
        pods = [
            make_pod(
                f"p{i:05d}",
                namespace=namespace,
                cpu="10m",
                memory="16Mi",
                gpus=1 if i % 20 == 0 else 0,
                scheduler_name=sched,
            )
            for i in range(PODS)
        ]
        await create_many(api, pods, concurrency=48)
        core: Any = client.CoreV1Api(api)

        async def settled() -> tuple[int, int] | None:
            bound = reported = 0
            for p in await list_all(core.list_namespaced_pod, namespace):
                if p["spec"].get("nodeName"):
                    bound += 1
                elif any(
                    c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                    for c in (p.get("status") or {}).get("conditions") or ()
                ):
                    reported += 1
            return (bound, reported) if bound + reported == PODS else None

        bound, reported = await wait_for(settled, 300, interval=2, what="10,000 pods bound or reported")
        seconds = time.monotonic() - began
        _, peak = rss_mb(op.pid)
        record(
            "burst of 10,000 pending pods",
            bound=bound,
            reported=reported,
            seconds=round(seconds, 1),
            peak_rss_mb=round(peak),
        )
        assert bound == PODS - UNFIT
        assert reported == UNFIT
        assert peak < MAX_RSS_MB, f"peak RSS {peak:.0f} MB"
        events: Any = client.EventsV1Api(api)
        notes = {
            e["note"]
            for e in await list_all(events.list_namespaced_event, namespace)
            if e["reason"] == "FailedScheduling"
        }
        assert notes
        # every unfit pod is told why, in kube-scheduler's words (full nodes add "Too many pods")
        assert all(
            n.startswith("0/100 nodes are available: ") and "100 Insufficient nvidia.com/gpu" in n
            for n in notes
        ), notes
    await assert_invariants(api)
