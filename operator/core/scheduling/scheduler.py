"""The scheduler: its profiles, cache and queue, what the informer tells it, and the loop.

What happens to one pod is told in :mod:`shoal.core.scheduling.schedule_one` (its scheduling and
binding cycles) and :mod:`shoal.core.scheduling.gangs` (a gang's members placed in one cycle, all
or nothing); this module feeds them:

* **profiles**: one :class:`~shoal.core.framework.runtime.Framework` per schedulerName, rebuilt on
  every edit (a bad edit keeps the old one); a new profile requeues its pending pods;
* **the informer's entry points** (``on_node``, ``on_pod``, ...): the cache is updated and the
  change becomes a cluster event for the queue's hints;
* **the loop** (:meth:`Scheduler.run`): pop a pod, run its cycle (a gang's pod: the gang cycle),
  batch cycles for 5 ms, then let watch events and binding tasks run;
* **explain**: a what-if of a pod's cycle, per node and plugin.

Outcomes go to a :class:`~shoal.core.scheduling.reporting.Reporter`; the core itself does no I/O.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gates import WaitingPods
from shoal.core.framework.interfaces import (
    Binder,
    ClusterEvent,
    EventKind,
    EventRegistration,
    ExplainsCosts,
    ExplainsNodes,
    Handle,
    Store,
)
from shoal.core.framework.metrics import Metrics, NullMetrics
from shoal.core.framework.profile import PluginEntry, PluginSet
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.explain import Explanation
from shoal.core.scheduling.gangs import GangCycles, explain_gang
from shoal.core.scheduling.queue import PreEnqueue, QueuedPodInfo, SchedulingQueue, SortKey
from shoal.core.scheduling.reporting import NullReporter, Reporter, held_reason
from shoal.core.scheduling.schedule_one import Cycle, PodCycles, schedule_pod
from shoal.core.state.cache import ClusterCache
from shoal.core.state.hierarchy import CompositeGroupInfo
from shoal.core.state.objects import NodeSpec, PodGroupInfo, PodInfo
from shoal.core.state.status import Status

log = logging.getLogger("shoal.scheduler")


class Scheduler:
    def __init__(
        self,
        registry: Mapping[str, PluginEntry],
        binder: Binder,
        *,
        reporter: Reporter | None = None,
        metrics: Metrics | None = None,
        defaults: PluginSet | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        assumed_ttl: float = 300.0,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_binds_in_flight: int = 256,
    ) -> None:
        self.registry = registry
        self.defaults = defaults
        metrics = metrics or NullMetrics()
        self.rng = rng or random.Random()
        self.clock = clock
        self.cache = ClusterCache(assumed_ttl=assumed_ttl, clock=clock)
        self.waiting = WaitingPods()
        self.handle = Handle(self.cache, self.waiting, binder, clock)
        #: object type -> the store that takes it: every store a registered plugin reads, made now
        #: so what the informer delivers before any profile exists is kept
        self._store_for: dict[type, Store] = {}
        for entry in registry.values():
            for cls in entry.stores:
                store: Store = self.cache.store(cls)
                self._store_for.update((kind, store) for kind in store.kinds)
        self.profiles: dict[str, Framework] = {}
        self._hints: dict[str, list[tuple[str, EventRegistration]]] = {}
        self.queue = SchedulingQueue(
            clock=clock,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
            metrics=metrics,
            profiles=self,
        )
        self.queue.gate_observer = self._held
        self.handle.activate = self.queue.activate
        #: every pod's scheduling and binding cycles (schedule_one.py)
        self.cycles = PodCycles(
            self.cache,
            self.queue,
            self.waiting,
            metrics,
            reporter or NullReporter(),
            clock=clock,
            max_binds_in_flight=max_binds_in_flight,
        )
        #: gangs' cycles, built on the pods' own (gangs.py)
        self.gangs = GangCycles(self.cycles)
        self._last_cleanup = 0.0
        self.attempts = 0

    # the cycles report and count: what the scheduler is given, they use (swapped in tests)
    @property
    def reporter(self) -> Reporter:
        return self.cycles.reporter

    @reporter.setter
    def reporter(self, reporter: Reporter) -> None:
        self.cycles.reporter = reporter

    @property
    def metrics(self) -> Metrics:
        return self.cycles.metrics

    @metrics.setter
    def metrics(self, metrics: Metrics) -> None:
        self.cycles.metrics = metrics

    # -- profiles ------------------------------------------------------------------------------
    def set_profile(self, spec: Mapping[str, Any]) -> Framework:
        """Build (or rebuild) a profile; raises ProfileError and keeps the old one if invalid."""
        fw = Framework.from_spec(
            spec, self.registry, self.handle, defaults=self.defaults, metrics=self.metrics, rng=self.rng
        )
        self.profiles[fw.name] = fw
        self._hints[fw.name] = fw.events()
        self._requeue_profile_pods(fw.name)
        return fw

    def remove_profile(self, name: str) -> None:
        self.profiles.pop(name, None)
        self._hints.pop(name, None)
        for where in ("active", "backoff", "unschedulable", "gated"):
            for qpi in list(self.queue.pods_in(where)):
                if qpi.profile == name:
                    self.queue.delete(qpi.uid)

    def _requeue_profile_pods(self, name: str) -> None:
        """A new or edited profile: pending pods of that schedulerName are (re)considered."""
        for pod in list(self.cache.pods.values()):
            if pod.scheduler_name != name or pod.bound or pod.terminating or self.cache.is_assumed(pod.uid):
                continue
            qpi = self.queue.get(pod.uid)
            if qpi is None or qpi.where in ("unschedulable", "gated"):
                self.queue.add(pod, name)
        self.queue.move_all()

    def _held(self, qpi: QueuedPodInfo, status: Status | None) -> None:
        """A PreEnqueue verdict (None: the pod left the gate) for the reporter."""
        fw = self.profiles.get(qpi.profile)
        plugin = fw.plugins.get(status.plugin) if fw is not None and status is not None else None
        reason = held_reason(plugin, status) if status is not None else None
        if reason is None:
            self.reporter.released(qpi.pod)
        else:
            assert status is not None
            self.reporter.held(qpi.pod, reason, status.message, qpi.profile)

    # -- informer entry points -------------------------------------------------------------------
    def _event(self, kind: EventKind, obj: object) -> None:
        self.queue.on_event(ClusterEvent(kind, obj))

    # -- what the queue asks of the profiles (queue.ProfileHooks) ----------------------------------
    def sort_key_for(self, profile: str) -> SortKey | None:
        fw = self.profiles.get(profile)
        return fw.sort_key if fw is not None else None

    def pre_enqueue_for(self, profile: str) -> PreEnqueue | None:
        fw = self.profiles.get(profile)
        return fw.run_pre_enqueue if fw is not None else None

    def hints_for(self, profile: str) -> Sequence[tuple[str, EventRegistration]]:
        return self._hints.get(profile, ())

    # -- typed objects from the informer (kube/informer.py) or the simulator ---------------------
    def on_node(self, spec: NodeSpec) -> None:
        """A node added or changed."""
        name = spec.name
        row = self.cache.table.index.get(name)
        old = self.cache.table.specs[row] if row is not None else None
        if old == spec:
            return  # heartbeats and status noise: nothing the scheduler looks at changed
        new = self.cache.set_node(spec)
        if old is not None and replace(old, images=spec.images) == spec:
            return  # only the images (ImageLocality's score) changed: nothing for a parked pod
        self._event(EventKind.NODE_ADD if new else EventKind.NODE_UPDATE, spec)

    def on_node_deleted(self, name: str) -> None:
        if name in self.cache.table:
            self.cache.remove_node(name)
            self._event(EventKind.NODE_DELETE, name)

    def on_pod(self, pod: PodInfo, deleted: bool = False) -> None:
        if deleted or pod.terminated:
            old = self.cache.remove_pod(pod.uid)
            self.queue.delete(pod.uid)
            self.waiting.reject(pod.uid, "", "pod was deleted while waiting at Permit")
            if old is not None:
                self._event(EventKind.POD_DELETE, old)
            return
        old = self.cache.upsert_pod(pod)
        if pod.bound:
            self.queue.delete(pod.uid)
            if old is None or not old.bound:
                self._event(EventKind.POD_ADD, pod)
                return
            if (old.labels, old.terminating, old.node_name) != (pod.labels, pod.terminating, pod.node_name):
                # relabelled or being deleted: pod affinity and spread see it differently now
                self._event(EventKind.POD_UPDATE, pod)
            if _scaled_down(old, pod):
                self._event(EventKind.POD_SCALE_DOWN, pod)
            return
        fw = self.profiles.get(pod.scheduler_name)
        if fw is not None and not pod.terminating and not self.cache.is_assumed(pod.uid):
            self.queue.add(pod, fw.name)
        elif pod.terminating:
            self.queue.delete(pod.uid)
        self._event(EventKind.POD_ADD if old is None else EventKind.POD_UPDATE, pod)

    def on_pod_group(self, group: PodGroupInfo, deleted: bool = False) -> None:
        if deleted:
            self.cache.remove_pod_group(group.key)
            self.gangs.refused_groups.discard(group.key)
        else:
            self.cache.set_pod_group(group)
        self._event(EventKind.POD_GROUP_CHANGE, group)

    def on_composite(self, info: CompositeGroupInfo, deleted: bool = False) -> None:
        """A CompositePodGroup added, changed (``minGroupCount`` is mutable) or deleted: the
        members of the tree it is in may be ready now (a PodGroup change to the gang plugins)."""
        hierarchy = self.cache.hierarchy
        if deleted:
            hierarchy.remove_composite(info.key)
            self.gangs.composite_outcomes.pop(info.key, None)
        elif hierarchy.composites.get(info.key) == info:
            return  # a status update (shoal's own condition, echoed): nothing a member waits for
        else:
            hierarchy.set_composite(info)
        self.cache.groups_version += 1
        self._event(EventKind.POD_GROUP_CHANGE, info)

    def on_namespace(self, name: str, labels: Mapping[str, str] | None, deleted: bool = False) -> None:
        """A namespace's labels (pod affinity terms select namespaces by label)."""
        if deleted:
            self.cache.remove_namespace(name)
        else:
            self.cache.set_namespace(name, {str(k): str(v) for k, v in (labels or {}).items()})
        self._event(EventKind.NAMESPACE_CHANGE, name)

    def on_object(self, obj: object, deleted: bool = False) -> None:
        """An object a plugin package's store takes (a ResourceSlice, a PersistentVolumeClaim, ...)
        added, changed or deleted: the store records it and says which event the change is."""
        store = self._store_for.get(type(obj))
        if store is None:
            log.warning("no store takes %s objects; ignored", type(obj).__name__)
            return
        event = store.apply(obj, deleted)
        if event is not None:
            self.queue.on_event(event)

    # -- the loop --------------------------------------------------------------------------------
    async def run(self, batch_seconds: float = 0.005) -> None:
        """Schedule until cancelled (or the queue is closed).

        Cycles run back to back for up to ``batch_seconds``, then the loop yields once. Yielding after
        every pod would let thousands of watch-event tasks run between two cycles and starve the
        scheduler under a burst; 5 ms batches keep event handling and bindings flowing.
        """
        cycles = self.cycles
        while True:
            while cycles.binds_in_flight >= cycles.max_binds_in_flight:
                cycles.bind_slot.clear()
                await cycles.bind_slot.wait()
            qpi = await self.queue.pop()
            if qpi is None:
                return
            deadline = time.perf_counter() + batch_seconds
            while qpi is not None:
                self._schedule_guarded(qpi)
                if time.perf_counter() >= deadline or cycles.binds_in_flight >= cycles.max_binds_in_flight:
                    break
                qpi = self.queue.pop_nowait()
            self._maintenance()
            await asyncio.sleep(0)

    def _schedule_guarded(self, qpi: QueuedPodInfo) -> None:
        """One cycle; a bug anywhere in it costs its pods a backoff, never the loop: what it assumed
        and did not hand over is released, and every pod it popped goes back to the queue."""
        cycle = self._new_cycle(qpi)
        try:
            self.schedule_one(qpi, cycle)
        except Exception as exc:
            log.exception("scheduling cycle for %s failed", qpi.pod.key)
            message = f"internal error: {type(exc).__name__}: {exc}"
            for member in cycle.rollback():  # not those deleted meanwhile, or binding
                if cycle.fw is not None:
                    self.cycles.retry_after_error(cycle.fw, member, message, 0.0)
                else:
                    self.queue.requeue_backoff(member, message)

    def _new_cycle(self, qpi: QueuedPodInfo) -> Cycle:
        return self.cycles.new_cycle(self.profiles.get(qpi.profile), qpi)

    def _maintenance(self) -> None:
        now = self.clock()
        if now - self._last_cleanup >= 1.0:
            self._last_cleanup = now
            for uid in self.cache.cleanup_expired(now):
                log.warning("assumed pod %s expired without confirmation; forgot it", uid)
            self.queue.report()

    async def run_until_idle(self, settle: float = 0.0, max_attempts: int = 8) -> None:
        """Schedule until nothing is runnable and no binding is in flight (simulation, tests); a pod
        failing with errors is left in backoff after ``max_attempts`` attempts, so this returns."""
        while True:
            qpi = self.queue.pop_nowait()
            if qpi is not None:
                self._schedule_guarded(qpi)
                await asyncio.sleep(0)
                continue
            if self.cycles.binding:
                await asyncio.wait(set(self.cycles.binding), timeout=0.5)
                continue
            retrying = [q for q in self.queue.pods_in("backoff") if q.attempts < max_attempts]
            if retrying:
                await asyncio.sleep(0.05)
                continue
            if settle > 0:
                await asyncio.sleep(settle)
                settle = 0.0
                continue
            return

    async def drain(self, grace: float = 30.0, *, close_queue: bool = True) -> None:
        """Graceful shutdown: let in-flight bindings finish; cancel (and release) the rest."""
        if close_queue:
            self.queue.close()
        if not self.cycles.binding:
            return
        _, pending = await asyncio.wait(set(self.cycles.binding), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)

    @property
    def in_flight(self) -> int:
        return len(self.cycles.binding)

    def schedule_one(self, qpi: QueuedPodInfo, cycle: Cycle | None = None) -> None:
        """One cycle for ``qpi``: a gang's pod goes to the gang cycle with its queued members
        (gangs.py), any other pod to its own (schedule_one.py). Whatever ``cycle`` still holds if
        this raises is the caller's to roll back."""
        cycle = cycle or self._new_cycle(qpi)
        fw = self.profiles.get(qpi.profile)
        if fw is None or qpi.uid not in self.cache.pods or self.cache.placed_node(qpi.uid):
            self.queue.delete(qpi.uid)
            return
        self.attempts += 1
        group = fw.pod_group(qpi.pod)
        if group is not None:
            self.gangs.schedule(fw, qpi, group, cycle)
        else:
            self.cycles.schedule_one(fw, qpi, cycle)

    # -- explain ---------------------------------------------------------------------------------
    def explain(self, pod: PodInfo, profile: str | None = None) -> Explanation:
        """Why ``pod`` would (not) be placed now: per node and plugin. Changes nothing."""
        fw = self.profiles.get(profile or pod.scheduler_name)
        if fw is None:
            raise KeyError(f"no profile for schedulerName {pod.scheduler_name!r}")
        placement = schedule_pod(fw, CycleState(), pod, what_if=True)
        result = Explanation.of(pod, fw.name, placement, self.cache.table)
        group = fw.pod_group(pod)
        if group is not None:
            result.gang = explain_gang(fw, group)
        table = self.cache.table
        rows = [table.index[n] for n in result.totals if n in table.index]
        every = [table.index[n] for n in [*result.totals, *result.diagnosis.node_reasons] if n in table.index]
        for plugin in fw.plugins.values():
            if isinstance(plugin, ExplainsCosts) and plugin.name in fw.at["score"]:
                for row, cost in plugin.explain_costs(pod, rows).items():
                    result.costs.setdefault(table.name(row), {})[plugin.name] = cost
            if isinstance(plugin, ExplainsNodes):
                for row, note in plugin.explain_nodes(pod, every).items():
                    result.notes.setdefault(table.name(row), {})[plugin.name] = note
        return result


def _scaled_down(old: PodInfo, new: PodInfo) -> bool:
    """Whether a bound pod now holds less of some resource (kube-scheduler's UpdatePodScaleDown)."""
    less = any(new.requests.get(k, 0) < v for k, v in old.requests.items())
    return less or new.nonzero_cpu < old.nonzero_cpu or new.nonzero_memory < old.nonzero_memory
