"""Node selector terms (nodeSelector, node affinity) parsed once, with the API's validation rules.

A requirement kube-scheduler cannot parse (a bad label key or value, the wrong number of values, an
unknown operator) makes its term match no node, as upstream's ``nodeaffinity`` helpers do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_LABEL_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_INT64 = re.compile(r"[+-]?[0-9]+")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def parse_int64(text: str) -> int | None:
    """A label or selector value as Go's ``strconv.ParseInt(s, 10, 64)`` reads it (None: not one)."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def label_key_error(key: str) -> str:
    """Why ``key`` is not a label key (apimachinery's ``IsLabelKey``); "" if it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"{key!r}: a label key is a name with an optional DNS subdomain prefix and '/'"
    name = parts[-1]
    if len(parts) == 2 and not (0 < len(parts[0]) <= 253 and _DNS_SUBDOMAIN.fullmatch(parts[0])):
        return f"{key!r}: prefix part must be a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return (
            f"{key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start"
            " and end with an alphanumeric character (at most 63)"
        )
    return ""


def label_value_error(value: str) -> str:
    """Why ``value`` is not a label value (``IsValidLabelValue``); "" if it is one."""
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        return (
            f"{value!r}: a label value must be empty or consist of alphanumeric characters, '-', '_' or"
            " '.', and must start and end with an alphanumeric character (at most 63)"
        )
    return ""


def requirement_error(key: str, operator: str, values: Sequence[str], *, field: bool = False) -> str:
    """Why kube-scheduler cannot parse this node selector requirement ("" if it can).

    ``labels.NewRequirement`` for matchExpressions; for matchFields only ``In``/``NotIn`` with
    exactly one value. A term holding such a requirement matches no node.
    """
    if field:
        if operator not in ("In", "NotIn"):
            return f"matchFields operator {operator!r} is not supported (In, NotIn)"
        return "" if len(values) == 1 else f"matchFields {operator} must have exactly one value"
    why = [label_key_error(key)]
    if operator in ("In", "NotIn"):
        if not values:
            why.append(f"{key}: values can't be empty for {operator}")
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            why.append(f"{key}: values must be empty for {operator}")
    elif operator in ("Gt", "Lt"):
        if len(values) != 1 or parse_int64(values[0]) is None:
            why.append(f"{key}: {operator} needs exactly one integer value")
    else:
        why.append(f"{key}: operator {operator!r} is not supported ({', '.join(LABEL_OPERATORS)})")
    why.extend(label_value_error(v) for v in values)
    return "; ".join(w for w in why if w)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In NotIn Exists DoesNotExist Gt Lt
    values: tuple[str, ...] = ()
    #: why kube-scheduler could not parse it ("" if it can); a term holding it matches nothing
    error: str = field(default="", compare=False)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.error:
            return False
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            have, want = parse_int64(labels[self.key]), parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A NodeSelectorTerm: all requirements must hold (an empty term matches nothing)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()  # matchFields: only metadata.name is defined

    @property
    def empty(self) -> bool:
        return not self.expressions and not self.fields

    @property
    def error(self) -> str:
        """The first requirement kube-scheduler cannot parse ("" if none): the term matches nothing."""
        return next((r.error for r in (*self.expressions, *self.fields) if r.error), "")

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.empty or self.error:
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        # a field selector reads a field the node does not have as "" (only metadata.name exists)
        return all(r.matches({r.key: name if r.key == "metadata.name" else ""}) for r in self.fields)


def _parse_requirements(items: Any, *, fields: bool = False) -> tuple[Requirement, ...]:
    out = []
    for item in items if isinstance(items, list | tuple) else ():
        if not isinstance(item, Mapping):
            continue  # not a requirement (only a hand-written object can hold one)
        key = str(item.get("key", ""))
        operator = str(item.get("operator", ""))
        raw = item.get("values")
        values = tuple(str(v) for v in raw) if isinstance(raw, list | tuple) else ()
        error = requirement_error(key, operator, values, field=fields)
        out.append(Requirement(key=key, operator=operator, values=values, error=error))
    return tuple(out)


def parse_term(term: Any) -> SelectorTerm:
    term = term if isinstance(term, Mapping) else {}
    return SelectorTerm(
        _parse_requirements(term.get("matchExpressions")),
        _parse_requirements(term.get("matchFields"), fields=True),
    )
