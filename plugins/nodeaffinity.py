"""NodeAffinity (PreFilter, Filter, Score): nodeSelector and node affinity.

Filter: the node must match every ``nodeSelector`` pair and, if present, one of the required
affinity terms (``node(s) didn't match Pod's node affinity/selector``; unresolvable). A term holding
a requirement kube-scheduler cannot parse (bad key or value, wrong number of values, unknown
operator) matches no node. PreFilter refuses a pod whose every term names nodes by
``matchFields`` ``metadata.name In`` and no node satisfies them all (``pod affinity terms
conflict``). Score: the sum of the weights of the preferred terms a node matches, normalised to
0..100; an unparsable preferred term is an error at PreScore, as in kube-scheduler.

Args (kube-scheduler's ``NodeAffinityArgs``): ``addedAffinity``, a node affinity every pod of the
profile gets besides its own. Its required terms are checked first: a node matching none is
``node(s) didn't match scheduler-enforced node affinity`` (unresolvable); its preferred terms add
their weights to every pod's score. A term kube-scheduler cannot parse refuses the profile.

Vectorised: each requirement is an ``isin`` over the interned label column of its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import field_validator

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.framework.scoring import default_normalize
from shoal.core.state import fidelity
from shoal.core.state.nodeselectors import Requirement, SelectorTerm, parse_int64, parse_term
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_CONFLICT = "pod affinity terms conflict"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
PREFERRED = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
_REQUIRED_KEY = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED_KEY = "preferredDuringSchedulingIgnoredDuringExecution"


def _added_terms(
    affinity: Mapping[str, Any],
) -> tuple[tuple[SelectorTerm, ...] | None, tuple[tuple[int, SelectorTerm], ...]]:
    """(required terms, None when there are none; weighted preferred terms) of ``addedAffinity``;
    raises ValueError, naming the field, for what kube-scheduler's validation refuses."""
    unknown = sorted(set(affinity) - {_REQUIRED_KEY, _PREFERRED_KEY})
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}")
    required = affinity.get(_REQUIRED_KEY)
    terms: tuple[SelectorTerm, ...] | None = None
    if required is not None:
        if not isinstance(required, Mapping) or not isinstance(required.get("nodeSelectorTerms") or [], list):
            raise ValueError(f"{_REQUIRED_KEY}: not a node selector with a list of nodeSelectorTerms")
        items = required.get("nodeSelectorTerms") or ()
        terms = tuple(_term(t, f"{_REQUIRED_KEY}.nodeSelectorTerms[{i}]") for i, t in enumerate(items))
    preferred = []
    listed = affinity.get(_PREFERRED_KEY) or []
    if not isinstance(listed, list):
        raise ValueError(f"{_PREFERRED_KEY}: not a list of preferred scheduling terms")
    for i, item in enumerate(listed):
        weight = item.get("weight") if isinstance(item, Mapping) else None
        if not isinstance(weight, int) or isinstance(weight, bool) or not -(2**31) <= weight < 2**31:
            raise ValueError(f"{_PREFERRED_KEY}[{i}].weight: an int32, not {weight!r}")
        term = _term(item.get("preference"), f"{_PREFERRED_KEY}[{i}].preference")
        if weight and not term.empty:  # as upstream, a weight-0 or empty term is left out unread
            if term.error:
                raise ValueError(f"{_PREFERRED_KEY}[{i}].preference: {term.error}")
            preferred.append((weight, term))
    return terms, tuple(preferred)


def _term(raw: Any, where: str) -> SelectorTerm:
    """A NodeSelectorTerm from args (which, unlike a pod, no API server checked the shape of);
    ValueError naming ``where`` when it is not one, or for the required ones, when it is invalid."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ValueError(f"{where}: not a node selector term")
    for key in ("matchExpressions", "matchFields"):
        items = (raw or {}).get(key) or []
        if not isinstance(items, list) or not all(isinstance(r, Mapping) for r in items):
            raise ValueError(f"{where}.{key}: not a list of requirements")
        for r in items:
            if not isinstance(r.get("values") or [], list):
                raise ValueError(f"{where}.{key}: values must be a list")
    term = parse_term(raw)
    if term.error and not where.endswith(".preference"):
        raise ValueError(f"{where}: {term.error}")
    return term


class Args(ArgsModel):
    """kube-scheduler's ``NodeAffinityArgs``."""

    #: a v1 NodeAffinity (required and / or preferred terms) added to every pod of the profile
    added_affinity: dict[str, Any] | None = None

    @field_validator("added_affinity")
    @classmethod
    def _parsable(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            _added_terms(value)
        return value


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


def _any_term(table: NodeTable, terms: Sequence[SelectorTerm]) -> BoolArray:
    out = np.zeros(table.n, dtype=bool)
    for term in terms:
        out |= term_mask(table, term)
    return out


class NodeAffinity:
    name = NAME

    def __init__(self, args: Args | None = None) -> None:
        added = args.added_affinity if args is not None else None
        #: ``addedAffinity``: required terms (None: none) and weighted preferred terms
        self.added_required, self.added_preferred = _added_terms(added) if added is not None else (None, ())

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_selector and pod.required_terms is None and self.added_required is None:
            return None, SKIP
        # kube-scheduler also returns the named nodes as a PreFilterResult; shoal's Filter looks at
        # every node anyway and rejects the others there, with this plugin's reason.
        if pod.required_terms and named_nodes(pod.required_terms) == frozenset():
            return None, Status.unschedulable(REASON_CONFLICT, resolvable=False)
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        out = []
        enforced: BoolArray | None = None
        if self.added_required is not None:  # checked first, as upstream
            enforced = ~_any_term(table, self.added_required)
            out.append(Rejection(enforced, REASON_ENFORCED, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if pod.node_selector or pod.required_terms is not None:
            own = ~matches(pod, table)
            if enforced is not None:
                own &= ~enforced
            out.append(Rejection(own, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        for i, (weight, term) in enumerate(pod.preferred_terms):
            if weight and not term.empty and term.error:
                return Status.error(f"{PREFERRED}[{i}]: {term.error}")
        return SUCCESS if pod.preferred_terms or self.added_preferred else SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        total = np.zeros(table.n, dtype=np.int64)
        for weight, term in (*self.added_preferred, *pod.preferred_terms):
            if weight and not term.error:
                total += term_mask(table, term) * weight
        out: IntArray = total[rows]
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: Args | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(
        Evaluates(fidelity.NODE_SELECTOR),
        Evaluates(fidelity.NODE_AFFINITY_REQUIRED),
        Evaluates(fidelity.NODE_AFFINITY_PREFERRED, "score"),
    ),
    pod_only_pre_filter=True,
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, NodeAffinity, contract=CONTRACT)
