"""The chart's Grafana dashboard and PrometheusRule ask only for series shoal exposes.

Every metric a PromQL expression selects (``name{...}``) must be one PromMetrics' registry
exposes (``up`` aside: Prometheus makes it); brackets balance; each alert has a severity and says
what to do. helm renders these files unchanged (tests/integration/test_metrics_auth.py checks it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.operator_app.metrics import PromMetrics

MONITORING = Path(__file__).resolve().parents[2] / "helm" / "shoal" / "files" / "monitoring"
SELECTED = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
FROM_PROMETHEUS = {"up"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def exposed() -> set[str]:
    names = set(FROM_PROMETHEUS)
    for family in PromMetrics().registry.collect():
        names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def problems(expr: str, known: set[str]) -> list[str]:
    found = []
    for name in SELECTED.findall(expr):
        if name not in known:
            found.append(f"{name} is not exposed")
    for opening, closing in ("()", "{}", "[]"):
        if expr.count(opening) != expr.count(closing):
            found.append(f"unbalanced {opening}{closing}")
    return found


def dashboard_exprs() -> list[str]:
    dash = json.loads((MONITORING / "dashboard.json").read_text())
    assert dash["uid"] and dash["title"]
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def rules() -> list[dict[str, Any]]:
    text = (MONITORING / "rules.yaml").read_text().replace("SHOAL_SELECTOR", 'job="j",namespace="n"')
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def test_the_checker_catches_an_unknown_metric_and_an_open_bracket() -> None:
    assert problems('rate(scheduler_nonsense_total{job="x"}[5m]', exposed()) == [
        "scheduler_nonsense_total is not exposed",
        "unbalanced ()",
    ]


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_selected_series_is_exposed(source: str) -> None:
    known = exposed()
    exprs = dashboard_exprs() if source == "dashboard" else [r["expr"] for r in rules()]
    selected = {n for e in exprs for n in SELECTED.findall(e)}
    assert {"shoal_leader", "scheduler_pending_pods", "scheduler_schedule_attempts_total"} <= selected
    assert {f"{e!r}: {p}" for e in exprs for p in problems(e, known)} == set()


def test_the_dashboard_has_the_operations_panels() -> None:
    exprs = " ".join(dashboard_exprs())
    for series in (
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        'result="scheduled"',
        'result="error"',
        "max by (queue) (scheduler_pending_pods",
        "shoal_leader",
    ):
        assert series in exprs, series


def test_the_alerts() -> None:
    by_name = {r["alert"]: r for r in rules()}
    assert set(by_name) == {
        "ShoalDown",
        "ShoalNoLeader",
        "ShoalPodsStuckUnschedulable",
        "ShoalGangTimeouts",
        "ShoalSchedulingErrors",
        "ShoalEventsDropped",
    }
    stuck = by_name["ShoalPodsStuckUnschedulable"]
    assert 'queue="unschedulable"' in stuck["expr"] and stuck["for"] == "15m"
    assert by_name["ShoalNoLeader"]["expr"].startswith("max(shoal_leader{")
    assert by_name["ShoalNoLeader"]["for"] == "5m"
    assert "shoal_gang_timeouts_total" in by_name["ShoalGangTimeouts"]["expr"]
    assert 'result="error"' in by_name["ShoalSchedulingErrors"]["expr"]
    for rule in by_name.values():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert re.fullmatch(r"[0-9]+[smh]", rule.get("for", "0s"))
        assert 'job="j",namespace="n"' in rule["expr"]  # every selector scoped to the release
