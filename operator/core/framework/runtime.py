"""The framework runtime: one validated profile's plugins, run with kube-scheduler's semantics.

The Framework runs plugins (kube-scheduler's ``frameworkImpl``); the scheduling algorithm that
combines its points for one pod (feasible nodes, PostFilter, sampling, scoring, host selection)
is :mod:`shoal.core.scheduling.schedule_one`. Semantics kept from kube-scheduler:

* one plugin instance per name, shared by all the points it is listed at; the plugin lists are
  typed and built once, from the table ``EXTENSION_POINTS`` (as ``updatePluginList`` checks that
  each plugin implements its point); per-node Filter/Score plugins are adapted to the vectorised
  form at that moment (:mod:`shoal.core.framework.pernode`), so the cycle has one shape;
* PreFilter/PreScore returning Skip skip that plugin's Filter/Score for the pod;
* the first PreFilter rejection stops the cycle; Filter reports, per node, the first rejecting
  plugin's reasons; Score results are normalised, checked to be 0..100 and weighted;
* Reserve failure runs every Reserve plugin's Unreserve in reverse order;
* Permit Wait creates a gate registered in ``WaitingPods`` at once, so later plugins can open it;
* Bind plugins run until one does not Skip;
* every plugin call goes through one :class:`~shoal.core.framework.invoker.Invoker`: a plugin that raises
  or returns the wrong type is an Error status naming the plugin, never a dead loop; an Error at
  PreFilter, Filter, PreScore or Score aborts the cycle and the pod is retried with backoff;
* a plugin that registers no cluster events is retried on every event (kube's default).

Every point is timed and reported to :class:`~shoal.core.framework.metrics.Metrics`; every plugin call is
timed in one cycle out of ``PLUGIN_METRICS_EVERY`` (kube-scheduler samples 10 % too).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shoal.core.framework.contract import evaluators
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gangplan import GangPlan, GangTrial, PlacementProgress, intersect_plans
from shoal.core.framework.gates import MAX_PERMIT_TIMEOUT, PermitGate
from shoal.core.framework.interfaces import (
    BIND,
    FILTER,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    PERMIT,
    PLACEMENT_FEASIBLE,
    POST_BIND,
    POST_FILTER,
    PRE_BIND,
    PRE_ENQUEUE,
    PRE_FILTER,
    PRE_SCORE,
    QUEUE_SORT,
    RESERVE,
    SCORE,
    BoolArray,
    Diagnosis,
    EnqueueExtensions,
    EventKind,
    EventRegistration,
    ExtensionPoint,
    GangPlacementPlugin,
    GangPlugin,
    GangPostFilterPlugin,
    Handle,
    IntArray,
    P,
    Plugin,
    PreFilterResult,
    ResourceFilter,
    ScoreExtensions,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from shoal.core.framework.invoker import (
    Invoker,
    array_shape,
    none_shape,
    permit_shape,
    pre_filter_shape,
    rejections_shape,
    scores_of,
    status_shape,
)
from shoal.core.framework.metrics import Metrics, NullMetrics
from shoal.core.framework.outcomes import FilterOutcome, FilterStep, ScoreOutcome
from shoal.core.framework.pernode import PerNodeFilter, PerNodeScore
from shoal.core.framework.profile import (
    PluginEntry,
    PluginSet,
    ProfileError,
    ValidatedProfile,
    validate_profile,
)
from shoal.core.state import fidelity
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.core.state.status import SUCCESS, Code, Status

log = logging.getLogger("shoal.framework")

#: per-plugin durations are recorded for one scheduling cycle in this many
PLUGIN_METRICS_EVERY = 10


def _scored(
    plugin: VectorScorePlugin,
    normalize: ScoreExtensions | None,
    state: CycleState,
    pod: PodInfo,
    table: NodeTable,
    rows: IntArray,
) -> IntArray:
    """One Score plugin's call: its scores, normalised (one plugin call for the metrics, as before)."""
    scores = scores_of(plugin.score_nodes(state, pod, table, rows), len(rows))
    if normalize is not None:
        scores = scores_of(normalize.normalize_scores(state, pod, scores), len(rows))
    return scores


def _in_range(scores: IntArray) -> bool:
    return int(scores.min()) >= MIN_NODE_SCORE and int(scores.max()) <= MAX_NODE_SCORE


def _candidates(table: NodeTable, pre: PreFilterResult | None) -> BoolArray:
    """Live rows, limited to the PreFilter result's nodes if there is one."""
    n = table.n
    cand: BoolArray = table.valid[:n].copy()
    if pre is not None and pre.node_names is not None:
        allowed = np.zeros(n, dtype=bool)
        for name in pre.node_names:
            row = table.index.get(name)
            if row is not None:
                allowed[row] = True
        cand &= allowed
    return cand


class Framework:
    """A running profile. Build with :meth:`from_spec`; cheap enough to rebuild on every edit."""

    def __init__(
        self,
        validated: ValidatedProfile,
        registry: Mapping[str, PluginEntry],
        handle: Handle,
        *,
        metrics: Metrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.spec = validated.spec
        self.name = validated.spec.scheduler_name
        self.handle = handle
        self.metrics = metrics or NullMetrics()
        self.invoker = Invoker(self.name, self.metrics)
        self.rng = rng or random.Random()
        self.plugins: dict[str, Plugin] = {}
        for point_refs in validated.points.values():
            for ref in point_refs:
                if ref.name in self.plugins:
                    continue
                self.plugins[ref.name] = registry[ref.name].factory(validated.args.get(ref.name), handle)
        self._errors: list[tuple[str, str]] = []
        #: what each plugin of the profile declares to the core (core/framework/contract.py)
        self.contracts = {name: registry[name].contract for name in self.plugins}
        #: field -> the plugins that evaluate it and where, from every registered plugin (a field
        #: whose plugin the profile leaves out is refused, naming that plugin)
        self.evaluators = evaluators((name, entry.contract) for name, entry in registry.items())
        #: fields whose every evaluator's PreFilter reads the pod alone (what-ifs may share it)
        self.pod_only_fields = frozenset(
            f
            for f, needs in self.evaluators.items()
            if all(registry[name].contract.pod_only_pre_filter for name, _ in needs)
        )
        at = validated.points
        #: extension point -> the names of the plugins listed there (the fidelity check reads it)
        self.at: dict[str, frozenset[str]] = {
            point: frozenset(r.name for r in refs) for point, refs in at.items()
        }
        self.pre_enqueue = self._typed(PRE_ENQUEUE, at)
        queue_sort = self._typed(QUEUE_SORT, at)
        self.pre_filter = self._typed(PRE_FILTER, at)
        filters = self._typed(FILTER, at)
        self.filter: list[VectorFilterPlugin] = [
            p if isinstance(p, VectorFilterPlugin) else PerNodeFilter(p) for p in filters
        ]
        #: the Filter that counts requests against allocatable, if the profile has one
        self.resource_filter = next((p for p in filters if isinstance(p, ResourceFilter)), None)
        #: what-ifs may do the resource Filter's arithmetic instead of running every Filter: it
        #: counts every resource and every Filter is blind to the pods a node holds but for them
        self.arithmetic_what_ifs = (
            self.resource_filter is not None
            and self.resource_filter.counts_every_resource()
            and all(self.contracts[r.name].filter_blind_to_pods for r in at["filter"])
        )
        self.post_filter = self._typed(POST_FILTER, at)
        self.pre_score = self._typed(PRE_SCORE, at)
        weights = {r.name: r.weight or 1 for r in at["score"]}
        #: (plugin in the vectorised form, weight, its NormalizeScore if any)
        self.score: list[tuple[VectorScorePlugin, int, ScoreExtensions | None]] = []
        for p in self._typed(SCORE, at):
            vector = p if isinstance(p, VectorScorePlugin) else PerNodeScore(p)
            normalize = p if isinstance(p, ScoreExtensions) else None
            self.score.append((vector, weights[p.name], normalize))
        self.reserve = self._typed(RESERVE, at)
        self.permit = self._typed(PERMIT, at)
        self.placement_feasible = self._typed(PLACEMENT_FEASIBLE, at)
        self.pre_bind = self._typed(PRE_BIND, at)
        self.bind = self._typed(BIND, at)
        self.post_bind = self._typed(POST_BIND, at)
        if self._errors:  # a plugin whose class was unknown at validation lacks a point's methods
            raise ProfileError(self._errors)
        self.queue_sort = queue_sort[0]
        for plugin in self.plugins.values():  # a plugin that runs its profile's points (preemption)
            if callable(attach := getattr(plugin, "attach_framework", None)):
                attach(self)
        self.percentage = validated.spec.percentage_of_nodes_to_score
        self._gang, self.gang_placers = self._gang_plugins(at)
        self.gang_placer = self.gang_placers[0] if self.gang_placers else None
        self.next_start = 0  # where sampling (placement.sample_rows) starts next: rotates over feasible rows
        self._cycles = 0

    def _typed(self, point: ExtensionPoint[P], refs: Mapping[str, Sequence[Any]]) -> list[P]:
        """The plugins listed at ``point``, as its Protocol (isinstance, once, at build time)."""
        out: list[P] = []
        for i, ref in enumerate(refs[point.key]):
            plugin = point.narrow(self.plugins[ref.name])
            if plugin is None:
                where = f"spec.plugins.{point.key}[{i}].name"
                self._errors.append((where, f'plugin "{ref.name}" does not implement {point.key}'))
            else:
                out.append(plugin)
        return out

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Any],
        registry: Mapping[str, PluginEntry],
        handle: Handle,
        *,
        defaults: PluginSet | None = None,
        metrics: Metrics | None = None,
        rng: random.Random | None = None,
    ) -> Framework:
        validated = validate_profile(spec, registry, defaults)
        return cls(validated, registry, handle, metrics=metrics, rng=rng)

    def new_cycle_state(self) -> CycleState:
        """A CycleState for one pod's cycle; one in PLUGIN_METRICS_EVERY times each plugin call."""
        state = CycleState()
        self._cycles += 1
        state.sample_plugins = self._cycles % PLUGIN_METRICS_EVERY == 0
        return state

    def events(self) -> list[tuple[str, EventRegistration]]:
        """The cluster events each plugin wants; a plugin that says nothing gets every event."""
        out: list[tuple[str, EventRegistration]] = []
        for plugin in self.plugins.values():
            if isinstance(plugin, EnqueueExtensions):
                out.extend((plugin.name, r) for r in plugin.events_to_register())
            else:
                out.append((plugin.name, EventRegistration(EventKind.ALL)))
        return out

    def event_kinds(self) -> EventKind:
        kinds = EventKind(0)
        for _, reg in self.events():
            kinds |= reg.kind
        return kinds

    @property
    def gang_plugin_name(self) -> str:
        return self._gang.name if self._gang is not None else ""

    def refusal(self, pod: PodInfo) -> Status | None:
        """Never silently wrong: why this profile refuses ``pod`` before PreFilter (a field it
        uses whose plugins the profile leaves out: core/state/fidelity.py), or None."""
        if not pod.fields_used:
            return None
        return fidelity.check(pod.fields_used, self.at, self.evaluators)

    def arithmetic_for(self, pod: PodInfo) -> bool:
        """What-ifs may do the resource Filter's arithmetic for ``pod`` (``arithmetic_what_ifs``,
        and the resource Filter counts all of the pod's requests on every node)."""
        fit = self.resource_filter
        return self.arithmetic_what_ifs and fit is not None and fit.counts_all_of(pod)

    def reads_only_the_pod(self, pod: PodInfo) -> bool:
        """Every field ``pod`` uses is evaluated by plugins whose PreFilter reads the pod alone."""
        return all(u.field in self.pod_only_fields for u in pod.fields_used)

    def pod_group(self, pod: PodInfo) -> PodGroupInfo | None:
        if self._gang is None or pod.pod_group is None:
            return None
        return self._gang.pod_group(pod)

    def _gang_plugins(
        self, at: Mapping[str, Sequence[Any]]
    ) -> tuple[GangPlugin | None, list[GangPlacementPlugin]]:
        """The gang plugin, and every gang placer at Filter (a gang's domain: TopologyPlacement),
        the first of which describes where a gang went."""
        gang = next((p for p in self.plugins.values() if isinstance(p, GangPlugin)), None)
        placers = (self.plugins[r.name] for r in sorted(at["filter"], key=lambda r: r.name))
        return gang, [p for p in placers if isinstance(p, GangPlacementPlugin)]

    def gang_placements(
        self, group: PodGroupInfo, members: Sequence[PodInfo], feasible: BoolArray, need: int
    ) -> GangPlan:
        """The trials of every gang placer that constrains ``group``, intersected (kube-scheduler
        1.38 intersects its PlacementGenerate plugins' placements); one trial, anywhere, if none does."""
        plans = [
            (p.name, p.gang_placements(group, members, feasible, need))
            for p in self.gang_placers
            if p.constrained(group)
        ]
        if not plans:
            return GangPlan((GangTrial(None, None, ""),))
        return plans[0][1] if len(plans) == 1 else intersect_plans(plans)

    def check_group(self, group: PodGroupInfo, members: Sequence[PodInfo]) -> Status:
        """The gang plugin's verdict on the whole group before its cycle places anything."""
        if self._gang is None:
            return SUCCESS
        _, status = self.invoker.call(
            "CheckGroup", self._gang.name, False, status_shape, self._gang.check_group, group, members
        )
        return status

    def run_placement_feasible(self, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        """The profile's PlacementFeasible plugins on a gang's progress in one trial: the first
        that says Unschedulable (or fails) ends the trial; else Wait while any waits; else Success
        (and Success when there are none: the trial runs to its last member)."""
        waiting: Status | None = None
        for plugin in self.placement_feasible:
            _, status = self.invoker.call(
                "PlacementFeasible",
                plugin.name,
                False,
                status_shape,
                plugin.placement_feasible,
                group,
                progress,
            )
            if status.is_wait:
                waiting = waiting or status
            elif not status.ok and not status.is_skip:
                return status
        return waiting or SUCCESS

    # -- queue side ----------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        """A failing (or crashing) gate keeps the pod gated, with the reason and the plugin."""
        began = time.perf_counter()
        for plugin in self.pre_enqueue:
            _, status = self.invoker.call(
                "PreEnqueue", plugin.name, False, status_shape, plugin.pre_enqueue, pod
            )
            if not status.ok:
                self.invoker.point("PreEnqueue", began, status)
                return status
        self.invoker.point("PreEnqueue", began, SUCCESS)
        return SUCCESS

    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        return self.queue_sort.sort_key(pod, enqueued)

    # -- scheduling cycle ----------------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        began = time.perf_counter()
        merged: frozenset[str] | None = None
        for plugin in self.pre_filter:
            result, status = self.invoker.call(
                "PreFilter",
                plugin.name,
                state.sample_plugins,
                pre_filter_shape,
                plugin.pre_filter,
                state,
                pod,
            )
            if status.is_skip:
                state.skip_filter.add(plugin.name)
                continue
            if not status.ok:
                self.invoker.point("PreFilter", began, status)
                return None, status
            if result is not None and result.node_names is not None:
                merged = result.node_names if merged is None else merged & result.node_names
        self.invoker.point("PreFilter", began, SUCCESS)
        return (PreFilterResult(merged) if merged is not None else None), SUCCESS

    def find_feasible(
        self, state: CycleState, pod: PodInfo, pre: PreFilterResult | None = None
    ) -> FilterOutcome:
        """Every Filter plugin over the candidate rows (kube's RunFilterPlugins, for all nodes)."""
        began = time.perf_counter()
        table = self.handle.cache.table
        cand = _candidates(table, pre)
        narrowed = pre is not None and pre.node_names is not None
        looked_at = int(np.count_nonzero(cand)) if narrowed else None  # None: every node
        outcome = FilterOutcome(cand, total_nodes=len(table), looked_at=looked_at)
        for plugin in self.filter:
            if plugin.name in state.skip_filter:
                continue
            if not cand.any():
                break
            rejections, status = self.invoker.call(
                "Filter",
                plugin.name,
                state.sample_plugins,
                rejections_shape,
                plugin.filter_nodes,
                state,
                pod,
                table,
                cand,
            )
            if rejections is None:  # raised or returned Error: the cycle stops (pod to backoff)
                outcome.error = status
                outcome.feasible = np.zeros(table.n, dtype=bool)
                self.invoker.point("Filter", began, status)
                return outcome
            if not rejections:
                continue
            before = cand.copy()
            for rej in rejections:
                cand &= ~rej.mask
            outcome.steps.append(FilterStep(plugin.name, before, rejections))
        outcome.feasible = cand
        self.invoker.point("Filter", began, SUCCESS if cand.any() else Status(Code.UNSCHEDULABLE))
        return outcome

    def run_gang_post_filter(self, group: PodGroupInfo, members: Sequence[PodInfo], need: int) -> str:
        """The first PostFilter plugin that handles gangs (:class:`GangPostFilterPlugin`): its
        message (`` preemption: ...``, with a leading space), or ``""``. A plugin that raises costs
        the gang its preemption, never the cycle."""
        for plugin in self.post_filter:
            if isinstance(plugin, GangPostFilterPlugin):
                try:
                    status = plugin.post_filter_gang(group, members, need)
                except Exception:
                    log.exception("post_filter_gang of %s for pod group %s failed", plugin.name, group.key)
                    return ""
                return f" {status.message}" if status.message else ""
        return ""

    def run_post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """Upstream's RunPostFilterPlugins: in order until one succeeds or says the pod cannot be
        helped (UnschedulableAndUnresolvable); otherwise Unschedulable with every plugin's reasons
        (DynamicResources' deallocation, then DefaultPreemption's ``preemption: ...``), naming the
        first plugin that gave one. A plugin that errs or raises ends the chain with its Error (its
        message joins the pod's); it costs the pod this attempt's help, never the cycle."""
        began = time.perf_counter()
        reasons: list[str] = []
        rejector = ""
        for plugin in self.post_filter:
            _, status = self.invoker.call(
                "PostFilter", plugin.name, False, status_shape, plugin.post_filter, state, pod, diagnosis
            )
            if status.ok or not status.is_rejected or status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                status = status.with_plugin(plugin.name)  # an Error too: its message is the pod's
                self.invoker.point("PostFilter", began, status)
                return status
            reasons.extend(status.reasons)
            if not rejector and status.reasons:
                rejector = plugin.name
        status = Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)
        self.invoker.point("PostFilter", began, status)
        return status

    def run_pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray) -> Status:
        began = time.perf_counter()
        table = self.handle.cache.table
        for plugin in self.pre_score:
            _, status = self.invoker.call(
                "PreScore",
                plugin.name,
                state.sample_plugins,
                status_shape,
                plugin.pre_score,
                state,
                pod,
                rows,
                table,
            )
            if status.is_skip:
                state.skip_score.add(plugin.name)
            elif not status.ok:
                self.invoker.point("PreScore", began, status)
                return status
        self.invoker.point("PreScore", began, SUCCESS)
        return SUCCESS

    def run_score(
        self, state: CycleState, pod: PodInfo, rows: IntArray, *, record: bool = False
    ) -> tuple[ScoreOutcome, Status]:
        """PreScore, then each Score plugin (normalised, range-checked, weighted) over ``rows``."""
        total = np.zeros(len(rows), dtype=np.int64)
        outcome = ScoreOutcome(rows, total)
        if not self.score:
            return outcome, SUCCESS
        status = self.run_pre_score(state, pod, rows)
        if not status.ok:
            return outcome, status
        began = time.perf_counter()
        table = self.handle.cache.table
        for plugin, weight, normalize in self.score:
            if plugin.name in state.skip_score:
                continue
            scores, status = self.invoker.call(
                "Score",
                plugin.name,
                state.sample_plugins,
                array_shape,
                _scored,
                plugin,
                normalize,
                state,
                pod,
                table,
                rows,
            )
            if scores is not None and len(scores) and not _in_range(scores):
                status = Status.error(
                    f"plugin {plugin.name} returned a score outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}",
                    plugin.name,
                )
            if scores is None or not status.ok:
                self.invoker.point("Score", began, status)
                return outcome, status
            if record:
                outcome.by_plugin[plugin.name] = scores.copy()
            total += scores * weight
        self.invoker.point("Score", began, SUCCESS)
        return outcome, SUCCESS

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.reserve:
            _, status = self.invoker.call(
                "Reserve", plugin.name, state.sample_plugins, status_shape, plugin.reserve, state, pod, node
            )
            if not status.ok:
                self.run_unreserve(state, pod, node)
                self.invoker.point("Reserve", began, status)
                return status
        self.invoker.point("Reserve", began, SUCCESS)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order; one that raises does not stop the rest."""
        began = time.perf_counter()
        for plugin in reversed(self.reserve):
            _, status = self.invoker.call(
                "Unreserve", plugin.name, False, none_shape, plugin.unreserve, state, pod, node
            )
            if not status.ok:
                log.error(
                    "Unreserve of %s for %s failed (%s); continuing", plugin.name, pod.key, status.message
                )
        self.invoker.point("Unreserve", began, SUCCESS)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, PermitGate | None]:
        began = time.perf_counter()
        waits: dict[str, float] = {}
        for plugin in self.permit:
            timeout, status = self.invoker.call(
                "Permit", plugin.name, state.sample_plugins, permit_shape, plugin.permit, state, pod, node
            )
            if status.is_wait:
                waits[plugin.name] = min(timeout or 0.0, MAX_PERMIT_TIMEOUT)
            elif not status.ok and not status.is_skip:
                self.invoker.point("Permit", began, status)
                return status, None
        if not waits:
            self.invoker.point("Permit", began, SUCCESS)
            return SUCCESS, None
        gate = PermitGate(pod, node, waits)
        self.handle.waiting.add(gate)
        status = Status.wait(plugin=",".join(waits))
        self.invoker.point("Permit", began, status)
        return status, gate

    # -- binding cycle -------------------------------------------------------------------------
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.pre_bind:
            _, status = await self.invoker.acall(
                "PreBind", plugin.name, state.sample_plugins, status_shape, plugin.pre_bind, state, pod, node
            )
            if not status.ok and not status.is_skip:
                self.invoker.point("PreBind", began, status)
                return status
        self.invoker.point("PreBind", began, SUCCESS)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.bind:
            _, status = await self.invoker.acall(
                "Bind", plugin.name, state.sample_plugins, status_shape, plugin.bind, state, pod, node
            )
            if status.is_skip:
                continue
            status = status.with_plugin(plugin.name)
            self.invoker.point("Bind", began, status)
            return status
        status = Status.error("no Bind plugin bound the pod")
        self.invoker.point("Bind", began, status)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational: a PostBind that raises is logged and the others still run."""
        began = time.perf_counter()
        for plugin in self.post_bind:
            _, status = self.invoker.call(
                "PostBind", plugin.name, False, none_shape, plugin.post_bind, state, pod, node
            )
            if not status.ok:
                log.error(
                    "PostBind of %s for %s failed (%s); continuing", plugin.name, pod.key, status.message
                )
        self.invoker.point("PostBind", began, SUCCESS)
