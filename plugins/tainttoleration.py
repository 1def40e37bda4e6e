"""TaintToleration (Filter, Score): taints a pod does not tolerate keep it off a node.

Filter: an untolerated ``NoSchedule`` or ``NoExecute`` taint rejects the node, unresolvable, with
kube-scheduler 1.37's reason ``node(s) had untolerated taint(s)`` (which taint is not named, so
nodes with different taints count under one reason). Score: fewer untolerated ``PreferNoSchedule``
taints is better (normalised, reversed). Toleration matching is ``Toleration.tolerates``.

Vectorised by taint *set*: nodes share few distinct taint lists, so each distinct list is checked
once per pod and the verdict is spread to the nodes through ``NodeTable.taint_set``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.core.framework.contract import Contract
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    Rejection,
)
from shoal.core.framework.profile import PluginEntry
from shoal.core.framework.scoring import default_normalize
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo, Taint, Toleration
from shoal.core.state.status import Code

NAME = "TaintToleration"
REASON = "node(s) had untolerated taint(s)"
FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration matches (None: the pod tolerates all)."""
    for taint in taints:
        if taint.effect in FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    prefer = [t for t in tolerations if not t.effect or t.effect == "PreferNoSchedule"]
    return sum(
        1
        for taint in taints
        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in prefer)
    )


class TaintToleration:
    name = NAME

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if len(table.taint_sets) == 1:
            return ()  # no node has a taint
        bad = [
            tid
            for tid, taints in enumerate(table.taint_sets)
            if taints and first_untolerated(taints, pod.tolerations) is not None
        ]
        if not bad:
            return ()
        mask = np.isin(table.taint_set[: table.n], bad)
        return (Rejection(mask, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        counts = np.array(
            [intolerable_prefer_no_schedule(t, pod.tolerations) for t in table.taint_sets], dtype=np.int64
        )
        out: IntArray = counts[table.taint_set[rows]]
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: None, handle: Handle) -> TaintToleration:
    return TaintToleration()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(pod_only_pre_filter=True, filter_blind_to_pods=True)
ENTRY = PluginEntry(NAME, new, None, TaintToleration, contract=CONTRACT)
