"""KubePreemptionExecutor: the calls DefaultPreemption's decision turns into, in upstream's order
and wording, against a recording client (no server)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from shoal.kube import reporter as reporter_module
from shoal.kube.preemption import KubePreemptionExecutor
from shoal.kube.reporter import KubeReporter
from shoal.kube.rest import RawClient
from shoal.operator_app.metrics import PromMetrics
from tests.unit.helpers import pod


class Recorder:
    def __init__(self, status: dict[str, int] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.status = status or {}

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        self.calls.append((method, path, body))
        return self.status.get(f"{method} {path}", 200), {}


async def preempt(recorder: Recorder, reporter: KubeReporter | None = None) -> list[bool]:
    claim = reporter.claim_condition if reporter is not None else (lambda uid: None)
    executor = KubePreemptionExecutor(cast(RawClient, recorder), instance="t", claim_condition=claim)
    results: list[bool] = []
    done = asyncio.Event()

    def finished(ok: bool) -> None:
        results.append(ok)
        done.set()

    high = pod("high", priority=100, scheduler_name="gpu-scheduler")
    executor.preempt(high, "n1", [pod("low", priority=1)], [pod("nominee", priority=5)], finished)
    await asyncio.wait_for(done.wait(), 5)
    return results


async def test_nominate_then_mark_delete_and_report_each_victim() -> None:
    rec = Recorder()
    assert await preempt(rec) == [True]
    methods = [(m, p) for m, p, _ in rec.calls]
    assert methods == [
        ("PATCH", "/api/v1/namespaces/default/pods/high/status"),
        ("PATCH", "/api/v1/namespaces/default/pods/nominee/status"),
        ("PATCH", "/api/v1/namespaces/default/pods/low/status"),
        ("DELETE", "/api/v1/namespaces/default/pods/low"),
        ("POST", "/apis/events.k8s.io/v1/namespaces/default/events"),
    ]
    nominate, clear, mark, delete, event = (body for _, _, body in rec.calls)
    assert nominate["status"] == {"nominatedNodeName": "n1"}
    assert nominate["metadata"] == {"uid": "uid-high"}
    assert clear["status"] == {"nominatedNodeName": None}
    (condition,) = mark["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionTarget",
        "True",
        "PreemptionByScheduler",
    )
    assert condition["message"] == "gpu-scheduler: preempting to accommodate a higher priority pod"
    assert delete["preconditions"] == {"uid": "uid-low"}
    assert (event["reason"], event["action"], event["type"]) == ("Preempted", "Preempting", "Normal")
    assert event["note"] == "Preempted by pod uid-high on node n1"
    assert event["regarding"]["name"] == "low" and event["related"]["name"] == "high"


async def test_a_victim_already_gone_counts_as_preempted() -> None:
    rec = Recorder({"PATCH /api/v1/namespaces/default/pods/low/status": 404})
    assert await preempt(rec) == [True]
    assert not any(m == "DELETE" for m, _, _ in rec.calls)


async def test_a_refused_delete_is_reported_as_not_done() -> None:
    rec = Recorder({"DELETE /api/v1/namespaces/default/pods/low": 403})
    assert await preempt(rec) == [False]


class _Api:
    class configuration:  # what RawClient reads
        host = "https://127.0.0.1:1"


async def test_the_preemptors_condition_goes_in_its_nomination_patch() -> None:
    """kube-scheduler writes the preemptor's PodScheduled=False and nominatedNodeName in one patch:
    the condition the cycle queued rides on the nomination, and the reporter does not write it
    again; a pod that preempts nothing still gets its condition from the reporter."""
    rec = Recorder()
    reporter = KubeReporter(_Api(), instance="t")  # type: ignore[arg-type]
    reporter.raw = cast(RawClient, rec)
    high = pod("high", priority=100, scheduler_name="gpu-scheduler")
    reporter.unschedulable(high, "0/1 nodes are available: 1 Insufficient cpu.", "gpu-scheduler")
    reporter.unschedulable(pod("other"), "0/1 nodes are available: 1 Insufficient cpu.", "gpu-scheduler")
    assert await preempt(rec, reporter) == [True]
    reporter.start()
    try:
        await reporter.flush()
    finally:
        await reporter.stop()
    patches = [(path, body["status"]) for m, path, body in rec.calls if m == "PATCH"]
    high_patches = [status for path, status in patches if path.endswith("/pods/high/status")]
    assert len(high_patches) == 1
    (condition,) = high_patches[0]["conditions"]
    assert high_patches[0]["nominatedNodeName"] == "n1"
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    (other,) = [status for path, status in patches if path.endswith("/pods/other/status")]
    assert other["conditions"][0]["reason"] == "Unschedulable"
    # claimed once: nothing is left for a second nomination to carry
    assert reporter.claim_condition(high.uid) is None


def test_preemption_metrics_have_kube_schedulers_names() -> None:
    m = PromMetrics()
    m.preemption(0)
    m.preemption(3)
    text = m.render().decode()
    assert "scheduler_preemption_attempts_total 2.0" in text
    assert "scheduler_preemption_victims_count 1.0" in text and "scheduler_preemption_victims_sum 3.0" in text


async def test_the_reporter_forgets_what_is_older_than_its_dedup_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The soak's leak: one dedup entry per FailedScheduling message and one "settled" uid per
    pod ever bound stayed until 50,000 of each. Entries older than the window are dropped."""
    clock = [1000.0]
    monkeypatch.setattr(reporter_module, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time))
    reporter = KubeReporter(_Api(), instance="t", dedup_seconds=60.0)  # type: ignore[arg-type]
    reporter.raw = cast(RawClient, Recorder())
    for i in range(100):
        p = pod(f"p{i}", scheduler_name="gpu-scheduler")
        reporter.unschedulable(p, f"0/{i} nodes are available", "gpu-scheduler")
        reporter.forget(p.uid)
    assert len(reporter._recent) == 100 and len(reporter._settled) == 100
    clock[0] += 61.0  # one more of each, past the window: the rest are gone
    later = pod("later", scheduler_name="gpu-scheduler")
    reporter.unschedulable(later, "0/1 nodes are available", "gpu-scheduler")
    reporter.forget(later.uid)
    assert list(reporter._recent) == [(later.uid, "FailedScheduling", "0/1 nodes are available")]
    assert list(reporter._settled) == [later.uid]
    # within the window a repeated message is still deduplicated
    assert not reporter._fresh(later, "FailedScheduling", "0/1 nodes are available")
