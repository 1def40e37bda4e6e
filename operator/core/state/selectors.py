"""Label selectors and pod (anti-)affinity terms, parsed once from a pod's spec.

Semantics are the API's (``metav1.LabelSelector``): every ``matchLabels`` pair and every
``matchExpressions`` requirement must hold; an empty selector (``{}``) matches everything, an absent
one (``None`` here) matches nothing. Operators: In, NotIn, Exists, DoesNotExist; anything else
makes the selector invalid, and so does a key that is not a qualified name or a value that is
not a label value (apimachinery's ``LabelSelectorAsSelector``; the API server refuses such pods, so
one only comes from a snapshot file). A pod affinity term matches a pod when the pod's namespace
is one of the term's namespaces or the term's ``namespaceSelector`` matches the labels of the
pod's namespace, and its ``labelSelector`` matches the pod's labels (kube-scheduler's
``AffinityTerm.Matches``).

``matchLabelKeys`` / ``mismatchLabelKeys`` need no work here: since Kubernetes 1.33 the API server
merges them into ``labelSelector`` when the pod is created, and kube-scheduler reads the merged
selector too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
# apimachinery's validation: a label value (empty allowed) and a qualified key ([prefix/]name)
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


class SelectorError(ValueError):
    """A selector the API would refuse (unknown operator, values where none belong, ...)."""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed ``metav1.LabelSelector``; no requirements: matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def everything(self) -> bool:
        return not self.requirements

    def equalities(self) -> list[tuple[str, frozenset[str]]]:
        """``(key, values)`` of the In requirements: a pod must carry one of these values."""
        return [(r.key, r.values) for r in self.requirements if r.operator == "In"]


@lru_cache(maxsize=256)
def parse_equality_selector(value: str) -> LabelSelector:
    """``app=ps,role=db`` (``==`` too; a bare ``key``: the label exists), as kubectl's ``-l``
    equality terms. Raises SelectorError for an empty term list or a ``key=`` without a value."""
    requirements = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        key, eq, wanted = part.partition("=")
        key, wanted = key.strip(), wanted.lstrip("=").strip()
        if not key or (eq and not wanted):
            raise SelectorError(f"{part!r} is not key=value or key")
        _check_key(key)
        requirements.append(
            LabelRequirement(key, "In", frozenset({wanted})) if eq else LabelRequirement(key, "Exists")
        )
    if not requirements:
        raise SelectorError(f"{value!r} has no key=value term")
    return LabelSelector(tuple(requirements))


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if (
        not name
        or len(name) > 63
        or not _NAME.fullmatch(name)
        or ("/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)))
    ):
        raise SelectorError(f'key: Invalid value: "{key}": not a qualified label key ([prefix/]name)')


def check_label_key(key: str) -> None:
    """Raises SelectorError unless ``key`` is a qualified label key ([prefix/]name)."""
    _check_key(key)


def _check_values(key: str, values: Any) -> None:
    for i, value in enumerate(values):
        if len(value) > 63 or (value and not _NAME.fullmatch(value)):
            raise SelectorError(f'values[{i}][{key}]: Invalid value: "{value}": {_VALUE_HELP}')


def parse_selector(obj: Any) -> LabelSelector | None:
    """``None`` for an absent selector (matches nothing); raises SelectorError when invalid
    (as apimachinery's ``LabelSelectorAsSelector``: operators, keys, values)."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise SelectorError(f"not a label selector: {obj!r}")
    reqs: list[LabelRequirement] = []
    for k, v in (obj.get("matchLabels") or {}).items():
        _check_key(str(k))
        _check_values(str(k), [str(v)])
        reqs.append(LabelRequirement(str(k), "In", frozenset({str(v)})))
    for expr in obj.get("matchExpressions") or ():
        if not isinstance(expr, Mapping):
            raise SelectorError(f"not a selector requirement: {expr!r}")
        op = str(expr.get("operator") or "")
        key = str(expr.get("key") or "")
        listed = [str(v) for v in expr.get("values") or ()]
        if op not in _OPERATORS:
            raise SelectorError(f"{op!r} is not a valid label selector operator")
        if op in ("In", "NotIn") and not listed:
            raise SelectorError(f"operator {op} needs values (key {key!r})")
        if op in ("Exists", "DoesNotExist") and listed:
            raise SelectorError(f"operator {op} takes no values (key {key!r})")
        _check_key(key)
        _check_values(key, listed)
        reqs.append(LabelRequirement(key, op, frozenset(listed)))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required or (with ``weight``) preferred pod affinity / anti-affinity term."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None
    weight: int = 0

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        """Does a pod in ``namespace`` with ``labels`` match? ``ns_labels``: its namespace's labels
        (``None`` when unknown: then only an empty namespaceSelector matches)."""
        if namespace not in self.namespaces:
            sel = self.namespace_selector
            if sel is None or not (sel.everything or (ns_labels is not None and sel.matches(ns_labels))):
                return False
        return self.selector is not None and self.selector.matches(labels)


def parse_affinity_term(term: Any, own_namespace: str, weight: int = 0) -> PodAffinityTerm:
    if not isinstance(term, Mapping):
        raise SelectorError(f"not a pod affinity term: {term!r}")
    names = frozenset(str(n) for n in term.get("namespaces") or ())
    ns_selector = parse_selector(term.get("namespaceSelector"))
    if not names and ns_selector is None:
        names = frozenset({own_namespace})
    return PodAffinityTerm(
        topology_key=str(term.get("topologyKey") or ""),
        selector=parse_selector(term.get("labelSelector")),
        namespaces=names,
        namespace_selector=ns_selector,
        weight=weight,
    )


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """All four lists of a pod's ``spec.affinity`` podAffinity / podAntiAffinity."""

    required: tuple[PodAffinityTerm, ...] = ()
    required_anti: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[PodAffinityTerm, ...] = ()
    preferred_anti: tuple[PodAffinityTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.required or self.required_anti or self.preferred or self.preferred_anti)


NO_AFFINITY = PodAffinity()


def parse_pod_affinity(affinity: Any, namespace: str) -> PodAffinity:
    """The pod's affinity terms; raises SelectorError for a term the API would refuse."""
    if not isinstance(affinity, Mapping):
        return NO_AFFINITY

    def lists(kind: str) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
        spec = affinity.get(kind) or {}
        required = tuple(
            parse_affinity_term(t, namespace)
            for t in spec.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
        )
        preferred = tuple(
            parse_affinity_term(
                (w or {}).get("podAffinityTerm"), namespace, int((w or {}).get("weight") or 0)
            )
            for w in spec.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        return required, preferred

    required, preferred = lists("podAffinity")
    required_anti, preferred_anti = lists("podAntiAffinity")
    result = PodAffinity(required, required_anti, preferred, preferred_anti)
    return NO_AFFINITY if result.empty else result


# -- topology spread constraints -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A parsed ``topologySpreadConstraints`` entry, with the API's defaults filled in."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    #: ``None``: an absent selector, which matches no pod; ``matchLabelKeys`` already merged in
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def counts(self, labels: Mapping[str, str]) -> bool:
        """Is a placed pod with ``labels`` counted? (An empty selector counts none, as upstream.)"""
        return self.selector is not None and not self.selector.everything and self.selector.matches(labels)

    def self_match(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)


_ACTIONS = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_POLICIES = frozenset({"Honor", "Ignore"})


def parse_spread_constraints(items: Any, pod_labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    """The pod's constraints; raises SelectorError for one the API would refuse."""
    out: list[SpreadConstraint] = []
    for item in items or ():
        if not isinstance(item, Mapping):
            raise SelectorError(f"not a topology spread constraint: {item!r}")
        action = str(item.get("whenUnsatisfiable") or "")
        if action not in _ACTIONS:
            raise SelectorError(f"whenUnsatisfiable {action!r} is not DoNotSchedule or ScheduleAnyway")
        selector = parse_selector(item.get("labelSelector"))
        keys = [str(k) for k in item.get("matchLabelKeys") or () if str(k) in pod_labels]
        # as upstream: key=value of the pod's own labels, then the selector's requirements; an
        # absent selector stays absent (it matches no pod, whatever matchLabelKeys adds)
        if keys and selector is not None:
            merged = tuple(LabelRequirement(k, "In", frozenset({pod_labels[k]})) for k in keys)
            selector = LabelSelector(merged + (selector.requirements if selector is not None else ()))
        policies = [
            str(item.get(p) or d)
            for p, d in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore"))
        ]
        if any(p not in _POLICIES for p in policies):
            raise SelectorError(f"node inclusion policies {policies} must be Honor or Ignore")
        max_skew, min_domains = int(item.get("maxSkew") or 0), int(item.get("minDomains") or 1)
        if max_skew < 1 or min_domains < 1:
            raise SelectorError(f"maxSkew {max_skew} and minDomains {min_domains} must be at least 1")
        out.append(
            SpreadConstraint(
                max_skew=max_skew,
                topology_key=str(item.get("topologyKey") or ""),
                when_unsatisfiable=action,
                selector=selector,
                min_domains=min_domains,
                node_affinity_policy=policies[0],
                node_taints_policy=policies[1],
            )
        )
    return tuple(out)
