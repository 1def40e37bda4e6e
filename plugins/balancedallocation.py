"""NodeResourcesBalancedAllocation (PreScore, Score): kube-scheduler's separate plugin, in its
default profile at weight 1 beside NodeResourcesFit's LeastAllocated.

A node scores higher the more the pod would even out the fractions of its resources
(``resources``, by default cpu and memory). As kube-scheduler 1.37: a node's balance is
100 × (1 − the standard deviation of the fractions), and the score is
50 + (50 + balance with the pod − balance without it) / 2 — 75 when the pod changes nothing,
towards 100 when it evens the node out, towards 50 when it tips it over. NodeResourcesFit's
``BalancedAllocation`` strategy computes the same (the same code: a resource the node lacks is left
out; a pod that requests none of the resources is skipped at PreScore). Having it as
a plugin of its own lets a profile score balance *and* packing, as kube-scheduler's default profile
does; ``shoal profiles from-config`` keeps it.

Args are kube-scheduler's ``NodeResourcesBalancedAllocationArgs``: ``resources`` (names unique,
every weight 1; 0 or absent reads as 1, as upstream defaults it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import Field, field_validator

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import EventRegistration, Handle, IntArray
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.plugins import noderesources

NAME = "NodeResourcesBalancedAllocation"


class Resource(ArgsModel):
    name: str = Field(min_length=1, max_length=253)
    weight: int = 1

    @field_validator("weight")
    @classmethod
    def _one(cls, value: int) -> int:
        if value not in (0, 1):
            raise ValueError(f"must be 1, not {value}")
        return 1


def _defaults() -> list[Resource]:
    return [Resource(name="cpu"), Resource(name="memory")]


class Args(ArgsModel):
    resources: list[Resource] = Field(default_factory=_defaults, max_length=32)

    @field_validator("resources")
    @classmethod
    def _unique(cls, value: list[Resource]) -> list[Resource]:
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError("resource names must be unique")
        return value or _defaults()


class NodeResourcesBalancedAllocation:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        weights = [noderesources.ResourceWeight(name=r.name, weight=1) for r in args.resources]
        strategy = noderesources.ScoringStrategy(type="BalancedAllocation", resources=weights)
        self._fit = noderesources.NodeResourcesFit(
            noderesources.Args(scoring_strategy=strategy), handle.cache
        )

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        return self._fit.pre_score(state, pod, rows, table)

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        if not any(pod.requests.get(r.name, 0) > 0 for r in self._fit.strategy.resources):
            # what upstream's PreScore Skip amounts to, should a profile leave PreScore out
            out: IntArray = np.zeros(len(rows), dtype=np.int64)
            return out
        return self._fit.score_nodes(state, pod, table, rows)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return self._fit.events_to_register()


def new(args: Args | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args if args is not None else Args(), handle)


ENTRY = PluginEntry(NAME, new, Args, NodeResourcesBalancedAllocation)
