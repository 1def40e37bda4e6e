"""make soak's figures from its windows (bench/soak.py)."""

from __future__ import annotations

import json
from dataclasses import asdict

from bench.soak import Fault, Run, SoakConfig, Window, run_from, summary


def window(t: float, rss: float, p99: float | None) -> Window:
    return Window(t=t, rss_mb=rss, cpu_ms_per_pod=1.0, bound=10, p50_ms=1.0, p99_ms=p99, pending_over_60s=0)


def test_rss_growth_is_measured_from_the_first_window_after_the_warm_up() -> None:
    run = Run("shoal", windows=[window(300, 100, 50), window(600, 200, 40), window(900, 210, 60)])
    assert run.rss_growth(600) == 210 / 200 - 1  # the warm-up's growth (100 → 200) is not counted
    assert run.rss_growth(10_000) == 210 / 100 - 1  # a run shorter than the warm-up: from its start
    assert Run("shoal", windows=[window(300, 100, 50)]).rss_growth(600) is None


def test_p99_drift_is_the_last_window_over_the_first_that_bound_pods() -> None:
    run = Run("shoal", windows=[window(300, 1, None), window(600, 1, 40), window(900, 1, 60)])
    assert run.p99_drift() == 1.5
    assert Run("shoal", windows=[window(300, 1, None)]).p99_drift() is None


def test_a_run_survives_the_raw_file_that_carries_it_between_processes() -> None:
    """``make soak`` runs both schedulers at once, each in its own process writing its Run as
    JSON; the parent rebuilds them, windows and faults included, for the summary and the plot."""
    run = Run(
        "kube-scheduler",
        windows=[window(300, 100, 50), window(600, 101, 40)],
        faults=[Fault("leader-kill", 310.0, 0.0, 15.2), Fault("apiserver-stall", 610.0, 30.0)],
        created=12,
        bound=11,
        restarts=2,
        victims=4,
        preempt_p50_s=17.3,
    )
    back = run_from(json.loads(json.dumps(asdict(run))))
    assert back == run
    s = summary({"shoal": run_from(asdict(run)), "kube-scheduler": back}, SoakConfig(minutes=10), "abc123")
    assert s["replica_restarts"] == s["replica_restarts_kube"] == 2
    assert s["faults_survived_kube"] == 1  # the stall's recovery was never seen
    assert s["victims_kube"] == 4 and s["preempt_p50_s_kube"] == 17.3
