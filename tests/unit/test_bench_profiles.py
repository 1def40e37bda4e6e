"""bench/profiles.py: py-spy samples are attributed to the part that owns them."""

from __future__ import annotations

from bench.profiles import OTHER, attribute, profile_doc, summarize

SP = "/v/site-packages"
LOOP = "run (asyncio/runners.py:118);_run_once (asyncio/base_events.py:1922);_run (asyncio/events.py:84)"
KOPF = (
    f"{LOOP};worker ({SP}/kopf/_core/reactor/queueing.py:317)"
    f";process_resource_event ({SP}/kopf/_core/reactor/processing.py:60)"
)
HANDLER = f"{KOPF};Informer.dispatch (operator/kube/informer.py:150);from_dict (operator/core/o.py:3)"
CYCLE = (
    f"{LOOP};Scheduler.run (/w/operator/core/scheduling/scheduler.py:255)"
    f";Scheduler._schedule_guarded (/w/operator/core/scheduling/scheduler.py:264)"
    f";observe ({SP}/prometheus_client/metrics.py:10)"
)
METRICS = f"{LOOP};Histogram.observe ({SP}/prometheus_client/metrics.py:10)"


def _stack(line: str) -> list[tuple[str, str]]:
    return [(f.split(" (")[0], f.split(" (")[1].rsplit(":", 1)[0]) for f in line.split(";")]


def test_the_handler_is_counted_apart_from_the_kopf_machinery_around_it() -> None:
    assert attribute(_stack(HANDLER)) == "shoal event handlers"
    assert attribute(_stack(KOPF)) == "kopf event path"


def test_a_victims_writes_count_as_preemption_though_they_run_in_a_task_of_their_own() -> None:
    evict = f"{LOOP};KubePreemptionExecutor._evict (operator/kube/preemption.py:120)"
    assert attribute(_stack(evict)) == "preemption writes"


def test_metrics_recorded_in_a_cycle_count_for_the_cycle() -> None:
    assert attribute(_stack(CYCLE)) == "scheduling cycle"
    assert attribute(_stack(METRICS)) == "metrics"
    assert attribute(_stack(LOOP)) == OTHER


def test_summary_shares_and_shoal_functions() -> None:
    raw = [f"{HANDLER} 30\n", f"{KOPF} 20\n", f"{CYCLE} 40\n", f"{LOOP} 10\n", "garbage\n"]
    summary = summarize(raw)
    assert summary["samples"] == 100
    parts = summary["parts"]
    assert parts["shoal event handlers"] == 0.3
    assert (parts["kopf event path"], parts["scheduling cycle"]) == (0.2, 0.4)
    assert parts[OTHER] == 0.1
    assert abs(sum(parts.values()) - 1.0) < 1e-9
    functions = dict(summary["functions"])
    assert (
        "Scheduler.run (core/scheduling/scheduler.py)" not in functions
    )  # a dispatcher: it would head every list
    assert functions["Informer.dispatch (kube/informer.py)"] == 0.3
    doc = "\n".join(profile_doc({"basic": summary}, "2026-12-02", "test machine"))
    assert "| scheduling cycle | 40% |" in doc and "| samples | 100 |" in doc
