"""make soak's figures from its windows (bench/soak.py)."""

from __future__ import annotations

from bench.soak import Run, Window


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
