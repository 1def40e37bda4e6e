"""bench/e2e.py's stream summary: the ratios of the streaming scenarios, from their results."""

from __future__ import annotations

from typing import Any

import pytest

from bench.e2e import stream_summary


def _run(pods_per_s: float, p50: float, p99: float, created: float | None) -> dict[str, Any]:
    run: dict[str, Any] = {"pods_per_s": pods_per_s, "p50_s": p50, "p99_s": p99, "peak_rss_mb": 100.0}
    if created is not None:
        run["created_per_s"] = created
    return run


#: an unpaced scale stream: shoal offered 1.25x the load, p50 5x, p99 1.25x, pods/s 1.2x
SCALE = {"shoal": _run(300, 20.0, 30.0, 375), "kube-scheduler": _run(250, 4.0, 24.0, 300)}


def test_unpaced_streams_carry_the_load_each_scheduler_was_offered() -> None:
    results = {
        "scale": SCALE,
        "paced200": {"shoal": _run(200, 0.04, 0.2, 200), "kube-scheduler": _run(200, 0.2, 1.0, 200)},
    }
    out = stream_summary(results)
    assert out["scale_p50_ratio"] == pytest.approx(5.0)
    assert out["scale_p99_ratio"] == pytest.approx(1.25)
    assert out["scale_pods_per_s_ratio"] == pytest.approx(1.2)
    assert out["scale_offered_ratio"] == pytest.approx(1.25)
    # a paced stream offers both the same load by construction: no such ratio
    assert "paced200_offered_ratio" not in out and out["paced200_p50_ratio"] == pytest.approx(0.2)


def test_results_recorded_before_the_generator_rate_have_no_offered_ratio() -> None:
    results = {"scale": {"shoal": _run(300, 20.0, 30.0, None), "kube-scheduler": _run(250, 4.0, 24.0, 300)}}
    assert "scale_offered_ratio" not in stream_summary(results)


def test_the_paced_scale_stream_has_its_own_ratios_beside_the_unpaced_ones() -> None:
    """The scale scenario at an equal offered load is reported apart: its figures never replace
    the unpaced stream's, and it has no offered ratio (both were offered the same)."""
    results = {
        "scale": SCALE,
        "scale_paced": {"shoal": _run(200, 0.1, 0.5, 200), "kube-scheduler": _run(190, 5.0, 10.0, 197)},
    }
    out = stream_summary(results)
    assert out["scale_p50_ratio"] == pytest.approx(5.0)
    assert out["scale_paced_p50_ratio"] == pytest.approx(0.02)
    assert out["scale_paced_p99_ratio"] == pytest.approx(0.05)
    assert "scale_paced_offered_ratio" not in out
