"""NetworkLatency (PreScore, Score): a pod goes close, by network cost, to the pods it talks to.

Its peers are the placed members of its gang (its PodGroup) and, when given, the placed pods of its
namespace that match a label selector: the pod's annotation ``shoal.dev/talks-to: app=ps,role=db``
(equality terms; a bare ``key`` means the label exists), or else this plugin's ``peerSelector`` arg
(a ``metav1.LabelSelector``). The cost between two nodes is the cost of the tightest topology level
they share (``levelCosts``: same node < same NVLink clique < same rack < same block < same zone, and
``acrossCost`` between zones; :class:`~shoal.plugins.topologyplacement.domains.CostModel`). Score: the node
whose summed cost to the peers is lowest gets 100, the highest 0, linearly between. No peer placed: Skip.

Vectorised: one ``bincount`` per level over the peers' nodes (no loop over peers per node).
A malformed annotation is ignored with a note in the pod's events (``problems``), as a malformed
``shoal.dev/gpu-memory-gb`` is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import Field

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import MAX_NODE_SCORE, Handle, IntArray
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import POD_GROUP_LABEL, TALKS_TO_ANNOTATION, PodInfo
from shoal.core.state.selectors import LabelSelector, SelectorError, parse_equality_selector, parse_selector
from shoal.core.state.status import SUCCESS, Status
from shoal.plugins.topologyplacement.domains import (
    DEFAULT_ACROSS_COST,
    LevelCost,
    cost_model,
    default_level_costs,
)

NAME = "NetworkLatency"
STATE_KEY = f"PreScore{NAME}"


class Args(ArgsModel):
    level_costs: list[LevelCost] = Field(
        default_factory=default_level_costs,
        max_length=16,
        description="Network cost per level, tightest first.",
    )
    across_cost: float = Field(
        default=DEFAULT_ACROSS_COST, gt=0, description="Cost between nodes sharing no level."
    )
    peer_selector: dict[str, Any] | None = Field(
        default=None, description="A label selector: the pods (same namespace) every pod should be close to."
    )
    gang_members: bool = Field(
        default=True, description="Count the placed members of the pod's gang as peers."
    )

    def selector(self) -> LabelSelector | None:
        return parse_selector(self.peer_selector) if self.peer_selector else None


def talks_to(pod: PodInfo) -> LabelSelector | None:
    value = pod.annotations.get(TALKS_TO_ANNOTATION)
    if not value:
        return None
    try:
        return parse_equality_selector(value)
    except SelectorError:  # recorded in pod.problems when parsed: the events say it was ignored
        return None


def peer_rows(
    cache: ClusterCache, pod: PodInfo, selector: LabelSelector | None, gang: bool
) -> dict[int, int]:
    """Table row -> how many of the pod's peers are placed there."""
    table = cache.table
    peers: dict[int, int] = {}

    def add(node: str, count: int) -> None:
        row = table.index.get(node)
        if row is not None:
            peers[row] = peers.get(row, 0) + count

    if gang and pod.group_key is not None:
        for member in cache.group_members(pod.group_key):
            node = cache.placed_node(member.uid)
            if node is not None and member.uid != pod.uid:
                add(node, 1)
    if selector is not None:
        for placed in cache.placed_sets.sets([pod.namespace]):
            in_gang = (
                gang and pod.pod_group is not None and placed.labels.get(POD_GROUP_LABEL) == pod.pod_group
            )
            if not in_gang and selector.matches(placed.labels):  # gang members are counted above
                for node, count in placed.nodes.items():
                    add(node, count)
    return peers


def closeness(cost: np.ndarray[Any, np.dtype[np.float64]]) -> IntArray:
    """Lowest cost -> 100, highest -> 0; all equal -> 0 (no node is closer)."""
    lo, hi = float(cost.min()), float(cost.max())
    if hi <= lo:
        return np.zeros(len(cost), dtype=np.int64)
    scores: IntArray = np.rint((hi - cost) * MAX_NODE_SCORE / (hi - lo)).astype(np.int64)
    return scores


class NetworkLatency:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.cache = handle.cache
        self.costs = cost_model(args.level_costs, args.across_cost)
        self.selector = args.selector()

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        selector = talks_to(pod) or self.selector
        peers = peer_rows(self.cache, pod, selector, self.args.gang_members)
        if not peers:
            return Status.skip()
        state.write(STATE_KEY, peers)
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        peers: Mapping[int, int] = state.require(STATE_KEY)
        return closeness(self.costs.cost_to(table, peers)[rows])

    def explain_costs(self, pod: PodInfo, rows: Sequence[int]) -> dict[int, float]:
        """Each row's summed network cost to the pod's placed peers (explain prints it)."""
        peers = peer_rows(self.cache, pod, talks_to(pod) or self.selector, self.args.gang_members)
        if not peers:
            return {}
        cost = self.costs.cost_to(self.cache.table, peers)
        return {int(r): float(cost[r]) for r in rows}


def new(args: Args, handle: Handle) -> NetworkLatency:
    return NetworkLatency(args, handle)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(evaluates=(Evaluates(fidelity.annotation(TALKS_TO_ANNOTATION), "score"),))
ENTRY = PluginEntry(NAME, new, Args, NetworkLatency, contract=CONTRACT)
