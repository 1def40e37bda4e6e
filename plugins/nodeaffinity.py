"""NodeAffinity (PreFilter, Filter, Score): nodeSelector and node affinity.

Filter: the node must match every ``nodeSelector`` pair and, if present, one of the required
affinity terms (``node(s) didn't match Pod's node affinity/selector``; unresolvable). Score: the sum
of the weights of the preferred terms a node matches, normalised to 0..100.

Vectorised: each requirement is an ``isin`` over the interned label column of its key.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.core.cyclestate import CycleState
from shoal.core.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.nodetable import NodeTable
from shoal.core.objects import PodInfo, Requirement, SelectorTerm
from shoal.core.profile import PluginEntry
from shoal.core.scoring import default_normalize
from shoal.core.status import SKIP, SUCCESS, Code, Status

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


def _int_or_nan(value: str) -> float:
    try:
        return float(int(value))
    except ValueError:
        return float("nan")


def requirement_mask(table: NodeTable, req: Requirement) -> BoolArray:
    """Rows whose labels satisfy one requirement (label-selector semantics)."""
    codes = table.label_column(req.key)
    op = req.operator
    if op in ("In", "NotIn"):
        wanted = [table.label_code(req.key, v) for v in req.values]
        hit: BoolArray = np.isin(codes, wanted)
        return hit if op == "In" else ~hit
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    if op in ("Gt", "Lt") and len(req.values) == 1:
        try:
            bound = int(req.values[0])
        except ValueError:
            return np.zeros(len(codes), dtype=bool)
        values = table.label_values(req.key)
        lookup = np.full(len(values) + 1, np.nan)
        for value, code in values.items():
            lookup[code] = _int_or_nan(value)
        numbers = np.where(codes >= 0, lookup[np.maximum(codes, 0)], np.nan)
        with np.errstate(invalid="ignore"):
            out: BoolArray = numbers > bound if op == "Gt" else numbers < bound
        return out
    return np.zeros(len(codes), dtype=bool)


def term_mask(table: NodeTable, term: SelectorTerm) -> BoolArray:
    n = table.n
    if term.empty:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for req in term.expressions:
        mask &= requirement_mask(table, req)
    for req in term.fields:
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return np.zeros(n, dtype=bool)
        named = np.zeros(n, dtype=bool)
        for value in req.values:
            row = table.index.get(value)
            if row is not None:
                named[row] = True
        mask &= named if req.operator == "In" else ~named
    return mask


def matches(pod: PodInfo, table: NodeTable) -> BoolArray:
    """Rows that satisfy the pod's nodeSelector and required node affinity."""
    n = table.n
    mask = np.ones(n, dtype=bool)
    for key, value in pod.node_selector.items():
        mask &= table.label_column(key) == table.label_code(key, value)
    if pod.required_terms is not None:
        any_term = np.zeros(n, dtype=bool)
        for term in pod.required_terms:
            any_term |= term_mask(table, term)
        mask &= any_term
    return mask


class NodeAffinity:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_selector and pod.required_terms is None:
            return None, SKIP
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if not pod.node_selector and pod.required_terms is None:
            return ()
        return (Rejection(~matches(pod, table), REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        return SUCCESS if pod.preferred_terms else SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        total = np.zeros(table.n, dtype=np.int64)
        for weight, term in pod.preferred_terms:
            if weight:
                total += term_mask(table, term) * weight
        out: IntArray = total[rows]
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: None, handle: Handle) -> NodeAffinity:
    return NodeAffinity()


ENTRY = PluginEntry(NAME, new, None, NodeAffinity)
