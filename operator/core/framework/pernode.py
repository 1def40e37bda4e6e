"""Per-node Filter and Score plugins, adapted once to the vectorised form.

The Framework wraps a plugin that only has ``filter``/``score`` in one of these when the profile
is built, so the scheduling cycle has one shape: every Filter is a ``filter_nodes`` and every Score
a ``score_nodes``. The per-node call is checked like any plugin call (:func:`call_plugin`); an
Error on one node fails the whole call with :class:`PluginFailed`, naming the node, which the
:class:`~shoal.core.framework.invoker.Invoker` turns into an Error status naming the plugin (as
kube-scheduler: an Error at Filter or Score aborts the cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from shoal.core.framework.interfaces import BoolArray, FilterPlugin, IntArray, Rejection, ScorePlugin
from shoal.core.framework.invoker import PluginFailed, call_plugin, node_score_shape, status_shape
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status

if TYPE_CHECKING:
    from shoal.core.framework.cyclestate import CycleState
    from shoal.core.state.nodetable import NodeTable


class PerNodeFilter:
    """A :class:`FilterPlugin` as a :class:`VectorFilterPlugin`: ``filter`` on every candidate row."""

    def __init__(self, plugin: FilterPlugin) -> None:
        self.plugin = plugin
        self.name = plugin.name

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> list[Rejection]:
        masks: dict[tuple[str, Code], BoolArray] = {}
        for row in np.flatnonzero(candidates):
            _, status = call_plugin(
                self.name, status_shape, self.plugin.filter, state, pod, table.node_info(int(row))
            )
            if status.ok or status.is_skip:
                continue
            if status.code is Code.ERROR:  # as kube-scheduler: an Error aborts the cycle
                name = table.name(int(row))
                raise PluginFailed(Status.error(f"{status.message} (node {name})".strip()))
            for reason in status.reasons or (f"node(s) rejected by {self.name}",):
                mask = masks.get((reason, status.code))
                if mask is None:
                    mask = masks[(reason, status.code)] = np.zeros(candidates.shape[0], dtype=bool)
                mask[row] = True
        return [Rejection(m, reason, code) for (reason, code), m in masks.items()]


class PerNodeScore:
    """A :class:`ScorePlugin` as a :class:`VectorScorePlugin`: ``score`` on every row to score."""

    def __init__(self, plugin: ScorePlugin) -> None:
        self.plugin = plugin
        self.name = plugin.name

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        scores = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            value, status = call_plugin(
                self.name, node_score_shape, self.plugin.score, state, pod, table.node_info(int(row))
            )
            if value is None or not status.ok:
                name = table.name(int(row))
                message = status.message or f"{status.code.title} without a message"
                raise PluginFailed(Status.error(f"{message} (node {name})"))
            scores[i] = value
        return scores
