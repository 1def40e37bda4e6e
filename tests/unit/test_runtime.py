"""Framework runtime: order and semantics of the extension points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shoal.core.cyclestate import CycleState
from shoal.core.interfaces import PreFilterResult
from shoal.core.nodetable import NodeInfo
from shoal.core.objects import PodInfo
from shoal.core.profile import PluginEntry
from shoal.core.runtime import Framework
from shoal.core.status import SKIP, SUCCESS, Code, Status
from shoal.plugins.registry import BUILTIN
from shoal.testing.objects import make_node
from tests.unit.helpers import cache_with, handle_for, pod

CALLS: list[str] = []


class Recorder:
    """A configurable per-node plugin that logs every call."""

    def __init__(self, name: str, **behaviour: Any) -> None:
        self.name = name
        self.b = behaviour

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        CALLS.append(f"{self.name}.pre_filter")
        return self.b.get("pre_filter_result"), self.b.get("pre_filter", SUCCESS)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        CALLS.append(f"{self.name}.filter({node.name})")
        reject = self.b.get("reject", set())
        return Status.unschedulable(f"{self.name} says no") if node.name in reject else SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        CALLS.append(f"{self.name}.score({node.name})")
        return self.b.get("scores", {}).get(node.name, 0), SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        CALLS.append(f"{self.name}.reserve")
        return self.b.get("reserve", SUCCESS)

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        CALLS.append(f"{self.name}.unreserve")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        CALLS.append(f"{self.name}.permit")
        return self.b.get("permit", SUCCESS), self.b.get("timeout", 1.0)


def build(plugins: dict[str, list[dict[str, Any]]], recorders: list[Recorder], nodes: int = 3) -> Framework:
    CALLS.clear()
    entries = {e.name: e for e in BUILTIN}
    for r in recorders:
        entries[r.name] = PluginEntry(r.name, lambda args, handle, r=r: r, None, Recorder)
    spec = {
        "schedulerName": "t",
        "plugins": {"queueSort": [{"name": "PrioritySort"}], "bind": [{"name": "DefaultBinder"}], **plugins},
    }
    cache = cache_with([make_node(f"n{i}") for i in range(nodes)])
    return Framework.from_spec(spec, entries, handle_for(cache))


def test_prefilter_skip_skips_that_plugins_filter() -> None:
    a = Recorder("A", pre_filter=SKIP, reject={"n0", "n1", "n2"})
    fw = build({"preFilter": [{"name": "A"}], "filter": [{"name": "A"}]}, [a])
    st = CycleState()
    pre, status = fw.run_pre_filter(st, pod())
    assert status.ok
    outcome = fw.find_feasible(st, pod(), pre)
    assert outcome.feasible.all()
    assert not any(c.startswith("A.filter") for c in CALLS)


def test_first_prefilter_rejection_stops() -> None:
    a = Recorder("A", pre_filter=Status.unschedulable("nope"))
    b = Recorder("B")
    fw = build({"preFilter": [{"name": "A"}, {"name": "B"}]}, [a, b])
    _, status = fw.run_pre_filter(CycleState(), pod())
    assert status.code is Code.UNSCHEDULABLE and status.plugin == "A"
    assert CALLS == ["A.pre_filter"]


def test_prefilter_results_intersect() -> None:
    a = Recorder("A", pre_filter_result=PreFilterResult(frozenset({"n0", "n1"})))
    b = Recorder("B", pre_filter_result=PreFilterResult(frozenset({"n1", "n2"})))
    fw = build({"preFilter": [{"name": "A"}, {"name": "B"}]}, [a, b])
    st = CycleState()
    pre, _ = fw.run_pre_filter(st, pod())
    outcome = fw.find_feasible(st, pod(), pre)
    assert [fw.handle.cache.table.name(int(r)) for r in np.flatnonzero(outcome.feasible)] == ["n1"]


def test_filter_reports_first_rejecting_plugin_per_node() -> None:
    a = Recorder("A", reject={"n0"})
    b = Recorder("B", reject={"n0", "n1"})
    fw = build({"filter": [{"name": "A"}, {"name": "B"}]}, [a, b])
    outcome = fw.find_feasible(CycleState(), pod())
    diag = outcome.diagnosis(fw.handle.cache.table.names)
    assert diag.reason_counts == {"A says no": 1, "B says no": 1}
    assert diag.node_reasons["n0"][0] == "A"
    assert diag.node_reasons["n1"][0] == "B"
    # B never looked at n0, which A had already rejected
    assert "B.filter(n0)" not in CALLS


def test_scores_are_weighted_and_range_checked() -> None:
    a = Recorder("A", scores={"n0": 10, "n1": 50, "n2": 0})
    b = Recorder("B", scores={"n0": 100, "n1": 0, "n2": 0})
    fw = build({"score": [{"name": "A", "weight": 3}, {"name": "B", "weight": 1}]}, [a, b])
    rows = np.array([0, 1, 2], dtype=np.int64)
    outcome, status = fw.run_score(CycleState(), pod(), rows, record=True)
    assert status.ok
    assert outcome.total.tolist() == [130, 150, 0]
    assert fw.select_host(outcome) == 1
    bad = Recorder("Bad", scores={"n0": 101})
    fw2 = build({"score": [{"name": "Bad"}]}, [bad])
    _, status = fw2.run_score(CycleState(), pod(), rows)
    assert status.code is Code.ERROR and "outside 0..100" in status.message


def test_reserve_failure_unreserves_all_in_reverse_order() -> None:
    a, b, c = Recorder("A"), Recorder("B", reserve=Status.unschedulable("full")), Recorder("C")
    fw = build({"reserve": [{"name": "A"}, {"name": "B"}, {"name": "C"}]}, [a, b, c])
    status = fw.run_reserve(CycleState(), pod(), "n0")
    assert status.plugin == "B"
    assert CALLS == ["A.reserve", "B.reserve", "C.unreserve", "B.unreserve", "A.unreserve"]


async def test_permit_wait_creates_a_registered_gate_and_reject_stops() -> None:
    a = Recorder("A", permit=Status.wait(), timeout=2000.0)
    fw = build({"permit": [{"name": "A"}]}, [a])
    status, gate = fw.run_permit(CycleState(), pod(), "n0")
    assert status.is_wait and gate is not None
    assert fw.handle.waiting.get("uid-p") is gate
    assert gate.timeout == 900.0  # capped at 15 minutes
    gate.allow("A")
    assert (await gate.wait()).allowed
    b = Recorder("B", permit=Status.unschedulable("denied"))
    fw2 = build({"permit": [{"name": "B"}]}, [b])
    status, gate = fw2.run_permit(CycleState(), pod(), "n0")
    assert status.code is Code.UNSCHEDULABLE and gate is None


def test_plugin_exception_becomes_error_status() -> None:
    class Boom(Recorder):
        def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
            raise RuntimeError("kaboom")

    fw = build({"preFilter": [{"name": "Boom"}]}, [Boom("Boom")])
    _, status = fw.run_pre_filter(CycleState(), pod())
    assert status.code is Code.ERROR and "kaboom" in status.message


@pytest.mark.parametrize("percentage", [100, 50])
def test_sampling(percentage: int) -> None:
    fw = build({}, [], nodes=400)
    fw.percentage = percentage
    rows = fw.sample(CycleState(), fw.handle.cache.table.valid_rows())
    assert len(rows) == (400 if percentage == 100 else 200)
