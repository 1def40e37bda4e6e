"""The extension points, as Protocols a plugin implements (any subset), and the plugin Handle.

A plugin is an object with a ``name`` and one or more of the methods below; which points it
implements is decided by the Protocols, through the table ``EXTENSION_POINTS``. This mirrors kube-scheduler's
``framework/interface.go``; the order of the points in one pod's life is::

    PreEnqueue -> [queue: QueueSort] -> PreFilter -> Filter (every node) -> PostFilter (if none fit)
      -> PreScore -> Score -> NormalizeScore -> x weight -> pick -> assume -> Reserve -> Permit
      => binding cycle (its own asyncio task): wait on the Permit gate -> PreBind -> Bind -> PostBind

Filter and Score come in two forms. The simple form (``filter``/``score``) takes one node, as in
the seed example; the vectorised form (``filter_nodes``/``score_nodes``) takes the whole
:class:`~shoal.core.state.nodetable.NodeTable` and returns arrays. Built-in plugins use the vectorised
form; a plugin may offer either or both (the vectorised one wins).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Flag, auto
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gangplan import GangPlan, GangTrial, PlacementProgress
from shoal.core.framework.gates import WaitingPods
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeInfo, NodeTable
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.core.state.status import Code, Status

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


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
    #: a bound pod now holds less of some resource (an in-place resize down the kubelet reported)
    POD_SCALE_DOWN = auto()
    POD_GROUP_CHANGE = auto()
    PROFILE_CHANGE = auto()
    #: a PersistentVolume, PersistentVolumeClaim, StorageClass or CSINode added, changed or deleted,
    #: or a VolumeAttachment deleted
    STORAGE_CHANGE = auto()
    #: a namespace's labels changed (pod affinity's namespaceSelector)
    NAMESPACE_CHANGE = auto()
    #: a DeviceClass, ResourceSlice or ResourceClaim added, changed or deleted (DynamicResources)
    DRA_CHANGE = auto()

    ANY_NODE = NODE_ADD | NODE_UPDATE | NODE_DELETE
    #: not POD_SCALE_DOWN: only what frees resources registers it (upstream's Add | Update | Delete
    #: of InterPodAffinity and PodTopologySpread leave it out too)
    ANY_POD = POD_ADD | POD_UPDATE | POD_DELETE
    ALL = (
        ANY_NODE
        | ANY_POD
        | POD_SCALE_DOWN
        | POD_GROUP_CHANGE
        | PROFILE_CHANGE
        | STORAGE_CHANGE
        | NAMESPACE_CHANGE
        | DRA_CHANGE
    )


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster that may make a rejected pod schedulable."""

    kind: EventKind
    obj: Any = None  # the PodInfo / NodeSpec / PodGroupInfo / storage object involved, if any


#: A queueing hint: given a rejected pod and an event, may the event make it schedulable?
QueueingHint = Callable[[PodInfo, ClusterEvent], bool]


#: The only pods (by UID) an event can concern, or None when it may concern any pod.
EventTargets = Callable[[ClusterEvent], Collection[str] | None]


@dataclass(frozen=True, slots=True)
class EventRegistration:
    kind: EventKind
    hint: QueueingHint | None = None
    #: narrows which parked pods the queue asks ``hint`` about (say, only the pod the event is
    #: about): with thousands of parked pods, asking every one about every event is quadratic
    targets: EventTargets | None = None


def the_pod_itself(event: ClusterEvent) -> Collection[str] | None:
    """``targets`` of a registration for a pod's own updates: only that pod."""
    uid = getattr(event.obj, "uid", None)
    return (uid,) if isinstance(uid, str) else None


# -- stores ---------------------------------------------------------------------------------------
@runtime_checkable
class Store(Protocol):
    """What a plugin package keeps of the API objects it watches, shared by every profile
    (DynamicResources' devices and claims, the volume plugins' PVs and claims: kube-scheduler's
    DRA manager and shared listers). The core does not know what a store holds: a plugin's registry
    entry names the store classes it reads (``PluginEntry.stores``), the scheduler makes one of
    each in its cache (``ClusterCache.store``), and the informer and the simulator hand every
    object they decode to ``Scheduler.on_object``, which gives it to the store that takes it."""

    #: the typed objects it takes (what the informer and the simulator decode)
    kinds: ClassVar[tuple[type, ...]]

    def apply(self, obj: Any, deleted: bool) -> ClusterEvent | None:
        """Record (or forget, when ``deleted``) one object; the cluster event the change is, for
        the queue's hints (None: nothing a parked pod could wait for)."""
        ...


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
    #: put these parked pods (uids) back into play, PreEnqueue first (kube's ``Activate``); the
    #: scheduler sets it to its queue's
    activate: Callable[[Iterable[str]], None] = field(default=lambda uids: None)


# -- extension points -----------------------------------------------------------------------------
# One Protocol per extension point (as kube-scheduler's interface.go). The table at the end of this
# module, EXTENSION_POINTS, maps each point of a profile to its Protocol(s): profile validation
# checks a plugin class against it, and the Framework builds its typed plugin lists from it.
@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status:
        """When: before the pod enters the active queue (on every add and on every event that
        moves it). Codes: Success admits it; any other code gates it. Failure (any other code, an
        exception or a wrong return) keeps the pod gated, unschedulable, with this plugin named,
        until an event this plugin registered for; gated pods are not retried with backoff."""
        ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        """When: whenever a pod is pushed to the active queue. Order of the active queue: the
        smallest key pops first (kube-scheduler's ``Less(a, b)`` as a key, so the queue can be a
        heap). Exactly one per profile. Returns a key, not a Status: it must not fail."""
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """When: once per cycle, before Filter: precompute into ``state`` or reject the pod outright.
        Codes: Success (with a PreFilterResult, the node names Filter may look at; results of
        several plugins are intersected); Skip: this plugin's Filter is skipped for the pod;
        Unschedulable / UnschedulableAndUnresolvable: the cycle stops at the first rejection, no
        node is tried and PostFilter does not run. Error (or an exception): the pod is requeued
        with backoff."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """When: for each node still feasible, one plugin after another (per-node form; the
        runtime adapts it to the vectorised form once, when the profile is built). Codes: Success,
        Skip (as Success), Unschedulable (may change), UnschedulableAndUnresolvable (won't change).
        The first rejecting plugin's reasons are reported for the node. Error (or an exception)
        on any node aborts the cycle: the pod is requeued with backoff, the node named."""
        ...


@runtime_checkable
class VectorFilterPlugin(Plugin, Protocol):
    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        """Vectorised Filter, run once per cycle over all rows: return the rejected rows and why
        (empty: all fit). ``candidates`` marks the rows still in play; other rows may be ignored.
        Not called once no candidate is left. An exception or a return that is not a sequence of
        Rejection aborts the cycle like a per-node Error."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """When: only when no node fits (preemption and the like), with the diagnosis. Codes:
        Success: something changed, stop here; Unschedulable: nothing to do, the next one runs.
        Runs in order until one succeeds. An Error (or an exception) counts as "nothing to do":
        the pod stays unschedulable either way."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        """When: once per cycle, with the feasible rows to score, before Score (not run when the
        profile has no Score plugin). Codes: Success; Skip: this plugin's Score is skipped for the
        pod. Anything else (or an exception) fails the cycle: the pod is requeued with backoff."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """When: for each feasible node to score (per-node form, adapted once to the vectorised
        form). Rank it, 0..100 after NormalizeScore; the total is weighted. Codes: Success only;
        anything else (or an exception) on any node is an Error naming the plugin and the node:
        the pod is requeued with backoff."""
        ...


@runtime_checkable
class VectorScorePlugin(Plugin, Protocol):
    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        """Vectorised Score: one integer per feasible row (``rows``), in order. An exception, a
        return of the wrong length, or a score outside 0..100 (after NormalizeScore) is an Error
        naming the plugin: the pod is requeued with backoff."""
        ...


@runtime_checkable
class ScoreExtensions(Plugin, Protocol):
    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """Right after this plugin's Score: map raw scores to 0..100 (must not divide by zero when
        all scores are 0). Failing here fails the plugin's Score."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """When: after the pod is assumed on ``node``: claim plugin-held resources. Codes: Success;
        anything else (or an exception) fails the cycle: Unreserve runs for every Reserve plugin,
        in reverse order, the pod is forgotten and requeued (Error: with backoff)."""
        ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo reserve, after any failure once the pod is assumed (Reserve, Permit, the binding
        cycle). Must be idempotent: it may run for a pod never reserved by this plugin. An
        exception is logged and the other plugins' Unreserve still run."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        """When: last step of the scheduling cycle, after Reserve. Codes: Success admits; Skip is
        ignored; Wait parks the pod at a gate for up to the returned timeout (<= 15 min) until a
        plugin allows or rejects it; anything else (or an exception) rejects at once. Rejection or
        timeout: Unreserve, forget, requeue with backoff."""
        ...


@runtime_checkable
class PlacementFeasiblePlugin(Plugin, Protocol):
    def placement_feasible(self, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        """When: in a gang's cycle, after each member is tried inside a trial (a domain), as
        kube-scheduler 1.38's PlacementFeasible. Codes: Wait, the gang may still hold there (try
        the next member); Success, it holds (keep returning Success); Unschedulable, it cannot
        hold there: the members not tried yet are skipped and the next trial begins (its message
        joins the members' FailedScheduling); an exception or Error fails the gang's cycle."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """When: binding cycle, after the Permit gate opened, before Bind (e.g. provision a
        volume). Codes: Success, Skip; anything else (or an exception): Unreserve, forget and
        requeue with backoff."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """When: binding cycle, after PreBind; plugins run in order until one does not Skip.
        Codes: Success: bound; Skip: let the next Bind plugin do it (all skipping is an Error).
        Failure (or an exception): Unreserve and requeue with backoff, unless the Status says
        requeue=False (a 409: someone else bound the pod), then the pod is only forgotten."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """When: after a successful Bind. Informational (clean-up of plugin state): an exception is
        logged and the other PostBind plugins still run."""
        ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> Sequence[EventRegistration]:
        """Queueing hints: the cluster events that may make a pod this plugin rejected schedulable.
        A plugin without this method is asked about every event (kube-scheduler's default)."""
        ...


@runtime_checkable
class GangPlugin(Plugin, Protocol):
    def pod_group(self, pod: PodInfo) -> PodGroupInfo | None:
        """The gang the pod belongs to, if any: its queued members are scheduled in one cycle,
        all-or-nothing (at least ``min_member`` placed, or none)."""
        ...

    def check_group(self, group: PodGroupInfo, members: Sequence[PodInfo]) -> Status:
        """When: at the start of the gang's cycle, before any placement, with its pending
        ``members`` (those already placed are in the cache). Not SUCCESS: the whole gang fails
        this cycle with that status (an error is retried after the backoff, as kube-scheduler
        retries a pod group it finds invalid), no member is placed and nothing is preempted."""
        ...


@runtime_checkable
class GangPlacementPlugin(Plugin, Protocol):
    def constrained(self, group: PodGroupInfo) -> bool:
        """Does the gang carry a placement constraint this plugin enforces (a topology level)?"""
        ...

    def gang_placements(
        self, group: PodGroupInfo, members: Sequence[PodInfo], feasible: BoolArray, need: int
    ) -> GangPlan:
        """When: once per gang cycle, before its members are placed (a Filter plugin of the
        profile implementing it is asked). ``feasible``: the nodes one member passes every Filter
        on; ``need``: members still to place. Returns the trials (node subsets) to place the
        members in, in order; the cycle places them for real inside each trial (the trial is in
        the cycle state, the plugin's Filter enforces it) until the quorum fits. No trial: the gang
        is unschedulable with ``plan.failure``. An exception fails the gang's cycle (requeued)."""
        ...

    def level_placements(
        self, level: str, members: Sequence[PodInfo], feasible: BoolArray, need: int, placed: Sequence[int]
    ) -> GangPlan:
        """When: a CompositePodGroup tree's cycle, for a level with a topology key (its subtree
        goes inside one domain of ``level``). ``members``: the subtree's pending pods; ``need``:
        the fewest of them that must fit; ``placed``: rows of its members already placed (they pin
        the domain). Returns the domains to try in order (whole domains, not packed subsets: the
        children choose their own inside); no trial: ``plan.failure`` says why."""
        ...

    def describe(self, group: PodGroupInfo, trial: GangTrial, rows: Sequence[int]) -> str:
        """What the members' ``Scheduled`` events say about where the gang went (``rows``)."""
        ...


@runtime_checkable
class GangPostFilterPlugin(Plugin, Protocol):
    def post_filter_gang(self, group: PodGroupInfo, members: Sequence[PodInfo], need: int) -> Status:
        """When: a gang's cycle placed fewer than ``need`` of its pending ``members`` (nothing is
        held any more), for the first PostFilter plugin of the profile implementing it (whole-gang
        preemption). Codes as PostFilter's; the message joins the members' FailedScheduling. An
        exception costs the gang its preemption, never the cycle."""
        ...


@runtime_checkable
class ReportsHold(Plugin, Protocol):
    def hold_reason(self, status: Status) -> str | None:
        """How a pod this plugin's PreEnqueue holds is reported: the reason of its event and of
        its ``PodScheduled=False`` condition, or None when it is not reported (the user's own gate,
        a moment's wait). A PreEnqueue plugin without it reports ``NotReadyForScheduling``."""
        ...


@runtime_checkable
class ResourceFilter(Plugin, Protocol):
    def counts_every_resource(self) -> bool:
        """The Filter that weighs a pod's requests against each node's allocatable, with the pod
        count (NodeResourcesFit): does it count every resource a pod requests (its args ignore
        none)? If so, and every other Filter of the profile is blind to the pods a node holds
        (:class:`~shoal.core.framework.contract.Contract`), what-ifs do its arithmetic instead
        of running every Filter: preemption's reprieve, the nominated-pods pass."""
        ...

    def counts_all_of(self, pod: PodInfo) -> bool:
        """Does its arithmetic stand for it on every node for ``pod`` (False when another plugin
        may serve one of the pod's requests on some nodes: DRA-backed extended resources)?"""
        ...


@runtime_checkable
class ImpliesRequests(Plugin, Protocol):
    def implies_filter_requests(self, pod: PodInfo) -> bool:
        """Does this plugin's Filter weigh other pods against ``pod`` for a request the pod does
        not spell out (PodTopologySpread's default hard constraints)? What-ifs (core/framework/whatif.py)
        then treat the pod as one that asks for more than resources."""
        ...


@runtime_checkable
class ExplainsCosts(Plugin, Protocol):
    def explain_costs(self, pod: PodInfo, rows: Sequence[int]) -> dict[int, float]:
        """For ``shoal explain``: the raw cost per row behind this plugin's score (empty: none)."""
        ...


@runtime_checkable
class ExplainsNodes(Plugin, Protocol):
    def explain_nodes(self, pod: PodInfo, rows: Sequence[int]) -> dict[int, str]:
        """For ``shoal explain``: a short note per row (where a figure comes from, why a claim
        cannot be allocated there); rows without a note are left out."""
        ...


P = TypeVar("P", bound=Plugin)


def _methods(proto: type) -> frozenset[str]:
    """The methods a point Protocol asks for (``name``, a data member, is not one of them)."""
    out: set[str] = set()
    for base in proto.__mro__:
        if base is Plugin or not getattr(base, "_is_protocol", False):
            continue
        out.update(k for k, v in vars(base).items() if not k.startswith("_") and callable(v))
    return frozenset(out)


@dataclass(frozen=True)
class ExtensionPoint(Generic[P]):
    """One row of the extension-point table.

    ``key`` is the point's field in a profile (``spec.plugins.<key>``), ``title`` its name in
    kube-scheduler and in the ``extension_point`` metric, ``protocols`` the Protocol(s) a plugin
    implements to take part; with two (vectorised, per-node), the first one a plugin implements
    is used.
    """

    key: str
    title: str
    protocols: tuple[type[P], ...]

    def implemented_by(self, cls: type) -> bool:
        """Does a plugin class implement this point? (Checked on the class, before any instance
        exists; ``isinstance`` cannot be used on a class whose ``name`` is set per instance.)"""
        return any(
            all(getattr(cls, m, None) is not None for m in _methods(proto)) for proto in self.protocols
        )

    def narrow(self, plugin: Plugin) -> P | None:
        """The plugin as this point's Protocol, or None if it does not implement it."""
        for proto in self.protocols:
            if isinstance(plugin, proto):
                return plugin
        return None


PRE_ENQUEUE: ExtensionPoint[PreEnqueuePlugin] = ExtensionPoint(
    "preEnqueue", "PreEnqueue", (PreEnqueuePlugin,)
)
QUEUE_SORT: ExtensionPoint[QueueSortPlugin] = ExtensionPoint("queueSort", "QueueSort", (QueueSortPlugin,))
PRE_FILTER: ExtensionPoint[PreFilterPlugin] = ExtensionPoint("preFilter", "PreFilter", (PreFilterPlugin,))
FILTER: ExtensionPoint[VectorFilterPlugin | FilterPlugin] = ExtensionPoint(
    "filter", "Filter", (VectorFilterPlugin, FilterPlugin)
)
POST_FILTER: ExtensionPoint[PostFilterPlugin] = ExtensionPoint(
    "postFilter", "PostFilter", (PostFilterPlugin,)
)
PRE_SCORE: ExtensionPoint[PreScorePlugin] = ExtensionPoint("preScore", "PreScore", (PreScorePlugin,))
SCORE: ExtensionPoint[VectorScorePlugin | ScorePlugin] = ExtensionPoint(
    "score", "Score", (VectorScorePlugin, ScorePlugin)
)
RESERVE: ExtensionPoint[ReservePlugin] = ExtensionPoint("reserve", "Reserve", (ReservePlugin,))
PERMIT: ExtensionPoint[PermitPlugin] = ExtensionPoint("permit", "Permit", (PermitPlugin,))
PLACEMENT_FEASIBLE: ExtensionPoint[PlacementFeasiblePlugin] = ExtensionPoint(
    "placementFeasible", "PlacementFeasible", (PlacementFeasiblePlugin,)
)
PRE_BIND: ExtensionPoint[PreBindPlugin] = ExtensionPoint("preBind", "PreBind", (PreBindPlugin,))
BIND: ExtensionPoint[BindPlugin] = ExtensionPoint("bind", "Bind", (BindPlugin,))
POST_BIND: ExtensionPoint[PostBindPlugin] = ExtensionPoint("postBind", "PostBind", (PostBindPlugin,))

#: every extension point a profile configures, in the order they run (the single source of truth:
#: profile validation, the Framework's plugin lists and the CRD's fields all come from it)
EXTENSION_POINTS: tuple[ExtensionPoint[Any], ...] = (
    PRE_ENQUEUE,
    QUEUE_SORT,
    PRE_FILTER,
    FILTER,
    POST_FILTER,
    PRE_SCORE,
    SCORE,
    RESERVE,
    PERMIT,
    PLACEMENT_FEASIBLE,
    PRE_BIND,
    BIND,
    POST_BIND,
)
POINTS: tuple[str, ...] = tuple(p.key for p in EXTENSION_POINTS)


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
    #: rows a Filter rejected, and those among them whose status is UnschedulableAndUnresolvable
    #: (preemption tries only the others: kube's ``NodesForStatusCode(Unschedulable)``)
    rejected_rows: BoolArray | None = None
    unresolvable_rows: BoolArray | None = None
    #: plugin -> the rows it rejected (each rejected row by exactly one plugin: the first to)
    rejected_by: dict[str, BoolArray] = field(default_factory=dict)
    #: what the PostFilter plugins said (``preemption: ...``), appended to the message as upstream
    post_filter_message: str = ""

    def message(self) -> str:
        """kube-scheduler's wording: ``0/5 nodes are available: 2 Insufficient cpu, 3 node(s) ...``,
        then the PostFilter's message if any."""
        post = f" {self.post_filter_message}" if self.post_filter_message else ""
        if self.pre_filter_status is not None and not self.reason_counts:
            return f"0/{self.total_nodes} nodes are available: {self.pre_filter_status.message}.{post}"
        if not self.reason_counts:
            return f"0/{self.total_nodes} nodes are available.{post}"
        parts = sorted(f"{count} {reason}" for reason, count in self.reason_counts.items())
        return f"0/{self.total_nodes} nodes are available: {', '.join(parts)}.{post}"
