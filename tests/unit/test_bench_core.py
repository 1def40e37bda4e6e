"""make bench-core's measurement and the keys it writes (a small run; no timing is asserted)."""

from __future__ import annotations

from bench import core


def test_a_small_run_places_every_pod_and_reports_median_ms_5000() -> None:
    result = core.run(5000, 40)
    assert result["nodes"] == 5000 and result["pods"] == 40
    assert result["placed"] == 40  # the default profile places them all on an empty fleet
    assert 0 < result["median_ms"] <= result["p99_ms"]
    payload = core.summary([result], {"date": "d", "machine": "m", "python": "p"})
    assert payload["median_ms_5000"] == round(result["median_ms"], 4)
    assert "p99_ms_5000" in payload and payload["runs"] == [result]
