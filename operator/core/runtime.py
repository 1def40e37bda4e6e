"""The framework runtime: one validated profile's plugins, run with kube-scheduler's semantics.

Semantics kept from kube-scheduler's ``frameworkImpl``:

* one plugin instance per name, shared by all the points it is listed at;
* PreFilter/PreScore returning Skip skip that plugin's Filter/Score for the pod;
* the first PreFilter rejection stops the cycle; Filter reports, per node, the first rejecting
  plugin's reasons; Score results are normalised, checked to be 0..100 and weighted;
* Reserve failure runs every Reserve plugin's Unreserve in reverse order;
* Permit Wait creates a gate registered in ``WaitingPods`` at once, so later plugins can open it;
* Bind plugins run until one does not Skip;
* a plugin that raises is an Error status naming the plugin, never a dead loop; an Error at
  PreFilter, Filter, PreScore or Score aborts the cycle and the pod is retried with backoff;
* a plugin that registers no cluster events is retried on every event (kube's default).

Every point is timed and reported to :class:`~shoal.core.metrics.Metrics`; every plugin call is
timed in one cycle out of ``PLUGIN_METRICS_EVERY`` (kube-scheduler samples 10 % too).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.core.cyclestate import CycleState
from shoal.core.gates import PermitGate
from shoal.core.interfaces import (
    MAX_NODE_SCORE,
    MAX_PERMIT_TIMEOUT,
    MIN_NODE_SCORE,
    BoolArray,
    Diagnosis,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    Plugin,
    PreFilterResult,
    Rejection,
)
from shoal.core.metrics import Metrics, NullMetrics
from shoal.core.objects import PodGroupInfo, PodInfo
from shoal.core.profile import PluginEntry, PluginSet, ValidatedProfile, validate_profile
from shoal.core.status import SUCCESS, Code, Status

log = logging.getLogger("shoal.framework")

#: per-plugin durations are recorded for one scheduling cycle in this many
PLUGIN_METRICS_EVERY = 10


def _crash(plugin: Plugin, exc: Exception) -> Status:
    return Status.error(f"{type(exc).__name__}: {exc}", plugin.name)


def _checked(plugin: Plugin, value: object) -> Status:
    """A plugin's return value as a Status; anything else (a forgotten ``return``) is its Error."""
    if isinstance(value, Status):
        return value
    return Status.error(f"returned {value!r} instead of a Status", plugin.name)


class _FilterError(Exception):
    """A per-node Filter returned Error: the cycle stops (the pod goes to backoff)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


@dataclass
class _FilterStep:
    plugin: str
    before: BoolArray
    rejections: Sequence[Rejection]


@dataclass
class FilterOutcome:
    """Feasible rows and enough to explain the rejected ones."""

    feasible: BoolArray
    steps: list[_FilterStep] = field(default_factory=list)
    pre_filter_status: Status | None = None
    total_nodes: int = 0
    #: a Filter plugin failed (raised or returned Error): the cycle is aborted with this status
    error: Status | None = None

    def diagnosis(self, names: Sequence[str | None] | None = None) -> Diagnosis:
        """Reasons per node count (and per node name, when ``names`` is given)."""
        diag = Diagnosis(total_nodes=self.total_nodes, pre_filter_status=self.pre_filter_status)
        if self.pre_filter_status is not None:
            diag.unschedulable_plugins.add(self.pre_filter_status.plugin)
            diag.unresolvable = self.pre_filter_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            return diag
        resolvable = False
        for step in self.steps:
            for rej in step.rejections:
                hit = rej.mask & step.before
                count = int(np.count_nonzero(hit))
                if not count:
                    continue
                diag.unschedulable_plugins.add(step.plugin)
                diag.reason_counts[rej.reason] = diag.reason_counts.get(rej.reason, 0) + count
                if rej.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    resolvable = True
                if names is not None:
                    for row in np.flatnonzero(hit):
                        name = names[int(row)]
                        if name is None:
                            continue
                        plugin, reasons = diag.node_reasons.get(name, (step.plugin, ()))
                        diag.node_reasons[name] = (plugin, (*reasons, rej.reason))
        diag.unresolvable = bool(diag.reason_counts) and not resolvable
        return diag


@dataclass
class ScoreOutcome:
    rows: IntArray
    total: IntArray
    by_plugin: dict[str, IntArray] = field(default_factory=dict)


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
        self.rng = rng or random.Random()
        self.plugins: dict[str, Plugin] = {}
        for point_refs in validated.points.values():
            for ref in point_refs:
                if ref.name in self.plugins:
                    continue
                self.plugins[ref.name] = registry[ref.name].factory(validated.args.get(ref.name), handle)

        def at(point: str) -> list[Plugin]:
            return [self.plugins[r.name] for r in validated.points[point]]

        self.pre_enqueue = at("preEnqueue")
        self.queue_sort = at("queueSort")[0]
        self.pre_filter = at("preFilter")
        self.filter = at("filter")
        self.post_filter = at("postFilter")
        self.pre_score = at("preScore")
        self.score = [(self.plugins[r.name], r.weight or 1) for r in validated.points["score"]]
        self.reserve = at("reserve")
        self.permit = at("permit")
        self.pre_bind = at("preBind")
        self.bind = at("bind")
        self.post_bind = at("postBind")
        self.percentage = validated.spec.percentage_of_nodes_to_score
        self._gang = next((p for p in self.plugins.values() if hasattr(p, "pod_group")), None)
        self._next_start = 0
        self._cycles = 0

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

    # -- helpers -------------------------------------------------------------------------------
    def _timed(self, point: str, began: float, status: Status) -> None:
        self.metrics.extension_point(point, status.code.title, self.name, time.perf_counter() - began)

    def _plugin_timed(self, state: CycleState, point: str, name: str, began: float, status: Status) -> None:
        if state.sample_plugins:
            self.metrics.plugin(name, point, status.code.title, time.perf_counter() - began)

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
            reg = getattr(plugin, "events_to_register", None)
            if reg is not None:
                out.extend((plugin.name, r) for r in reg())
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

    def pod_group(self, pod: PodInfo) -> PodGroupInfo | None:
        if self._gang is None or pod.pod_group is None:
            return None
        group: PodGroupInfo | None = self._gang.pod_group(pod)
        return group

    # -- queue side ----------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        began = time.perf_counter()
        for plugin in self.pre_enqueue:
            try:
                status = _checked(plugin, plugin.pre_enqueue(pod))  # type: ignore[attr-defined]
            except Exception as exc:  # a crashing gate keeps the pod gated, with the reason
                status = _crash(plugin, exc)
            if not status.ok:
                status = status.with_plugin(plugin.name)
                self._timed("PreEnqueue", began, status)
                return status
        self._timed("PreEnqueue", began, SUCCESS)
        return SUCCESS

    def sort_key(self, pod: PodInfo, enqueued: float) -> tuple[Any, ...]:
        key: tuple[Any, ...] = self.queue_sort.sort_key(pod, enqueued)  # type: ignore[attr-defined]
        return key

    # -- scheduling cycle ----------------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        began = time.perf_counter()
        merged: frozenset[str] | None = None
        for plugin in self.pre_filter:
            one = time.perf_counter()
            try:
                result, raw = plugin.pre_filter(state, pod)  # type: ignore[attr-defined]
                status = _checked(plugin, raw)
            except Exception as exc:  # a plugin bug must not kill the loop
                status, result = _crash(plugin, exc), None
            self._plugin_timed(state, "PreFilter", plugin.name, one, status)
            if status.is_skip:
                state.skip_filter.add(plugin.name)
                continue
            if not status.ok:
                status = status.with_plugin(plugin.name)
                self._timed("PreFilter", began, status)
                return None, status
            if result is not None and result.node_names is not None:
                merged = result.node_names if merged is None else merged & result.node_names
        self._timed("PreFilter", began, SUCCESS)
        return (PreFilterResult(merged) if merged is not None else None), SUCCESS

    def find_feasible(
        self, state: CycleState, pod: PodInfo, pre: PreFilterResult | None = None
    ) -> FilterOutcome:
        began = time.perf_counter()
        table = self.handle.cache.table
        n = table.n
        cand = table.valid[:n].copy()
        if pre is not None and pre.node_names is not None:
            allowed = np.zeros(n, dtype=bool)
            for name in pre.node_names:
                row = table.index.get(name)
                if row is not None:
                    allowed[row] = True
            cand &= allowed
        outcome = FilterOutcome(cand, total_nodes=len(table))
        for plugin in self.filter:
            if plugin.name in state.skip_filter:
                continue
            if not cand.any():
                break
            one = time.perf_counter()
            vector = getattr(plugin, "filter_nodes", None)
            try:
                if vector is not None:
                    rejections = vector(state, pod, table, cand)
                else:
                    rejections = self._filter_per_node(plugin, state, pod, cand)
            except _FilterError as err:
                outcome.error = err.status
            except Exception as exc:
                outcome.error = _crash(plugin, exc)
            if outcome.error is not None:
                self._plugin_timed(state, "Filter", plugin.name, one, outcome.error)
                self._timed("Filter", began, outcome.error)
                outcome.feasible = np.zeros(n, dtype=bool)
                return outcome
            self._plugin_timed(state, "Filter", plugin.name, one, SUCCESS)
            if not rejections:
                continue
            before = cand.copy()
            for rej in rejections:
                cand &= ~rej.mask
            outcome.steps.append(_FilterStep(plugin.name, before, rejections))
        outcome.feasible = cand
        self._timed("Filter", began, SUCCESS if cand.any() else Status(Code.UNSCHEDULABLE))
        return outcome

    def _filter_per_node(
        self, plugin: Plugin, state: CycleState, pod: PodInfo, cand: BoolArray
    ) -> list[Rejection]:
        table = self.handle.cache.table
        masks: dict[tuple[str, Code], BoolArray] = {}
        for row in np.flatnonzero(cand):
            try:
                status = _checked(plugin, plugin.filter(state, pod, table.node_info(int(row))))  # type: ignore[attr-defined]
            except Exception as exc:
                status = _crash(plugin, exc)
            if status.ok or status.is_skip:
                continue
            if status.code is Code.ERROR:  # as kube-scheduler: an Error aborts the cycle
                name = table.name(int(row))
                raise _FilterError(Status.error(f"{status.message} (node {name})".strip(), plugin.name))
            code = status.code
            for reason in status.reasons or (f"node(s) rejected by {plugin.name}",):
                mask = masks.get((reason, code))
                if mask is None:
                    mask = masks[(reason, code)] = np.zeros(cand.shape[0], dtype=bool)
                mask[row] = True
        return [Rejection(m, reason, code) for (reason, code), m in masks.items()]

    def run_post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        began = time.perf_counter()
        status = Status.unschedulable()
        for plugin in self.post_filter:
            try:
                status = _checked(plugin, plugin.post_filter(state, pod, diagnosis))  # type: ignore[attr-defined]
            except Exception as exc:  # the pod stays unschedulable; the next PostFilter may try
                status = _crash(plugin, exc)
            if status.ok:
                status = status.with_plugin(plugin.name)
                break
        self._timed("PostFilter", began, status)
        return status

    def sample(self, state: CycleState, feasible: BoolArray) -> IntArray:
        """Feasible rows to score: all by default, or percentageOfNodesToScore from a rotating start."""
        rows: IntArray = np.flatnonzero(feasible).astype(np.int64, copy=False)
        if self.percentage >= 100 or len(rows) <= 100:
            return rows
        want = max(100, (len(rows) * self.percentage) // 100)
        start = self._next_start % len(rows)
        self._next_start = start + want
        return np.roll(rows, -start)[:want]

    def run_score(
        self, state: CycleState, pod: PodInfo, rows: IntArray, *, record: bool = False
    ) -> tuple[ScoreOutcome, Status]:
        table = self.handle.cache.table
        total = np.zeros(len(rows), dtype=np.int64)
        outcome = ScoreOutcome(rows, total)
        if not self.score:
            return outcome, SUCCESS
        began = time.perf_counter()
        for plugin in self.pre_score:
            one = time.perf_counter()
            try:
                status = _checked(plugin, plugin.pre_score(state, pod, rows, table))  # type: ignore[attr-defined]
            except Exception as exc:
                status = _crash(plugin, exc)
            self._plugin_timed(state, "PreScore", plugin.name, one, status)
            if status.is_skip:
                state.skip_score.add(plugin.name)
            elif not status.ok:
                status = status.with_plugin(plugin.name)
                self._timed("PreScore", began, status)
                return outcome, status
        self._timed("PreScore", began, SUCCESS)
        began = time.perf_counter()
        for plugin, weight in self.score:
            if plugin.name in state.skip_score:
                continue
            one = time.perf_counter()
            try:
                scores = self._score_one(plugin, state, pod, rows)
                norm = getattr(plugin, "normalize_scores", None)
                if norm is not None:
                    scores = norm(state, pod, scores)
            except Exception as exc:
                status = _crash(plugin, exc)
                self._timed("Score", began, status)
                return outcome, status
            self._plugin_timed(state, "Score", plugin.name, one, SUCCESS)
            if len(scores) and (int(scores.min()) < MIN_NODE_SCORE or int(scores.max()) > MAX_NODE_SCORE):
                status = Status.error(
                    f"plugin {plugin.name} returned a score outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}",
                    plugin.name,
                )
                self._timed("Score", began, status)
                return outcome, status
            if record:
                outcome.by_plugin[plugin.name] = scores.copy()
            total += scores * weight
        self._timed("Score", began, SUCCESS)
        return outcome, SUCCESS

    def _score_one(self, plugin: Plugin, state: CycleState, pod: PodInfo, rows: IntArray) -> IntArray:
        vector = getattr(plugin, "score_nodes", None)
        if vector is not None:
            out: IntArray = np.asarray(vector(state, pod, self.handle.cache.table, rows), dtype=np.int64)
            return out
        table = self.handle.cache.table
        scores = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            value, status = plugin.score(state, pod, table.node_info(int(row)))  # type: ignore[attr-defined]
            if not status.ok:
                raise RuntimeError(status.message or f"score failed on {table.name(int(row))}")
            scores[i] = int(value)
        return scores

    def select_host(self, outcome: ScoreOutcome) -> int:
        """The row with the highest total score; ties broken at random (like kube-scheduler)."""
        total = outcome.total
        if len(total) == 1:
            return int(outcome.rows[0])
        best = np.flatnonzero(total == total.max())
        pick = best[0] if len(best) == 1 else best[self.rng.randrange(len(best))]
        return int(outcome.rows[pick])

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.reserve:
            one = time.perf_counter()
            try:
                status = _checked(plugin, plugin.reserve(state, pod, node))  # type: ignore[attr-defined]
            except Exception as exc:
                status = _crash(plugin, exc)
            self._plugin_timed(state, "Reserve", plugin.name, one, status)
            if not status.ok:
                status = status.with_plugin(plugin.name)
                self.run_unreserve(state, pod, node)
                self._timed("Reserve", began, status)
                return status
        self._timed("Reserve", began, SUCCESS)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order; one that raises does not stop the rest."""
        began = time.perf_counter()
        for plugin in reversed(self.reserve):
            try:
                plugin.unreserve(state, pod, node)  # type: ignore[attr-defined]
            except Exception:
                log.exception("Unreserve of %s for %s raised; continuing", plugin.name, pod.key)
        self._timed("Unreserve", began, SUCCESS)

    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, PermitGate | None]:
        began = time.perf_counter()
        waits: dict[str, float] = {}
        for plugin in self.permit:
            one = time.perf_counter()
            try:
                raw, timeout = plugin.permit(state, pod, node)  # type: ignore[attr-defined]
                status, timeout = _checked(plugin, raw), float(timeout)
            except Exception as exc:
                status, timeout = _crash(plugin, exc), 0.0
            self._plugin_timed(state, "Permit", plugin.name, one, status)
            if status.is_wait:
                waits[plugin.name] = min(float(timeout), MAX_PERMIT_TIMEOUT)
            elif not status.ok and not status.is_skip:
                status = status.with_plugin(plugin.name)
                self._timed("Permit", began, status)
                return status, None
        if not waits:
            self._timed("Permit", began, SUCCESS)
            return SUCCESS, None
        gate = PermitGate(pod, node, waits)
        self.handle.waiting.add(gate)
        status = Status.wait(plugin=",".join(waits))
        self._timed("Permit", began, status)
        return status, gate

    # -- binding cycle -------------------------------------------------------------------------
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.pre_bind:
            one = time.perf_counter()
            try:
                status = _checked(plugin, await plugin.pre_bind(state, pod, node))  # type: ignore[attr-defined]
            except Exception as exc:
                status = _crash(plugin, exc)
            self._plugin_timed(state, "PreBind", plugin.name, one, status)
            if not status.ok and not status.is_skip:
                status = status.with_plugin(plugin.name)
                self._timed("PreBind", began, status)
                return status
        self._timed("PreBind", began, SUCCESS)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        began = time.perf_counter()
        for plugin in self.bind:
            one = time.perf_counter()
            try:
                status = _checked(plugin, await plugin.bind(state, pod, node))  # type: ignore[attr-defined]
            except Exception as exc:
                status = _crash(plugin, exc)
            self._plugin_timed(state, "Bind", plugin.name, one, status)
            if status.is_skip:
                continue
            status = status.with_plugin(plugin.name)
            self._timed("Bind", began, status)
            return status
        status = Status.error("no Bind plugin bound the pod")
        self._timed("Bind", began, status)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Informational: a PostBind that raises is logged and the others still run."""
        began = time.perf_counter()
        for plugin in self.post_bind:
            try:
                plugin.post_bind(state, pod, node)  # type: ignore[attr-defined]
            except Exception:
                log.exception("PostBind of %s for %s raised; continuing", plugin.name, pod.key)
        self._timed("PostBind", began, SUCCESS)
