"""NodeResourcesFit (PreFilter, Filter, Score): requests against allocatable, and how full to pack.

Filter: a node fits when, for every resource the pod requests (``nvidia.com/gpu`` and any other
extended resource included), allocatable minus what its pods already request covers the request,
and it has room for one more pod. Reasons: ``Insufficient <resource>``, ``Too many pods``.

Score strategies (kube-scheduler's formulas; cpu/memory use non-zero defaults for pods without
requests, and an extended resource the pod does not request is left out, as upstream):

* ``LeastAllocated`` — prefer emptier nodes (spreads);
* ``MostAllocated`` — prefer fuller nodes (packs; with ``nvidia.com/gpu`` weighted high, keeps
  whole 8-GPU nodes free for 8-GPU pods);
* ``BalancedAllocation`` — prefer nodes whose resource fractions stay even.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from shoal.core.cyclestate import CycleState
from shoal.core.interfaces import (
    MAX_NODE_SCORE,
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.nodetable import CPU, MEMORY, PODS, NodeTable
from shoal.core.objects import PodInfo
from shoal.core.profile import ArgsModel, PluginEntry
from shoal.core.status import SUCCESS, Status

NAME = "NodeResourcesFit"
STATE_KEY = f"PreFilter{NAME}"
TOO_MANY_PODS = "Too many pods"

Strategy = Literal["LeastAllocated", "MostAllocated", "BalancedAllocation"]


class ResourceWeight(ArgsModel):
    name: str = Field(min_length=1, max_length=253)
    weight: int = Field(default=1, ge=1, le=100)


def _default_resources() -> list[ResourceWeight]:
    return [ResourceWeight(name="cpu", weight=1), ResourceWeight(name="memory", weight=1)]


class ScoringStrategy(ArgsModel):
    type: Strategy = "LeastAllocated"
    resources: list[ResourceWeight] = Field(default_factory=_default_resources, min_length=1, max_length=32)

    @field_validator("resources")
    @classmethod
    def _unique(cls, value: list[ResourceWeight]) -> list[ResourceWeight]:
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError("resource names must be unique")
        return value


class Args(ArgsModel):
    scoring_strategy: ScoringStrategy = Field(default_factory=ScoringStrategy)
    #: resources the filter ignores (e.g. ones an external admission controller manages)
    ignored_resources: list[str] = Field(default_factory=list, max_length=64)


def insufficient(free: IntArray, request: int) -> BoolArray:
    """The pure check: which nodes cannot give ``request`` more of a resource."""
    out: BoolArray = free < request
    return out


def resource_scores(
    strategy: Strategy, requested: IntArray, allocatable: IntArray
) -> tuple[IntArray, BoolArray]:
    """Per-resource scores for one resource over nodes, and where the resource counts (alloc > 0)."""
    counts = allocatable > 0
    safe = np.where(counts, allocatable, 1)
    if strategy == "LeastAllocated":
        score = np.where(requested > allocatable, 0, ((allocatable - requested) * MAX_NODE_SCORE) // safe)
    else:  # MostAllocated
        score = (np.minimum(requested, allocatable) * MAX_NODE_SCORE) // safe
    return np.where(counts, score, 0).astype(np.int64), counts


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args
        self.ignored = frozenset(args.ignored_resources)
        self.strategy = args.scoring_strategy

    def _requests(self, pod: PodInfo) -> list[tuple[str, int]]:
        return [(r, a) for r, a in pod.requests.items() if a > 0 and r not in self.ignored]

    # -- PreFilter / Filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        state.write(STATE_KEY, self._requests(pod))
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        requests: list[tuple[str, int]] | None = state.read(STATE_KEY)
        if requests is None:
            requests = self._requests(pod)
        n = table.n
        out = [
            Rejection(insufficient(table.allocatable[PODS, :n] - table.requested[PODS, :n], 1), TOO_MANY_PODS)
        ]
        for resource, amount in requests:
            r = table.resource_row(resource)
            free = table.allocatable[r, :n] - table.requested[r, :n]
            out.append(Rejection(insufficient(free, amount), f"Insufficient {resource}"))
        return out

    # -- Score ---------------------------------------------------------------------------------
    def _usage(
        self, table: NodeTable, pod: PodInfo, resource: str, rows: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """(requested including the pod, allocatable) on ``rows``; None to leave the resource out."""
        if resource == "cpu":
            req = table.nonzero_requested[0, rows] + pod.nonzero_cpu
            alloc = table.allocatable[CPU, rows]
        elif resource == "memory":
            req = table.nonzero_requested[1, rows] + pod.nonzero_memory
            alloc = table.allocatable[MEMORY, rows]
        else:
            amount = pod.requests.get(resource, 0)
            if amount <= 0 and resource not in ("pods", "ephemeral-storage"):
                return None  # an extended resource the pod does not ask for is not scored
            r = table.resource_row(resource)
            req = table.requested[r, rows] + amount
            alloc = table.allocatable[r, rows]
        return req, alloc

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        m = len(rows)
        if self.strategy.type == "BalancedAllocation":
            return self._balanced(table, pod, rows)
        total = np.zeros(m, dtype=np.int64)
        weights = np.zeros(m, dtype=np.int64)
        for rw in self.strategy.resources:
            usage = self._usage(table, pod, rw.name, rows)
            if usage is None:
                continue
            score, counts = resource_scores(self.strategy.type, *usage)
            total += score * rw.weight
            weights += counts * rw.weight
        out: IntArray = np.where(weights > 0, total // np.maximum(weights, 1), 0)
        return out

    def _balanced(self, table: NodeTable, pod: PodInfo, rows: IntArray) -> IntArray:
        fractions = []
        present = []
        for rw in self.strategy.resources:
            usage = self._usage(table, pod, rw.name, rows)
            if usage is None:
                continue
            req, alloc = usage
            counts = alloc > 0
            fractions.append(np.where(counts, np.minimum(req / np.where(counts, alloc, 1), 1.0), 0.0))
            present.append(counts)
        if not fractions:
            return np.zeros(len(rows), dtype=np.int64)
        f = np.vstack(fractions)
        p = np.vstack(present)
        k = np.maximum(p.sum(axis=0), 1)
        mean = (f * p).sum(axis=0) / k
        std = np.sqrt((((f - mean) ** 2) * p).sum(axis=0) / k)
        out: IntArray = ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.POD_DELETE),)


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(args)


ENTRY = PluginEntry(NAME, new, Args, NodeResourcesFit)
