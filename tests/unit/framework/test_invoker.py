"""The invoker: every plugin call timed, and turned into a Status naming the plugin when it fails."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shoal.core.framework.interfaces import PreFilterResult, Rejection
from shoal.core.framework.invoker import (
    Invoker,
    PluginFailed,
    WrongReturn,
    call_plugin,
    node_score_shape,
    permit_shape,
    pre_filter_shape,
    rejections_shape,
    scores_of,
    status_shape,
)
from shoal.core.framework.metrics import NullMetrics
from shoal.core.state.status import SUCCESS, Code, Status


class Recorded(NullMetrics):
    def __init__(self) -> None:
        self.plugins: list[tuple[str, str, str]] = []
        self.points: list[tuple[str, str, str]] = []

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        assert seconds >= 0
        self.plugins.append((plugin, point, status))

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        assert seconds >= 0
        self.points.append((point, status, profile))


def boom(*args: Any) -> Status:
    raise ValueError("bad column")


def test_success_is_returned_as_is_and_timed_only_when_sampled() -> None:
    metrics = Recorded()
    inv = Invoker("prof", metrics)
    value, status = inv.call("Reserve", "A", False, status_shape, lambda: SUCCESS)
    assert value is None and status is SUCCESS
    assert metrics.plugins == []
    inv.call("Reserve", "A", True, status_shape, lambda: SUCCESS)
    assert metrics.plugins == [("A", "Reserve", "Success")]
    inv.point("Reserve", 0.0, Status.unschedulable("x"))
    assert metrics.points == [("Reserve", "Unschedulable", "prof")]


def test_an_exception_is_an_error_naming_the_plugin() -> None:
    metrics = Recorded()
    _, status = Invoker("p", metrics).call("Filter", "VB", True, status_shape, boom, 1, 2)
    assert status.code is Code.ERROR and status.plugin == "VB"
    assert status.message == "ValueError: bad column"
    assert metrics.plugins == [("VB", "Filter", "Error")]


def test_a_wrong_return_is_an_error_saying_what_came_back() -> None:
    _, status = call_plugin("F", status_shape, lambda: None)
    assert status == Status.error("returned None instead of a Status", "F")
    _, status = call_plugin("P", pre_filter_shape, lambda: SUCCESS)
    assert status.plugin == "P" and "instead of (PreFilterResult | None, Status)" in status.message
    _, status = call_plugin("P", permit_shape, lambda: (SUCCESS, "soon"))
    assert status.code is Code.ERROR and "instead of (Status, timeout)" in status.message
    _, status = call_plugin("S", node_score_shape, lambda: 7)
    assert status.message == "returned 7 instead of (int, Status)"
    _, status = call_plugin("V", rejections_shape, lambda: None)
    assert status.message == "returned None instead of a sequence of Rejection"


def test_rejections_of_a_plugin_are_tagged_with_its_name() -> None:
    _, status = call_plugin("A", status_shape, lambda: Status.unschedulable("full"))
    assert status.code is Code.UNSCHEDULABLE and status.plugin == "A" and status.message == "full"
    _, status = call_plugin("A", status_shape, lambda: Status.error("gone", "Other", requeue=False))
    assert status.plugin == "A" and not status.requeue  # requeue=False survives the tagging


def test_plugin_failed_carries_its_own_status() -> None:
    def fail() -> Status:
        raise PluginFailed(Status.error("lookup failed (node n1)"))

    _, status = call_plugin("F", status_shape, fail)
    assert status == Status.error("lookup failed (node n1)", "F")


def test_payloads_of_the_tuple_shapes() -> None:
    result = PreFilterResult(frozenset({"n0"}))
    assert call_plugin("P", pre_filter_shape, lambda: (result, SUCCESS)) == (result, SUCCESS)
    assert call_plugin("P", permit_shape, lambda: (Status.wait(), 3)) == (3.0, Status.wait().with_plugin("P"))
    assert call_plugin("S", node_score_shape, lambda: (np.int64(42), SUCCESS)) == (42, SUCCESS)
    rej = Rejection(np.zeros(2, dtype=bool), "r")
    assert call_plugin("V", rejections_shape, lambda: (rej,)) == ((rej,), SUCCESS)


def test_scores_must_be_one_integer_per_row() -> None:
    assert scores_of([1, 2], 2).tolist() == [1, 2]
    for bad in ([1], [[1, 2]], None, "ab"):
        with pytest.raises(WrongReturn, match="instead of 2 scores"):
            scores_of(bad, 2)


async def test_coroutines_go_through_the_same_checks() -> None:
    metrics = Recorded()
    inv = Invoker("p", metrics)

    async def bind(node: str) -> Status:
        return Status.unschedulable(f"{node} is gone")

    async def crash(node: str) -> Status:
        raise ConnectionError("reset")

    async def forgot(node: str) -> None:
        return None

    assert (await inv.acall("Bind", "B", True, status_shape, bind, "n0"))[1].plugin == "B"
    _, status = await inv.acall("Bind", "B", True, status_shape, crash, "n0")
    assert status == Status.error("ConnectionError: reset", "B")
    _, status = await inv.acall("PreBind", "B", False, status_shape, forgot, "n0")
    assert status.message == "returned None instead of a Status"
    assert metrics.plugins == [("B", "Bind", "Unschedulable"), ("B", "Bind", "Error")]
