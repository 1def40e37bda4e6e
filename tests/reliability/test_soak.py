"""Three minutes of a real cluster's churn (``make soak``'s short version, bench/soak.py): KWOK
nodes added, drained and deleted under their new unique names, Job pods that complete, service
pods and gangs that run and go, pods with a DRA claim while GPU nodes' drivers republish their
slices, high-priority pods that must preempt, two shoal replicas with leader election, and a
fault every 25 s (the API server restarted, then stalled, then the leader stalled, then the
leader SIGKILLed, in turn). Nothing lost, no invariant broken, every fault recovered from."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import FAULTS, Soak, SoakConfig
from tests.reliability.conftest import record


@pytest.mark.timeout(600)  # three minutes of churn, the control plane's start and a drain
async def test_three_minutes_of_churn_lose_no_pod_and_break_no_invariant(tmp_path: Path) -> None:
    cfg = SoakConfig(
        minutes=3,
        window_s=20,
        nodes=100,
        node_churn_s=3,
        job_pods_per_s=3,
        service_pods_per_s=1,
        gang_every_s=15,
        lifetime_s=(10, 40),
        fault_every_s=25,
        stall_s=8,
        preempt_every_s=20,
        gpu_nodes=4,
        dra_pods_per_s=0.3,
        republish_every_s=10,
    )
    run = await Soak("shoal", cfg, tmp_path).go()
    record(
        "3 minutes of churn (soak)",
        created=run.created,
        bound=run.bound,
        rss_mb=[w.rss_mb for w in run.windows],
        p99_ms=[w.p99_ms for w in run.windows],
        faults=[(f.name, f.recovery_s) for f in run.faults],
        preemptors=(run.preemptors, run.preemptors_bound, run.victims),
        republished=run.republished,
        gpu=(run.gpu_pods, run.gpu_bound),
        restarts=run.restarts,
    )
    assert run.violations == []
    assert run.lost == [], f"{len(run.lost)} pods neither bound, deleted nor pending with a reason"
    assert len(run.windows) >= 4 and all(w.rss_mb > 0 for w in run.windows)
    assert run.bound >= 0.9 * run.created  # the stream was scheduled, not just survived
    # the API server restarted, then stalled, then the scheduler stalled: each survived (a pod
    # created after it ended was bound)
    assert len(run.faults) >= len(FAULTS), run.faults
    assert [f.name for f in run.faults] == [FAULTS[i % len(FAULTS)] for i in range(len(run.faults))]
    assert all(f.recovery_s is not None for f in run.faults), run.faults
    # the killed leader came back as the standby
    assert run.restarts >= 1
    # preemptors were bound, each in place of two fillers the scheduler evicted
    assert run.preemptors_bound >= 1 and run.victims >= run.preemptors_bound, (
        run.preemptors,
        run.preemptors_bound,
        run.victims,
    )
    # GPU pods' claims were allocated while their nodes' slices were replaced under them
    assert run.republished >= 5
    assert run.gpu_bound >= 10
