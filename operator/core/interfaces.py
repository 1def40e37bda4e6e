"""The extension points, as Protocols a plugin implements (any subset), and the plugin Handle.

A plugin is an object with a ``name`` and one or more of the methods below; the runtime finds
which points it implements by the methods it has. This mirrors kube-scheduler's
``framework/interface.go``; the order of the points in one pod's life is::

    PreEnqueue -> [queue: QueueSort] -> PreFilter -> Filter (every node) -> PostFilter (if none fit)
      -> PreScore -> Score -> NormalizeScore -> x weight -> pick -> assume -> Reserve -> Permit
      => binding cycle (its own asyncio task): wait on the Permit gate -> PreBind -> Bind -> PostBind

Filter and Score come in two forms. The simple form (``filter``/``score``) takes one node, as in
the seed example; the vectorised form (``filter_nodes``/``score_nodes``) takes the whole
:class:`~shoal.core.nodetable.NodeTable` and returns arrays. Built-in plugins use the vectorised
form; a plugin may offer either or both (the vectorised one wins).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from shoal.core.objects import PodGroupInfo, PodInfo
from shoal.core.status import Code, Status

if TYPE_CHECKING:
    from shoal.core.cache import ClusterCache
    from shoal.core.cyclestate import CycleState
    from shoal.core.gates import WaitingPods
    from shoal.core.nodetable import NodeInfo, NodeTable

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
#: kube-scheduler caps a Permit wait at 15 minutes.
MAX_PERMIT_TIMEOUT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Rejection:
    """Nodes a vectorised Filter rejects (``mask`` over table rows) and why, in kube wording."""

    mask: BoolArray
    reason: str
    code: Code = Code.UNSCHEDULABLE


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Limits the nodes Filter looks at (``None``: all nodes)."""

    node_names: frozenset[str] | None = None


# -- queueing hints -------------------------------------------------------------------------------
class EventKind(Flag):
    NODE_ADD = auto()
    NODE_UPDATE = auto()
    NODE_DELETE = auto()
    POD_ADD = auto()
    POD_UPDATE = auto()
    POD_DELETE = auto()
    POD_GROUP_CHANGE = auto()
    PROFILE_CHANGE = auto()

    ANY_NODE = NODE_ADD | NODE_UPDATE | NODE_DELETE
    ANY_POD = POD_ADD | POD_UPDATE | POD_DELETE
    ALL = ANY_NODE | ANY_POD | POD_GROUP_CHANGE | PROFILE_CHANGE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster that may make a rejected pod schedulable."""

    kind: EventKind
    obj: Any = None  # the PodInfo / NodeSpec / PodGroupInfo involved, if any


#: A queueing hint: given a rejected pod and an event, may the event make it schedulable?
QueueingHint = Callable[[PodInfo, ClusterEvent], bool]


@dataclass(frozen=True, slots=True)
class EventRegistration:
    kind: EventKind
    hint: QueueingHint | None = None


# -- the plugin handle ----------------------------------------------------------------------------
class Binder(Protocol):
    """Writes a binding (the Kubernetes adapter posts a v1 Binding; the simulator updates memory).

    Returns Success, or Error; ``Status.error(..., requeue=False)`` for a 409 (someone else bound it).
    """

    async def bind(self, pod: PodInfo, node: str) -> Status: ...


@dataclass
class Handle:
    """What a plugin factory receives: the cache, the waiting pods and the binder."""

    cache: ClusterCache
    waiting: WaitingPods
    binder: Binder
    clock: Callable[[], float]
    extras: dict[str, Any] = field(default_factory=dict)


# -- extension points -----------------------------------------------------------------------------
@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """Before the pod enters the active queue. Success admits it; any other code gates it
        (it waits, unschedulable, until an event this plugin registered for). No Error retries."""
        ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        """Order of the active queue: the smallest key pops first. Exactly one per profile.
        (kube-scheduler's ``Less(a, b)`` as a key, so the queue can be a heap.)"""
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Once per cycle, before Filter: precompute into ``state``, or reject the pod outright.
        Skip: this plugin's Filter is skipped for the pod. Unschedulable / Unresolvable: the cycle
        stops, no node is tried. Error: the pod is requeued with backoff."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """Can the pod run on this node? Success, Unschedulable (may change),
        UnschedulableAndUnresolvable (won't change), Error. Nodes are rejected one plugin at a time:
        the first rejecting plugin's reasons are reported for the node."""
        ...


@runtime_checkable
class VectorFilterPlugin(Plugin, Protocol):
    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        """Vectorised Filter over all rows: return the rejected rows and why (empty: all fit).
        ``candidates`` marks the rows still in play; other rows may be ignored."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """Only when no node fits (preemption and the like). Success: something changed, retry soon;
        Unschedulable: nothing to do. Runs in order until one succeeds."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        """Once, with the feasible rows, before Score. Skip skips this plugin's Score; Error fails."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """Rank one feasible node, 0..100 after NormalizeScore. Error fails the cycle."""
        ...


@runtime_checkable
class VectorScorePlugin(Plugin, Protocol):
    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        """Vectorised Score: one integer per feasible row (``rows``), in order."""
        ...


@runtime_checkable
class ScoreExtensions(Plugin, Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """Map raw scores to 0..100 (must not divide by zero when all scores are 0)."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """After the pod is assumed on ``node``: claim plugin-held resources. Non-success fails the
        cycle and Unreserve runs for every Reserve plugin, in reverse order."""
        ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo reserve. Must be idempotent: it may run for a pod never reserved by this plugin."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """Last step of the cycle. Success admits, Wait parks the pod at a gate for up to the
        returned timeout (<= 15 min) until a plugin allows or rejects it; anything else rejects.
        Rejection or timeout: Unreserve, forget, requeue with backoff."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Binding cycle, before Bind (e.g. provision a volume). Failure: Unreserve and requeue."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """Bind the pod. Skip: let the next Bind plugin do it. Failure: Unreserve and requeue
        (unless the Status says requeue=False: someone else bound the pod)."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational, after a successful Bind (clean-up of plugin state)."""
        ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> Sequence[EventRegistration]:
        """Queueing hints: the cluster events that may make a pod this plugin rejected schedulable."""
        ...


@runtime_checkable
class GangPlugin(Plugin, Protocol):
    def pod_group(self, pod: PodInfo) -> PodGroupInfo | None:
        """The gang the pod belongs to, if any: its queued members are scheduled in one cycle,
        all-or-nothing (at least ``min_member`` placed, or none)."""
        ...


# -- diagnosis ------------------------------------------------------------------------------------
@dataclass
class Diagnosis:
    """Why a pod fits nowhere: per reason, how many nodes; per node, its reasons and plugin."""

    total_nodes: int = 0
    reason_counts: dict[str, int] = field(default_factory=dict)
    node_reasons: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    pre_filter_status: Status | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    unresolvable: bool = False

    def message(self) -> str:
        """kube-scheduler's wording: ``0/5 nodes are available: 2 Insufficient cpu, 3 node(s) ...``."""
        if self.pre_filter_status is not None and not self.reason_counts:
            return f"0/{self.total_nodes} nodes are available: {self.pre_filter_status.message}."
        if not self.reason_counts:
            return f"0/{self.total_nodes} nodes are available."
        parts = sorted(f"{count} {reason}" for reason, count in self.reason_counts.items())
        return f"0/{self.total_nodes} nodes are available: {', '.join(parts)}."
