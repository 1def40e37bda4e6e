"""bench/e2e.py's backlog rounds: alternating order, median round, ratios paired within a round."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench import e2e
from bench.e2e import BACKLOG_ORDER, backlog_rounds, backlog_summary, median_round
from bench.e2e_report import _backlog
from bench.e2e_schedulers import BACKLOG_KINDS


def _round(**pods_per_s: float) -> dict[str, dict[str, Any]]:
    return {
        k: {"pods_per_s": v, "pods": 5000, "nodes": 1000, "seconds": 5000 / v}
        | {"cpu_s": 1.0, "peak_rss_mb": 50.0}
        for k, v in pods_per_s.items()
    }


def _kinds(null: float, shoal: float, kube: float = 400.0) -> dict[str, dict[str, Any]]:
    nulls = {"null": null, "null-events": null * 0.6}
    return _round(**nulls, **{"kube-scheduler": kube, "kube-same-work": kube / 2, "shoal": shoal})


#: a slow round for every kind (the machine busy that minute), then two ordinary ones
ROUNDS = [_kinds(600, 380), _kinds(1000, 900), _kinds(1100, 950)]


def test_ratios_are_the_median_of_each_rounds_own_ratio() -> None:
    out = backlog_summary(ROUNDS)
    assert out["ceiling_fraction_rounds"] == pytest.approx([380 / 600, 0.9, 950 / 1100])
    assert out["ceiling_fraction"] == pytest.approx(950 / 1100)
    assert out["backlog_ratio"] == pytest.approx(900 / 400)
    assert out["same_work_ratio"] == pytest.approx(900 / 200)
    assert out["null_events_fraction"] == pytest.approx(0.6)


def test_the_median_round_is_chosen_per_kind() -> None:
    rounds = [_kinds(600, 950), _kinds(1000, 380), _kinds(1100, 900)]
    median = median_round(rounds)
    assert median["null"]["pods_per_s"] == 1000
    assert median["shoal"]["pods_per_s"] == 900


def test_one_round_gives_that_rounds_ratios() -> None:
    out = backlog_summary([_kinds(1000, 800)])
    assert out["ceiling_fraction"] == pytest.approx(0.8)
    assert out["ceiling_fraction_rounds"] == pytest.approx([0.8])


def test_rounds_alternate_the_order_and_keep_each_round_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[str, Path]] = []

    async def fake_backlog(kind: str, base: Path, nodes: int, pods: int) -> dict[str, Any]:
        calls.append((kind, base))
        return {"pods_per_s": float(len(calls))}

    monkeypatch.setattr(e2e, "backlog", fake_backlog)
    rounds = asyncio.run(backlog_rounds(tmp_path, 10, 20, rounds=3))
    kinds = [k for k, _ in calls]
    n = len(BACKLOG_KINDS)
    assert sorted(BACKLOG_ORDER) == sorted(BACKLOG_KINDS)
    assert kinds[:n] == list(BACKLOG_ORDER)
    assert kinds[n : 2 * n] == list(reversed(BACKLOG_ORDER))
    assert kinds[2 * n :] == list(BACKLOG_ORDER)
    assert {b for _, b in calls} == {tmp_path / f"round-{i}" for i in (1, 2, 3)}
    # each round is reported in the report's order, whatever order it ran in
    assert [list(r) for r in rounds] == [list(BACKLOG_KINDS)] * 3
    # the second round ran in reverse: its shoal ran fourth of the round (n + 4 calls by then)
    assert rounds[1]["shoal"]["pods_per_s"] == n + 4


def test_each_ratio_near_its_target_runs_its_two_sides_side_by_side() -> None:
    """The ratios nearest their targets (the ceiling, same-work) and kube-scheduler's ceilings
    pair neighbours in every round, forwards or reversed."""
    at = {k: i for i, k in enumerate(BACKLOG_ORDER)}
    for a, b in (
        ("shoal", "null"),
        ("shoal", "kube-same-work"),
        ("kube-scheduler", "null"),
        ("kube-scheduler", "null-events"),
    ):
        assert abs(at[a] - at[b]) == 1, (a, b)


def test_the_report_lists_every_round() -> None:
    text = "\n".join(_backlog({"backlog": median_round(ROUNDS), "backlog_rounds": ROUNDS}))
    assert "ran 3 times" in text
    assert "| 1 | 600 | 360 | 400 | 200 | 380 | 0.63 | 0.67 |" in text
    assert "| 3 | 1100 | 660 | 400 | 200 | 950 | 0.86 | 0.36 |" in text


def test_a_report_of_one_round_has_no_rounds_table() -> None:
    text = "\n".join(_backlog({"backlog": _kinds(1000, 800)}))
    assert "| round |" not in text and "ran " not in text
