"""Framework runtime: order and semantics of the extension points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import BoolArray, EventKind, Handle, PreFilterResult, Rejection
from shoal.core.framework.metrics import NullMetrics
from shoal.core.framework.profile import PluginEntry, ProfileError
from shoal.core.framework.runtime import PLUGIN_METRICS_EVERY, Framework
from shoal.core.scheduling.schedule_one import sample_rows, select_host
from shoal.core.state.nodetable import NodeInfo, NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status
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
        status: Status = self.b.get("reserve", SUCCESS)
        return status

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        CALLS.append(f"{self.name}.unreserve")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        CALLS.append(f"{self.name}.permit")
        return self.b.get("permit", SUCCESS), self.b.get("timeout", 1.0)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        CALLS.append(f"{self.name}.pre_bind")
        status: Status = self.b.get("pre_bind", SUCCESS)
        return status

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        CALLS.append(f"{self.name}.bind")
        status: Status = self.b.get("bind", SUCCESS)
        return status

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        CALLS.append(f"{self.name}.post_bind")
        if self.b.get("post_bind_raises"):
            raise RuntimeError("post-bind bug")


class TimingMetrics(NullMetrics):
    def __init__(self) -> None:
        self.plugins: list[tuple[str, str, str]] = []
        self.points: list[str] = []

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        assert seconds >= 0
        self.plugins.append((plugin, point, status))

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        self.points.append(point)


def _returns(recorder: Recorder) -> Callable[[Any, Handle], Recorder]:
    """A factory for an existing Recorder (a lambda with a default argument defeats type inference)."""

    def factory(args: Any, handle: Handle) -> Recorder:
        return recorder

    return factory


def build(
    plugins: dict[str, list[dict[str, Any]]],
    recorders: list[Recorder],
    nodes: int = 3,
    metrics: NullMetrics | None = None,
) -> Framework:
    CALLS.clear()
    entries = {e.name: e for e in BUILTIN}
    for r in recorders:
        entries[r.name] = PluginEntry(r.name, _returns(r), None, type(r))
    spec = {
        "schedulerName": "t",
        "plugins": {"queueSort": [{"name": "PrioritySort"}], "bind": [{"name": "DefaultBinder"}], **plugins},
    }
    cache = cache_with([make_node(f"n{i}") for i in range(nodes)])
    return Framework.from_spec(spec, entries, handle_for(cache), metrics=metrics)


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
    assert select_host(outcome, fw.rng) == 1
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
    rows = sample_rows(fw, fw.handle.cache.table.valid_rows())
    assert len(rows) == (400 if percentage == 100 else 200)


async def test_binding_points_in_order_with_skip() -> None:
    a = Recorder("A", pre_bind=SKIP)
    b = Recorder("B")
    x = Recorder("X", bind=SKIP)
    y = Recorder("Y")
    c = Recorder("C", post_bind_raises=True)
    fw = build(
        {
            "preBind": [{"name": "A"}, {"name": "B"}],
            "bind": [{"name": "X"}, {"name": "Y"}],
            "postBind": [{"name": "C"}, {"name": "A"}],
        },
        [a, b, x, y, c],
    )
    st = CycleState()
    assert (await fw.run_pre_bind(st, pod(), "n0")).ok
    status = await fw.run_bind(st, pod(), "n0")
    assert status.ok and status.plugin == "Y"  # X skipped, Y bound
    fw.run_post_bind(st, pod(), "n0")  # C raises: logged, A still runs
    assert CALLS == ["A.pre_bind", "B.pre_bind", "X.bind", "Y.bind", "C.post_bind", "A.post_bind"]


async def test_prebind_rejection_stops_and_all_skip_bind_is_an_error() -> None:
    a = Recorder("A", pre_bind=Status.unschedulable("volume not ready"))
    x = Recorder("X", bind=SKIP)
    fw = build({"preBind": [{"name": "A"}], "bind": [{"name": "X"}]}, [a, x])
    status = await fw.run_pre_bind(CycleState(), pod(), "n0")
    assert status.code is Code.UNSCHEDULABLE and status.plugin == "A"
    status = await fw.run_bind(CycleState(), pod(), "n0")
    assert status.code is Code.ERROR and "no Bind plugin" in status.message


class VectorBoom(Recorder):
    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> list[Rejection]:
        raise ValueError("bad column")


def test_vectorised_filter_that_raises_aborts_the_cycle_with_its_name() -> None:
    fw = build({"filter": [{"name": "VB"}, {"name": "A"}]}, [VectorBoom("VB"), Recorder("A")])
    outcome = fw.find_feasible(CycleState(), pod())
    assert outcome.error is not None
    assert outcome.error.code is Code.ERROR and outcome.error.plugin == "VB"
    assert "bad column" in outcome.error.message
    assert not outcome.feasible.any()
    assert not any(c.startswith("A.filter") for c in CALLS)  # the cycle stopped there


def test_per_node_filter_error_aborts_the_cycle() -> None:
    class Flaky(Recorder):
        def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
            return Status.error("lookup failed") if node.name == "n1" else SUCCESS

    fw = build({"filter": [{"name": "F"}]}, [Flaky("F")])
    outcome = fw.find_feasible(CycleState(), pod())
    assert outcome.error is not None and outcome.error.plugin == "F"
    assert "lookup failed" in outcome.error.message and "n1" in outcome.error.message


@pytest.mark.parametrize("point", ["pre_score", "post_filter"])
def test_prescore_and_postfilter_exceptions_do_not_escape(point: str) -> None:
    class Boom(Recorder):
        def pre_score(self, state: CycleState, pod: PodInfo, rows: Any, table: NodeTable) -> Status:
            raise RuntimeError("kaboom")

        def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Any) -> Status:
            raise RuntimeError("kaboom")

    boom = Boom("Boom", scores={"n0": 1})
    if point == "pre_score":
        fw = build({"preScore": [{"name": "Boom"}], "score": [{"name": "Boom"}]}, [boom])
        _, status = fw.run_score(CycleState(), pod(), np.array([0], dtype=np.int64))
        assert status.code is Code.ERROR and status.plugin == "Boom" and "kaboom" in status.message
    else:
        fw = build({"postFilter": [{"name": "Boom"}]}, [boom])
        status = fw.run_post_filter(CycleState(), pod(), outcome_diag(fw))
        assert not status.ok and "kaboom" in status.message


class Helper(Recorder):
    """A PostFilter plugin answering with the status it is given."""

    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Any) -> Status:
        CALLS.append(f"{self.name}.post_filter")
        status: Status = self.b["post_filter"]
        return status


@pytest.mark.parametrize(
    ("first", "want_calls", "want"),
    [
        # upstream's RunPostFilterPlugins: Unschedulable goes on, reasons merged, the first rejector named
        (
            Status.unschedulable("deallocated"),
            ["A", "B"],
            Status(Code.UNSCHEDULABLE, ("deallocated", "b"), "A"),
        ),
        (Status.unschedulable(), ["A", "B"], Status(Code.UNSCHEDULABLE, ("b",), "B")),
        # Success, UnschedulableAndUnresolvable and Error stop the chain
        (SUCCESS, ["A"], Status(Code.SUCCESS, (), "A")),
        (
            Status.unschedulable("no", resolvable=False),
            ["A"],
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("no",), "A"),
        ),
        (Status.error("broke"), ["A"], Status(Code.ERROR, ("broke",), "A")),
    ],
)
def test_postfilter_runs_in_order_until_one_helps_or_cannot_and_merges_the_reasons(
    first: Status, want_calls: list[str], want: Status
) -> None:
    a, b = Helper("A", post_filter=first), Helper("B", post_filter=Status.unschedulable("b"))
    fw = build({"postFilter": [{"name": "A"}, {"name": "B"}]}, [a, b])
    CALLS.clear()
    status = fw.run_post_filter(CycleState(), pod(), outcome_diag(fw))
    assert [c.split(".")[0] for c in CALLS] == want_calls
    assert (status.code, status.reasons, status.plugin) == (want.code, want.reasons, want.plugin)


def outcome_diag(fw: Framework) -> Any:
    return fw.find_feasible(CycleState(), pod()).diagnosis()


def test_plugin_without_event_registrations_is_retried_on_every_event() -> None:
    fw = build({"filter": [{"name": "A"}, {"name": "NodeResourcesFit"}]}, [Recorder("A")])
    regs = dict(fw.events())
    assert regs["A"].kind == EventKind.ALL and regs["A"].hint is None
    assert regs["NodeResourcesFit"].kind != EventKind.ALL  # built-ins say what they need


def test_each_plugin_is_timed_in_one_cycle_out_of_ten() -> None:
    metrics = TimingMetrics()
    fw = build({"filter": [{"name": "A"}], "score": [{"name": "A"}]}, [Recorder("A")], metrics=metrics)
    for _ in range(2 * PLUGIN_METRICS_EVERY):
        st = fw.new_cycle_state()
        pre, _ = fw.run_pre_filter(st, pod())
        fw.find_feasible(st, pod(), pre)
        fw.run_score(st, pod(), np.array([0, 1], dtype=np.int64))
    filters = [m for m in metrics.plugins if m[:2] == ("A", "Filter")]
    scores = [m for m in metrics.plugins if m[:2] == ("A", "Score")]
    assert len(filters) == 2 and len(scores) == 2  # sampled: 2 cycles of 20
    assert metrics.points.count("Filter") == 2 * PLUGIN_METRICS_EVERY  # points: every cycle


def test_per_node_score_failure_is_an_error_naming_plugin_and_node() -> None:
    class Sick(Recorder):
        def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
            if node.name == "n1":
                return 0, Status.unschedulable("no metrics")
            return 10, SUCCESS

    fw = build({"score": [{"name": "S"}]}, [Sick("S")])
    _, status = fw.run_score(CycleState(), pod(), np.array([0, 1, 2], dtype=np.int64))
    assert status.code is Code.ERROR and status.plugin == "S"
    assert status.message == "no metrics (node n1)"


def test_per_node_score_wrong_return_or_exception_names_plugin_and_node() -> None:
    class Forgot(Recorder):
        def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Any:
            return 5  # the Status is missing

    fw = build({"score": [{"name": "S"}]}, [Forgot("S")])
    _, status = fw.run_score(CycleState(), pod(), np.array([0], dtype=np.int64))
    assert status == Status.error("returned 5 instead of (int, Status) (node n0)", "S")

    class Raises(Recorder):
        def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
            raise KeyError("gpu")

    fw = build({"score": [{"name": "S"}]}, [Raises("S")])
    _, status = fw.run_score(CycleState(), pod(), np.array([0], dtype=np.int64))
    assert status == Status.error("KeyError: 'gpu' (node n0)", "S")


def test_vectorised_score_of_the_wrong_length_is_an_error_naming_the_plugin() -> None:
    class Short(Recorder):
        def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: Any) -> Any:
            return np.zeros(len(rows) - 1, dtype=np.int64)

    fw = build({"score": [{"name": "V"}]}, [Short("V")])
    _, status = fw.run_score(CycleState(), pod(), np.array([0, 1], dtype=np.int64))
    assert status.code is Code.ERROR and status.plugin == "V" and "instead of 2 scores" in status.message


def test_vectorised_filter_wrong_return_aborts_the_cycle_with_its_name() -> None:
    class Forgot(Recorder):
        def filter_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: Any) -> Any:
            return None

    fw = build({"filter": [{"name": "VF"}]}, [Forgot("VF")])
    outcome = fw.find_feasible(CycleState(), pod())
    assert outcome.error == Status.error("returned None instead of a sequence of Rejection", "VF")
    assert not outcome.feasible.any()


def test_per_node_plugins_are_adapted_once_when_the_framework_is_built() -> None:
    fw = build(
        {"filter": [{"name": "A"}, {"name": "VB"}], "score": [{"name": "A"}]},
        [Recorder("A"), VectorBoom("VB")],
    )
    assert [type(p).__name__ for p in fw.filter] == ["PerNodeFilter", "VectorBoom"]  # vectorised wins
    assert [(type(p).__name__, p.name, w) for p, w, _ in fw.score] == [("PerNodeScore", "A", 1)]


def test_a_plugin_of_unknown_class_must_still_implement_its_point() -> None:
    class NoFilter:
        name = "NF"

    entries = {e.name: e for e in BUILTIN}
    entries["NF"] = PluginEntry("NF", lambda args, handle: NoFilter(), None, None)  # class unknown
    spec = {
        "schedulerName": "t",
        "plugins": {"queueSort": [{"name": "PrioritySort"}], "bind": [{"name": "DefaultBinder"}]},
    }
    spec["plugins"]["filter"] = [{"name": "NF"}]  # type: ignore[index]
    with pytest.raises(
        ProfileError, match=r'spec.plugins.filter\[0\].name: plugin "NF" does not implement filter'
    ):
        Framework.from_spec(spec, entries, handle_for(cache_with([make_node("n0")])))
