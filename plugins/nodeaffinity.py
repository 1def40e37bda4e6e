"""NodeAffinity (PreFilter, Filter, Score): nodeSelector and node affinity.

Filter: the node must match every ``nodeSelector`` pair and, if present, one of the required
affinity terms (``node(s) didn't match Pod's node affinity/selector``; unresolvable). A term holding
a requirement kube-scheduler cannot parse (bad key or value, wrong number of values, unknown
operator) matches no node. PreFilter refuses a pod whose every term names nodes by
``matchFields`` ``metadata.name In`` and no node satisfies them all (``pod affinity terms
conflict``). Score: the sum of the weights of the preferred terms a node matches, normalised to
0..100; an unparsable preferred term is an error at PreScore, as in kube-scheduler.

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
from shoal.core.nodeselectors import Requirement, SelectorTerm, parse_int64
from shoal.core.nodetable import NodeTable
from shoal.core.objects import PodInfo
from shoal.core.profile import PluginEntry
from shoal.core.scoring import default_normalize
from shoal.core.status import SKIP, SUCCESS, Code, Status

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_CONFLICT = "pod affinity terms conflict"
PREFERRED = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def _int_or_nan(value: str) -> float:
    number = parse_int64(value)
    return float("nan") if number is None else float(number)


def requirement_mask(table: NodeTable, req: Requirement) -> BoolArray:
    """Rows whose labels satisfy one requirement (label-selector semantics)."""
    codes = table.label_column(req.key)
    if req.error:
        return np.zeros(len(codes), dtype=bool)
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
        bound = parse_int64(req.values[0])
        if bound is None:
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
    if term.empty or term.error:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for req in term.expressions:
        mask &= requirement_mask(table, req)
    for req in term.fields:  # In / NotIn with one value (anything else is a term.error)
        if req.operator not in ("In", "NotIn") or len(req.values) != 1:
            return np.zeros(n, dtype=bool)
        named = np.zeros(n, dtype=bool)
        if req.key == "metadata.name":
            row = table.index.get(req.values[0])
            if row is not None:
                named[row] = True
        elif req.values[0] == "":
            named[:] = True  # a node has no other field: a field selector reads it as ""
        mask &= named if req.operator == "In" else ~named
    return mask


def named_nodes(terms: Sequence[SelectorTerm]) -> frozenset[str] | None:
    """The nodes the required terms are limited to by ``matchFields`` ``metadata.name In``.

    None when some term names no node that way (terms are ORed, so any node may match it); as
    kube-scheduler's NodeAffinity PreFilter, values are taken as written (even unparsable ones).
    """
    names: set[str] = set()
    for term in terms:
        in_term: set[str] | None = None
        for req in term.fields:
            if req.key == "metadata.name" and req.operator == "In":
                in_term = set(req.values) if in_term is None else in_term & set(req.values)
        if in_term is None:
            return None
        names |= in_term
    return frozenset(names)


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
        # kube-scheduler also returns the named nodes as a PreFilterResult; shoal's Filter looks at
        # every node anyway and rejects the others there, with this plugin's reason.
        if pod.required_terms and named_nodes(pod.required_terms) == frozenset():
            return None, Status.unschedulable(REASON_CONFLICT, resolvable=False)
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if not pod.node_selector and pod.required_terms is None:
            return ()
        return (Rejection(~matches(pod, table), REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        for i, (weight, term) in enumerate(pod.preferred_terms):
            if weight and not term.empty and term.error:
                return Status.error(f"{PREFERRED}[{i}]: {term.error}")
        return SUCCESS if pod.preferred_terms else SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        total = np.zeros(table.n, dtype=np.int64)
        for weight, term in pod.preferred_terms:
            if weight and not term.error:
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
