"""InterPodAffinity (PreFilter, Filter, PreScore, Score): pods placed by where other pods are.

kube-scheduler's semantics (pkg/scheduler/framework/plugins/interpodaffinity, release 1.37):

Filter, per node, first failing check wins:

1. the incoming pod's **required affinity**: the node has every term's topology key, and in the
   node's domain of each key there is a placed pod matching *all* the terms — or no placed pod in
   the cluster matches them all and the pod matches its own terms (the first pod of a group):
   ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable);
2. the incoming pod's **required anti-affinity**: no placed pod matching a term in the node's
   domain of that term's key: ``node(s) didn't match pod anti-affinity rules`` (Unschedulable);
3. **existing pods' required anti-affinity**: no placed pod whose term matches the incoming pod in
   a domain the node belongs to: ``node(s) didn't satisfy existing pods anti-affinity rules``
   (Unschedulable).

Score: per topology domain, + weight for each placed pod matching a preferred affinity term of the
incoming pod, − weight for a preferred anti-affinity term, + ``hardPodAffinityWeight`` for each
placed pod whose *required* affinity matches the incoming pod, ± weight for placed pods' preferred
terms that match it; a node scores the sum over the domains it is in, normalised min–max to 0–100.

"Placed" pods are every pod counted on a node (bound or assumed, whoever scheduled it), so the
members of a gang placed earlier in the same cycle count. Terms are matched against pods, not
nodes; the per-node part is numpy over the node table's label columns.

Namespaces, as upstream: the incoming pod's ``namespaceSelector`` selects the namespaces whose
labels the cache knows (an unknown namespace matches only the empty selector, ``{}``); placed pods'
terms are matched against the incoming pod's namespace labels, empty when unknown (so a
``DoesNotExist`` selector matches). A pod whose terms do not parse: PreFilter refuses it
(UnschedulableAndUnresolvable, ``parsing pod: ...``), PreScore returns Error.

This is the algorithm kube-scheduler 1.37 runs by default: the ``InterPodAffinityHostnameFastPath``
feature gate (alpha, off) checks ``kubernetes.io/hostname`` terms per node instead of per label
value, which differs only when nodes share a hostname label value or a matching pod sits on a node
without one.
Checked against upstream's unit-test tables (tests/data/upstream/interpodaffinity.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    MAX_NODE_SCORE,
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.placedsets import PlacedSet
from shoal.core.state.selectors import PodAffinityTerm
from shoal.core.state.status import SUCCESS, Code, Status

NAME = "InterPodAffinity"
FILTER_KEY = f"PreFilter{NAME}"
SCORE_KEY = f"PreScore{NAME}"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"


class Args(ArgsModel):
    #: score added per placed pod whose required affinity term matches the incoming pod
    hard_pod_affinity_weight: int = Field(default=1, ge=0, le=100)
    #: score only with the incoming pod's preferred terms (skips scanning every placed pod)
    ignore_preferred_terms_of_existing_pods: bool = False


#: topology key -> label value code -> count (or score)
Counts = dict[str, dict[int, int]]


def _add(counts: Counts, table: NodeTable, key: str, row: int, value: int) -> bool:
    """Count ``value`` for the domain of ``key`` that node ``row`` is in (if it has the label)."""
    code = int(table.label_column(key)[row])
    if code < 0:
        return False
    per_key = counts.setdefault(key, {})
    per_key[code] = per_key.get(code, 0) + value
    return True


def _domain_values(table: NodeTable, key: str, per_code: dict[int, int]) -> IntArray:
    """Per row, the count (or score) of the domain of ``key`` the node is in (0 without the label)."""
    codes = table.label_column(key)
    lookup = np.zeros(len(table.label_values(key)) + 1, dtype=np.int64)
    for code, count in per_code.items():
        lookup[code] = count
    values: IntArray = np.where(codes >= 0, lookup[np.maximum(codes, 0)], 0)
    return values


def _column_hits(table: NodeTable, key: str, per_code: dict[int, int]) -> BoolArray:
    """Rows whose domain of ``key`` has a count > 0 (rows without the label: False)."""
    hits: BoolArray = _domain_values(table, key, per_code) > 0
    return hits


@dataclass
class _FilterState:
    pod: PodInfo
    affinity: Counts = field(default_factory=dict)
    anti: Counts = field(default_factory=dict)
    existing_anti: Counts = field(default_factory=dict)
    self_match: bool = False


def matches_all(terms: Sequence[PodAffinityTerm], pod: PodInfo, ns_labels: dict[str, str] | None) -> bool:
    """The pure check behind required affinity: does ``pod`` match every term (and is there one)?"""
    return _all_match(terms, pod.namespace, pod.labels, ns_labels)


def _all_match(
    terms: Sequence[PodAffinityTerm],
    namespace: str,
    labels: Mapping[str, str],
    ns_labels: dict[str, str] | None,
) -> bool:
    return bool(terms) and all(t.matches(namespace, labels, ns_labels) for t in terms)


def _rows(table: NodeTable, placed: PlacedSet) -> Iterator[tuple[int, int]]:
    """``(node row, pods of the set on it)`` for the set's nodes the table holds."""
    index = table.index
    for node, count in placed.nodes.items():
        row = index.get(node)
        if row is not None:
            yield row, count


class InterPodAffinity:
    name = NAME
    #: Filter and Score read what PreFilter and PreScore computed (profile validation checks it)
    needs_pre_filter = True
    needs_pre_score = True

    def __init__(self, args: Args, cache: ClusterCache) -> None:
        self.args = args
        self.cache = cache

    def _ns_labels(self, namespace: str) -> dict[str, str] | None:
        """A placed pod's namespace labels, for the incoming pod's terms: ``None`` when unknown, so
        only an empty namespaceSelector matches it (upstream lists the known namespaces a selector
        matches)."""
        return self.cache.namespace_labels.get(namespace)

    def _own_ns_labels(self, namespace: str) -> dict[str, str]:
        """The incoming pod's namespace labels, for placed pods' terms: empty when unknown (as
        upstream, so a ``DoesNotExist`` / ``NotIn`` namespaceSelector matches it)."""
        return self.cache.namespace_labels.get(namespace) or {}

    def _candidates(self, terms: Iterable[PodAffinityTerm]) -> Iterator[PlacedSet]:
        """Placed sets that may match any of ``terms``: their namespaces, unless a term selects
        namespaces by label (then every placed set)."""
        names: set[str] = set()
        for t in terms:
            if t.namespace_selector is not None:
                return self.cache.placed_sets.sets()
            names |= t.namespaces
        return self.cache.placed_sets.sets(names)

    # -- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if pod.pod_affinity_error:
            return None, Status.unschedulable(f"parsing pod: {pod.pod_affinity_error}", resolvable=False)
        table = self.cache.table
        aff = pod.pod_affinity
        st = _FilterState(pod)
        own_ns = self._own_ns_labels(pod.namespace)
        for placed in self.cache.placed_sets.with_affinity(required_anti_only=True):
            hits = [t for t in placed.affinity.required_anti if t.matches(pod.namespace, pod.labels, own_ns)]
            for row, count in _rows(table, placed) if hits else ():
                for t in hits:
                    _add(st.existing_anti, table, t.topology_key, row, count)
        if aff.required or aff.required_anti:
            for placed in self._candidates((*aff.required, *aff.required_anti)):
                ns = self._ns_labels(placed.namespace)
                affine = _all_match(aff.required, placed.namespace, placed.labels, ns)
                repelled = [t for t in aff.required_anti if t.matches(placed.namespace, placed.labels, ns)]
                for row, count in _rows(table, placed) if affine or repelled else ():
                    for t in aff.required if affine else ():
                        _add(st.affinity, table, t.topology_key, row, count)
                    for t in repelled:
                        _add(st.anti, table, t.topology_key, row, count)
            st.self_match = matches_all(aff.required, pod, self._ns_labels(pod.namespace))
        if not st.existing_anti and not aff.required and not aff.required_anti:
            return None, Status.skip()
        state.write(FILTER_KEY, st)
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        st: _FilterState = state.require(FILTER_KEY)
        n = table.n
        rejected: BoolArray = np.zeros(n, dtype=bool)
        out: list[Rejection] = []
        terms = pod.pod_affinity.required
        if terms:
            has_keys = np.ones(n, dtype=bool)
            pods_exist = np.ones(n, dtype=bool)
            for t in terms:
                has_keys &= table.label_column(t.topology_key) >= 0
                pods_exist &= _column_hits(table, t.topology_key, st.affinity.get(t.topology_key, {}))
            first_of_group = not any(st.affinity.values()) and st.self_match
            ok = has_keys & (pods_exist | first_of_group)
            rejected = ~ok
            out.append(Rejection(rejected.copy(), AFFINITY_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        anti = np.zeros(n, dtype=bool)
        for t in pod.pod_affinity.required_anti:
            anti |= _column_hits(table, t.topology_key, st.anti.get(t.topology_key, {}))
        anti &= ~rejected
        if anti.any():
            out.append(Rejection(anti, ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE))
            rejected = rejected | anti
        existing = np.zeros(n, dtype=bool)
        for key, per_code in st.existing_anti.items():
            existing |= _column_hits(table, key, per_code)
        existing &= ~rejected
        if existing.any():
            out.append(Rejection(existing, EXISTING_ANTI_AFFINITY_REASON, Code.UNSCHEDULABLE))
        return out

    # -- PreScore / Score ----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        if pod.pod_affinity_error:  # PreFilter refuses such a pod first; as upstream, an Error here
            return Status.error(f"parsing pod: {pod.pod_affinity_error}")
        aff = pod.pod_affinity
        preferred = bool(aff.preferred or aff.preferred_anti)
        if self.args.ignore_preferred_terms_of_existing_pods and not preferred:
            return Status.skip()
        scores: Counts = {}
        recorded = False
        own_ns = self._own_ns_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        sets = self.cache.placed_sets.sets() if preferred else self.cache.placed_sets.with_affinity()
        for placed in sets:
            # (topology key, weight) of every term that matches, this set's pods against the incoming
            # pod's preferred terms and the incoming pod against this set's terms
            weighted = self._weighted_terms(pod, placed, own_ns, hard)
            for row, count in _rows(table, placed) if weighted else ():
                for key, weight in weighted:
                    recorded |= _add(scores, table, key, row, weight * count)
        if not recorded:
            return Status.skip()
        state.write(SCORE_KEY, scores)
        return SUCCESS

    def _weighted_terms(
        self, pod: PodInfo, placed: PlacedSet, own_ns: dict[str, str], hard: int
    ) -> list[tuple[str, int]]:
        aff, theirs = pod.pod_affinity, placed.affinity
        ns = self._ns_labels(placed.namespace)
        out = [
            (t.topology_key, t.weight)
            for t in aff.preferred
            if t.matches(placed.namespace, placed.labels, ns)
        ]
        out += [
            (t.topology_key, -t.weight)
            for t in aff.preferred_anti
            if t.matches(placed.namespace, placed.labels, ns)
        ]
        if theirs.empty:
            return out
        if hard > 0:
            out += [
                (t.topology_key, hard)
                for t in theirs.required
                if t.matches(pod.namespace, pod.labels, own_ns)
            ]
        out += [
            (t.topology_key, t.weight)
            for t in theirs.preferred
            if t.matches(pod.namespace, pod.labels, own_ns)
        ]
        out += [
            (t.topology_key, -t.weight)
            for t in theirs.preferred_anti
            if t.matches(pod.namespace, pod.labels, own_ns)
        ]
        return out

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        scores: Counts = state.require(SCORE_KEY)
        total = np.zeros(table.n, dtype=np.int64)
        for key, per_code in scores.items():
            total += _domain_values(table, key, per_code)
        raw: IntArray = total[rows]
        return raw

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        if not state.read(SCORE_KEY) or not len(scores):
            return scores
        low, high = int(scores.min()), int(scores.max())
        if high == low:
            return np.zeros(len(scores), dtype=np.int64)
        # as upstream: float64(MaxNodeScore) * (float64(s - min) / float64(max - min)), truncated
        out: IntArray = (float(MAX_NODE_SCORE) * ((scores - low) / float(high - low))).astype(np.int64)
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a placed pod leaving (or relabelled) may lift anti-affinity; one arriving may satisfy
        # affinity; a node relabelled may enter a domain; a namespace relabelled may enter or
        # leave a namespaceSelector
        kinds = EventKind.ANY_POD | EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.NAMESPACE_CHANGE
        return (EventRegistration(kinds),)


def new(args: Args, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args, handle.cache)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(
        Evaluates(fidelity.POD_AFFINITY_REQUIRED),
        Evaluates(fidelity.POD_AFFINITY_PREFERRED, "score"),
        Evaluates(fidelity.POD_ANTI_AFFINITY_REQUIRED),
        Evaluates(fidelity.POD_ANTI_AFFINITY_PREFERRED, "score"),
    ),
    # blind for a pod without terms only while no placed pod has required anti-affinity, which
    # the what-ifs check before they share a PreFilter (whatif.shared_pre_filter)
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, InterPodAffinity, contract=CONTRACT)
