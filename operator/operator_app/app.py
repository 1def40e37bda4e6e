"""The kopf operator: handlers feed the scheduler's cache; the leader runs the scheduling loop.

Handlers (all ``@kopf.on.event``, so kopf writes **no** annotation, finalizer or status onto
pods, nodes or our CRDs; progress needs no storage because every handler is idempotent):

* ``nodes``                → the cache's node table;
* ``pods``                 → the cache (every non-terminated pod, whoever schedules it) and the
                             queue (pending pods whose schedulerName has a profile). A server-side
                             field selector drops terminated pods: one that finishes arrives as
                             DELETED, which frees its resources;
* ``schedulingprofiles``   → build, replace or remove the framework for a schedulerName, live;
                             a bad update keeps the last good profile and reports ``Ready=False``;
                             of two profiles claiming one schedulerName the newer is refused;
* ``podgroups``            → gang state; the leader writes PodGroup status (phase and counts).

Why ``on.event`` rather than ``on.create/update/resume/delete`` for profiles: the latter keep
per-object progress in annotations, written by every replica; event handlers are stateless and
idempotent, and only the leader writes status. ``resume`` is the initial listing (event type
None), ``create``/``update`` are ADDED/MODIFIED, ``delete`` is DELETED.

Every replica watches and keeps its cache warm; only the Lease holder schedules, writes events,
conditions and statuses. On shutdown in-flight bindings finish (or are released) and the Lease is
released, so a follower takes over at its next retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import kopf
from kubernetes_asyncio import client, config

from shoal.core.objects import POD_GROUP_LABEL, TERMINAL_PHASES, PodInfo, parse_time
from shoal.core.profile import ProfileError, validate_profile
from shoal.core.scheduler import Scheduler
from shoal.kube.binder import KubeBinder
from shoal.kube.bootstrap import bootstrap_profiles
from shoal.kube.crds import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    PROFILE_GROUP,
    PROFILE_PLURAL,
    PROFILE_VERSION,
)
from shoal.kube.leader import LeaseElector
from shoal.kube.listing import list_all
from shoal.kube.reporter import KubeReporter, rfc3339
from shoal.kube.rest import RawClient, message_of
from shoal.operator_app.metrics import HealthServer, PromMetrics
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry

log = logging.getLogger("shoal.operator")

TERMINATED_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
FINAL_GROUP_PHASES = ("Finished", "Failed")
#: event type of objects listed by prime() (kopf uses None for its own initial listing)
PRIMED = "PRIMED"


@dataclass
class RunSettings:
    kubeconfig: str | None = None
    leader_elect: bool = True
    lease_namespace: str = "kube-system"
    lease_name: str = "shoal-scheduler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{os.getpid()}")
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 10259
    binding_concurrency: int = 64
    status_interval: float = 1.0
    watch_timeout: float = 300.0
    #: a YAML list of {name, spec}: profiles the leader creates at start-up (kube/bootstrap.py)
    bootstrap_profiles: str | None = None


@dataclass
class _ProfileObject:
    name: str
    created: float
    generation: int
    scheduler_name: str
    spec: dict[str, Any]
    status: dict[str, Any]


GC_THRESHOLDS = (10_000, 50, 1_000)


def tune_gc() -> None:
    """Keep Python's cyclic garbage collector off the hot path.

    The cache holds tens of thousands of long-lived pod objects; with the default thresholds the
    collector re-scans all of them ever more often as they accumulate, which made the latency of a
    50,000-pod burst grow with the cluster (p50 4.6 s at 20,000 pods; 0.5 s with this). Frozen
    objects (everything imported, and the primed cache) are never scanned again, and young
    collections run every 10,000 allocations instead of 700.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class ShoalOperator:
    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        self.metrics = PromMetrics()
        self.api: client.ApiClient | None = None
        self.scheduler: Scheduler | None = None
        self.reporter: KubeReporter | None = None
        self.elector: LeaseElector | None = None
        self.leading = False
        self.started = False
        self.profiles: dict[str, _ProfileObject] = {}
        #: schedulerName -> (profile object name, generation) currently in effect
        self.applied: dict[str, tuple[str, int]] = {}
        self._written_profile_status: dict[str, dict[str, Any]] = {}
        self._written_group_status: dict[str, dict[str, Any]] = {}
        self._group_terminal: dict[str, dict[str, set[str]]] = {}
        self._group_started: dict[str, str] = {}
        #: PodGroups whose status is Finished or Failed: final, never rewritten (as scheduler-plugins)
        self._group_final: set[str] = set()
        #: PodGroup -> status.occupiedBy, from the owner references of its first member seen
        self._group_owner: dict[str, str] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._seen_pods: dict[str, float] = {}
        self._seen_nodes: dict[str, float] = {}
        self._reconcile_handle: asyncio.TimerHandle | None = None
        self._stopping = False
        self._side_tasks: set[asyncio.Task[None]] = set()
        #: PodGroup -> members that left the watch and are being checked (finished, or deleted?)
        self._group_checking: dict[str, set[str]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self.server: HealthServer | None = None
        #: a graceful stop is draining bindings: their events are still reported
        self._draining = False
        #: why this replica is broken (a vital task ended): /livez fails so the kubelet restarts it
        self.broken: str | None = None

    # -- kopf wiring ---------------------------------------------------------------------------
    def registry(self) -> kopf.OperatorRegistry:
        reg = kopf.OperatorRegistry()
        kopf.on.login(registry=reg)(self._login)
        kopf.on.startup(registry=reg)(self._startup)
        kopf.on.cleanup(registry=reg)(self._cleanup)
        kopf.on.event("", "v1", "nodes", registry=reg)(self._on_node)
        kopf.on.event("", "v1", "pods", registry=reg)(self._on_pod)
        kopf.on.event(PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL, registry=reg)(self._on_profile)
        kopf.on.event(PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL, registry=reg)(self._on_pod_group)
        return reg

    def configure(self, settings: kopf.OperatorSettings) -> None:
        settings.watching.field_selectors["v1", "pods"] = TERMINATED_SELECTOR
        settings.persistence.diffbase_storage = StatelessDiffBase()
        settings.persistence.progress_storage = StatelessProgress()
        settings.posting.enabled = False  # kopf's own k8s-events; ours come from KubeReporter
        settings.watching.server_timeout = int(self.settings.watch_timeout)  # the API wants an integer
        settings.watching.client_timeout = self.settings.watch_timeout + 30
        settings.networking.request_timeout = 60

    async def _login(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        if self.settings.kubeconfig:
            os.environ["KUBECONFIG"] = self.settings.kubeconfig
            return kopf.login_with_kubeconfig(**kwargs)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return kopf.login_with_service_account(**kwargs)
        return kopf.login_with_kubeconfig(**kwargs)

    async def _client(self) -> client.ApiClient:
        if self.settings.kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            api = await config.new_client_from_config(config_file=self.settings.kubeconfig)
        else:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api = client.ApiClient()
        # aiohttp's trust_env reads ~/.netrc and proxy variables in a thread on *every* request;
        # the API server is reached directly (kubeconfig or in-cluster), so skip that per-request work.
        session = getattr(api.rest_client, "pool_manager", None)
        if session is not None and hasattr(session, "_trust_env"):
            session._trust_env = False
        return api

    # -- lifecycle -----------------------------------------------------------------------------
    async def _startup(self, **_: Any) -> None:
        await self.start()

    async def _cleanup(self, **_: Any) -> None:
        await self.stop()

    async def start(self) -> None:
        self.api = await self._client()
        self.reporter = KubeReporter(
            self.api, instance=self.settings.identity, enabled=lambda: self.leading or self._draining
        )
        self.reporter.start()
        binder = KubeBinder(self.api, concurrency=self.settings.binding_concurrency)
        self.scheduler = Scheduler(
            load_registry(), binder, reporter=self.reporter, metrics=self.metrics, defaults=DEFAULT_PLUGINS
        )
        self.server = HealthServer(
            self.metrics,
            self.ready,
            alive=self.alive,
            host=self.settings.metrics_host,
            port=self.settings.metrics_port,
        )
        await self.server.start()
        await self.prime()
        gc.freeze()  # the primed cache is long-lived: keep it out of every future collection
        loop = asyncio.get_running_loop()
        if self.settings.leader_elect:
            self.elector = LeaseElector(
                self.api,
                namespace=self.settings.lease_namespace,
                name=self.settings.lease_name,
                identity=self.settings.identity,
                lease_duration=self.settings.lease_duration,
                renew_deadline=self.settings.renew_deadline,
                retry_period=self.settings.retry_period,
            )
            self._vital(loop.create_task(self.elector.run(self._lead, self._follow), name="election"))
        else:
            await self._lead()
        self._vital(loop.create_task(self._status_loop(), name="podgroup-status"))
        self.started = True
        log.info("shoal started as %s (metrics on :%s)", self.settings.identity, self.server.port)

    async def stop(self) -> None:
        self._stopping = True
        if self._reconcile_handle is not None:
            self._reconcile_handle.cancel()
        side = list(self._side_tasks)
        for task in self._tasks + side:
            task.cancel()
        for task in self._tasks + side:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        await self._follow(False)
        if self.elector is not None:
            await self.elector.release()
        if self.reporter is not None:
            await self.reporter.stop()
        if self.server is not None:
            await self.server.stop()
        if self.api is not None:
            await self.api.close()
        log.info("shoal stopped")

    def ready(self) -> bool:
        return self.started and self.broken is None

    def alive(self) -> bool:
        return self.broken is None

    def _vital(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Track a task that must run until stop(); if it ends early, the replica is broken."""
        self._tasks.append(task)
        task.add_done_callback(self._vital_done)
        return task

    def _vital_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or self._stopping:
            return
        exc = task.exception()
        self.broken = f"task {task.get_name()} ended: {exc!r}" if exc else f"task {task.get_name()} ended"
        log.error("%s; /livez now fails so this replica is restarted", self.broken, exc_info=exc)
        election = next((t for t in self._tasks if t.get_name() == "election" and not t.done()), None)
        if election is not None:
            election.cancel()  # steps down and releases the Lease: a healthy replica takes over now
        elif self.leading:  # no election (or it is what died): stop binding at once
            self._tasks.append(task.get_loop().create_task(self._follow(True)))

    async def _lead(self) -> None:
        """This replica holds the Lease: schedule, and publish the statuses it computed."""
        assert self.scheduler is not None
        self.leading = True
        self.metrics.leader.set(1)
        self._written_profile_status.clear()
        self._written_group_status.clear()
        self.scheduler.queue.move_all()
        self._loop_task = self._vital(
            asyncio.get_running_loop().create_task(self.scheduler.run(), name="scheduling-loop")
        )
        for name in list(self.profiles):
            await self._write_profile_status(name)
        if self.settings.bootstrap_profiles and self.api is not None:
            # a side task: the Lease renewal must not wait on these calls; new profiles arrive
            # through the watch like any other
            self._tasks.append(
                asyncio.get_running_loop().create_task(
                    bootstrap_profiles(
                        RawClient(self.api),
                        self.settings.bootstrap_profiles,
                        load_registry(),
                        DEFAULT_PLUGINS,
                        leading=lambda: self.leading,
                    ),
                    name="bootstrap-profiles",
                )
            )

    async def _follow(self, lost: bool) -> None:
        """Step down: stop scheduling, then finish or release in-flight bindings.

        ``lost``: the Lease could not be renewed, so another replica may lead already and place
        pods from a cache that does not know ours: cancel (and release) every binding at once.
        Otherwise (graceful stop) the Lease is still ours: bindings get ``renew_deadline`` seconds
        to finish — less than the lease duration, so no one else leads meanwhile — and their
        events are still reported; the Lease is released right after.
        """
        was = self.leading
        self.leading = False
        self.metrics.leader.set(0)
        loop_task, self._loop_task = self._loop_task, None
        if loop_task is not None:
            self._tasks = [t for t in self._tasks if t is not loop_task]
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await loop_task
        if was and self.scheduler is not None:
            self._draining = not lost
            try:
                if lost:
                    await self.scheduler.drain(grace=0.0, close_queue=False)
                else:
                    await self._drain_while_leading()
            finally:
                self._draining = False

    async def _drain_while_leading(self) -> None:
        """Graceful drain (the elector renews the Lease meanwhile); if the Lease is lost after
        all, cancel what is left at once, as for a lost Lease."""
        assert self.scheduler is not None
        drain = asyncio.ensure_future(
            self.scheduler.drain(grace=self.settings.renew_deadline, close_queue=False)
        )
        if self.elector is None:
            await drain
            return
        lost = asyncio.ensure_future(self.elector.lease_lost.wait())
        try:
            await asyncio.wait({drain, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not drain.done():
                log.warning("the Lease was lost while draining; cancelling the bindings still in flight")
                self._draining = False
                await self.scheduler.drain(grace=0.0, close_queue=False)
            await drain
        finally:
            lost.cancel()

    # -- nodes and pods ------------------------------------------------------------------------
    async def _on_node(self, event: Mapping[str, Any], **_: Any) -> None:
        if self.scheduler is None:
            return
        obj = event["object"]
        name = str((obj.get("metadata") or {}).get("name") or "")
        deleted = event.get("type") == "DELETED"
        if deleted:
            self._seen_nodes.pop(name, None)
        else:
            self._seen_nodes[name] = time.monotonic()
            if event.get("type") is None:
                self._schedule_reconcile()
        self.scheduler.on_node(obj, deleted=deleted)

    async def _on_pod(self, event: Mapping[str, Any], **_: Any) -> None:
        if self.scheduler is None:
            return
        obj = event["object"]
        deleted = event.get("type") == "DELETED"
        pod = PodInfo.from_dict(obj)
        if deleted:
            self._seen_pods.pop(pod.uid, None)
        else:
            self._seen_pods[pod.uid] = time.monotonic()
            if event.get("type") is None:
                self._schedule_reconcile()
        if pod.group_key is not None:
            self._note_group_member(pod, obj)
            if deleted and pod.phase not in TERMINAL_PHASES and self.api is not None:
                # Leaving the field selector (finished) arrives as DELETED with the *previous*
                # object: ask the API whether the member is gone or finished, for the group's counts.
                task = asyncio.get_running_loop().create_task(self._check_finished(pod))
                self._side_tasks.add(task)
                task.add_done_callback(self._side_tasks.discard)
        self.scheduler.on_pod(pod, deleted=deleted)
        if (deleted or pod.bound) and self.reporter is not None:
            self.reporter.forget(pod.uid)

    async def _check_finished(self, pod: PodInfo, attempts: int = 6) -> None:
        """Did this member finish (count it) or go away? Retries what may pass (429, 5xx, network);
        meanwhile its group's status is not written, so it never shows a member missing."""
        assert self.api is not None
        key = pod.group_key
        assert key is not None
        checking = self._group_checking.setdefault(key, set())
        checking.add(pod.uid)
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            for attempt in range(attempts):
                if attempt:
                    await asyncio.sleep(min(0.5 * 2**attempt, 8.0))
                try:
                    code, obj = await RawClient(self.api).request("GET", path)
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    log.info("checking whether gang member %s finished: %s (will retry)", pod.key, exc)
                    continue
                if code == 429 or code >= 500:
                    continue
                if (
                    code == 200
                    and isinstance(obj, dict)
                    and (obj.get("metadata") or {}).get("uid") == pod.uid
                ):
                    now = PodInfo.from_dict(obj)
                    if now.phase in TERMINAL_PHASES and now.group_key is not None:
                        self._note_group_member(now, obj)
                return  # finished and counted, or gone (404 / another pod of that name)
            log.warning("could not tell whether gang member %s finished; its group's counts may lag", pod.key)
        finally:
            checking.discard(pod.uid)
            if not checking:
                self._group_checking.pop(key, None)

    def _note_group_member(self, pod: PodInfo, obj: Mapping[str, Any]) -> None:
        key = pod.group_key
        assert key is not None
        if pod.phase in TERMINAL_PHASES:
            bucket = self._group_terminal.setdefault(key, {"Succeeded": set(), "Failed": set()})
            bucket[pod.phase].add(pod.uid)
        if key not in self._group_owner:
            owners = sorted(
                f"{pod.namespace}/{ref.get('name')}"
                for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
                if ref.get("name")
            )
            if owners:
                self._group_owner[key] = ",".join(owners)

    # -- start-up --------------------------------------------------------------------------------
    async def prime(self) -> None:
        """Fill the cache before anything is scheduled, as kube-scheduler waits for its informers.

        kopf replays every object too, but gives no "synced" signal; scheduling before the nodes
        and the other schedulers' pods are known could over-commit a node. So list profiles,
        PodGroups, nodes and pods once here (kopf's replay of the same objects is idempotent).
        """
        assert self.api is not None
        assert self.scheduler is not None
        core: Any = client.CoreV1Api(self.api)
        custom: Any = client.CustomObjectsApi(self.api)
        began = time.monotonic()
        for group, version, plural, handler in (
            (PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL, self._on_profile),
            (PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL, self._on_pod_group),
        ):
            try:
                objs = await list_all(custom.list_cluster_custom_object, group, version, plural)
            except client.ApiException as exc:  # CRD not installed (yet): kopf picks it up later
                log.info("not priming %s.%s: HTTP %s", plural, group, exc.status)
                continue
            for obj in objs:
                await handler({"type": PRIMED, "object": obj})
        for obj in await list_all(core.list_node):
            await self._on_node({"type": PRIMED, "object": obj})
        for obj in await list_all(core.list_pod_for_all_namespaces, field_selector=TERMINATED_SELECTOR):
            await self._on_pod({"type": PRIMED, "object": obj})
        # Finished members of gangs are outside the pod watch (terminated pods are filtered out),
        # but PodGroup counts include them: read them once, so a restart or fail-over does not
        # send a gang's status backwards.
        for phase in TERMINAL_PHASES:
            for obj in await list_all(
                core.list_pod_for_all_namespaces,
                label_selector=POD_GROUP_LABEL,
                field_selector=f"status.phase={phase}",
            ):
                pod = PodInfo.from_dict(obj)
                if pod.group_key is not None:
                    self._note_group_member(pod, obj)
        log.info(
            "cache primed in %.1f s: %d nodes, %d pods, %d profiles",
            time.monotonic() - began,
            len(self.scheduler.cache.table),
            len(self.scheduler.cache.pods),
            len(self.profiles),
        )

    # -- re-lists ------------------------------------------------------------------------------
    def _schedule_reconcile(self, delay: float = 2.0) -> None:
        """kopf (re-)lists after start-up and after a watch expired (410): it replays the objects that
        exist but never says which ones vanished meanwhile. Shortly after a listing, compare."""
        if self._reconcile_handle is not None:
            self._reconcile_handle.cancel()
        loop = asyncio.get_running_loop()
        self._reconcile_handle = loop.call_later(
            delay, lambda: self._tasks.append(loop.create_task(self.reconcile()))
        )

    async def reconcile(self) -> tuple[int, int]:
        """Forget pods and nodes that the API no longer has. Returns (pods, nodes) forgotten.

        Only objects last seen *before* the listing started are forgotten, so an object created
        while the list was being read is never dropped by mistake.
        """
        if self.api is None or self.scheduler is None:
            return 0, 0
        core: Any = client.CoreV1Api(self.api)
        started = time.monotonic()
        try:
            pods = await list_all(core.list_pod_for_all_namespaces, field_selector=TERMINATED_SELECTOR)
            nodes = await list_all(core.list_node)
        except (client.ApiException, aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("re-list check failed (%s); will try at the next listing", exc)
            return 0, 0
        live_pods = {str(p["metadata"].get("uid")) for p in pods}
        live_nodes = {str(n["metadata"].get("name")) for n in nodes}
        gone_pods = [u for u, seen in self._seen_pods.items() if u not in live_pods and seen < started]
        gone_nodes = [n for n, seen in self._seen_nodes.items() if n not in live_nodes and seen < started]
        for uid in gone_pods:
            self._seen_pods.pop(uid, None)
            cached = self.scheduler.cache.pods.get(uid)
            if cached is not None:
                self.scheduler.on_pod(cached, deleted=True)
        for name in gone_nodes:
            self._seen_nodes.pop(name, None)
            self.scheduler.on_node({"metadata": {"name": name}}, deleted=True)
        if gone_pods or gone_nodes:
            log.info(
                "after a re-list: forgot %d pod(s) and %d node(s) deleted meanwhile",
                len(gone_pods),
                len(gone_nodes),
            )
        return len(gone_pods), len(gone_nodes)

    # -- scheduling profiles -------------------------------------------------------------------
    async def _on_profile(self, event: Mapping[str, Any], **_: Any) -> None:
        obj = event["object"]
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        touched: set[str] = set()
        old = self.profiles.pop(name, None)
        if old is not None:
            touched.add(old.scheduler_name)
        if event.get("type") != "DELETED":
            spec = dict(obj.get("spec") or {})
            entry = _ProfileObject(
                name=name,
                created=parse_time(meta.get("creationTimestamp")),
                generation=int(meta.get("generation") or 0),
                scheduler_name=str(spec.get("schedulerName") or ""),
                spec=spec,
                status=dict(obj.get("status") or {}),
            )
            self.profiles[name] = entry
            touched.add(entry.scheduler_name)
        else:
            self._written_profile_status.pop(name, None)
        for scheduler_name in touched:
            self._reconcile_scheduler_name(scheduler_name)
        for profile in list(self.profiles.values()):
            if profile.scheduler_name in touched:
                await self._write_profile_status(profile.name)
        self._count_profiles()

    def _owner(self, scheduler_name: str) -> _ProfileObject | None:
        claimants = [p for p in self.profiles.values() if p.scheduler_name == scheduler_name]
        return min(claimants, key=lambda p: (p.created, p.name)) if claimants else None

    def _reconcile_scheduler_name(self, scheduler_name: str) -> None:
        assert self.scheduler is not None
        owner = self._owner(scheduler_name)
        if owner is None:
            self.scheduler.remove_profile(scheduler_name)
            self.applied.pop(scheduler_name, None)
            return
        if self.applied.get(scheduler_name) == (owner.name, owner.generation):
            return
        try:
            self.scheduler.set_profile(owner.spec)
        except ProfileError as exc:
            previous = self.applied.get(scheduler_name)
            if previous is None or previous[0] != owner.name:
                self.scheduler.remove_profile(scheduler_name)
                self.applied.pop(scheduler_name, None)
            log.warning("SchedulingProfile %s is invalid: %s", owner.name, exc)
            return
        self.applied[scheduler_name] = (owner.name, owner.generation)
        log.info(
            "SchedulingProfile %s (generation %s) now schedules %s",
            owner.name,
            owner.generation,
            scheduler_name,
        )

    def profile_status(self, name: str) -> dict[str, Any]:
        """The status the profile object should have now."""
        profile = self.profiles[name]
        owner = self._owner(profile.scheduler_name)
        applied = self.applied.get(profile.scheduler_name)
        plugins: dict[str, list[str]] | None = None
        if owner is not None and owner.name != name:
            ready, reason = "False", "SchedulerNameConflict"
            message = (
                f'schedulerName "{profile.scheduler_name}" is already claimed by SchedulingProfile '
                f'"{owner.name}" (the older one wins); this profile is not used'
            )
        else:
            try:
                validated = validate_profile(profile.spec, load_registry(), DEFAULT_PLUGINS)
                plugins = {p: [r.name for r in refs] for p, refs in validated.points.items() if refs}
                ready, reason = "True", "Valid"
                message = f"scheduling pods with schedulerName {profile.scheduler_name}"
            except ProfileError as exc:
                ready, reason = "False", "InvalidSpec"
                message = str(exc)
                if applied is not None and applied[0] == name:
                    message += f" (still scheduling with generation {applied[1]}, the last valid one)"
        previous = next((c for c in profile.status.get("conditions") or () if c.get("type") == "Ready"), None)
        transition = (
            previous["lastTransitionTime"]
            if previous is not None and previous.get("status") == ready and previous.get("lastTransitionTime")
            else rfc3339()
        )
        status: dict[str, Any] = {
            "observedGeneration": profile.generation,
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": reason,
                    "message": message[:32000],
                    "lastTransitionTime": transition,
                    "observedGeneration": profile.generation,
                }
            ],
            "plugins": plugins,
        }
        return status

    async def _write_profile_status(self, name: str) -> None:
        if not self.leading or self.api is None or name not in self.profiles:
            return
        status = self.profile_status(name)
        current = self.profiles[name].status
        if _same_status(current, status) or self._written_profile_status.get(name) == status:
            return
        path = f"/apis/{PROFILE_GROUP}/{PROFILE_VERSION}/{PROFILE_PLURAL}/{name}/status"
        if await self._write_status(path, status, f"SchedulingProfile {name}"):
            self._written_profile_status[name] = status

    async def _write_status(self, path: str, status: dict[str, Any], what: str) -> bool:
        """Merge-patch a status subresource; False (logged unless 404: gone) when refused."""
        assert self.api is not None
        try:
            code, reply = await RawClient(self.api).request(
                "PATCH", path, {"status": status}, content_type="application/merge-patch+json"
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("writing status of %s: %s", what, exc)
            return False
        if code >= 300 and code != 404:
            log.warning("writing status of %s: HTTP %s %s", what, code, message_of(reply)[:200])
        return code < 300

    def _count_profiles(self) -> None:
        ready = sum(1 for n in self.profiles if self.profile_status(n)["conditions"][0]["status"] == "True")
        self.metrics.profiles.labels("true").set(ready)
        self.metrics.profiles.labels("false").set(len(self.profiles) - ready)

    # -- pod groups ----------------------------------------------------------------------------
    async def _on_pod_group(self, event: Mapping[str, Any], **_: Any) -> None:
        if self.scheduler is None:
            return
        obj = event["object"]
        deleted = event.get("type") == "DELETED"
        self.scheduler.on_pod_group(obj, deleted=deleted)
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        if deleted:
            self._written_group_status.pop(key, None)
            self._group_terminal.pop(key, None)
            self._group_started.pop(key, None)
            self._group_final.discard(key)
            self._group_owner.pop(key, None)
        elif obj.get("status"):
            status = obj["status"]
            self._written_group_status.setdefault(key, dict(status))
            if status.get("scheduleStartTime"):
                self._group_started.setdefault(key, str(status["scheduleStartTime"]))
            if status.get("phase") in FINAL_GROUP_PHASES:
                self._group_final.add(key)

    def pod_group_status(self, key: str) -> dict[str, Any]:
        """Phase and counts as scheduler-plugins' PodGroup controller and Coscheduling report them.

        * ``Pending``: fewer pods exist than ``minMember``; ``PreScheduling``: enough pods, none
          bound; ``Scheduling``: some bound; ``Scheduled``: ``minMember`` bound;
        * ``Running``: running + succeeded reach ``minMember``;
        * ``Failed`` (final): a member failed and failed + running + succeeded reach ``minMember``;
        * ``Finished`` (final): ``minMember`` members succeeded.

        ``scheduled`` counts members ever bound (terminated ones included), ``scheduleStartTime`` is
        the first binding, ``occupiedBy`` the owners of the members. Counts of terminated members
        survive restarts (they are listed at start-up) and a final phase is never rewritten.
        """
        assert self.scheduler is not None
        cache = self.scheduler.cache
        group = cache.pod_groups[key]
        members = cache.group_members(key)
        bound = sum(1 for p in members if p.bound)
        running = sum(1 for p in members if p.phase == "Running")
        terminal = self._group_terminal.get(key, {"Succeeded": set(), "Failed": set()})
        succeeded, failed = len(terminal["Succeeded"]), len(terminal["Failed"])
        scheduled = bound + succeeded + failed
        minimum = group.min_member
        if succeeded >= minimum:
            phase = "Finished"
        elif failed and failed + running + succeeded >= minimum:
            phase = "Failed"
        elif len(members) + succeeded + failed < minimum:
            phase = "Pending"
        elif scheduled >= minimum and running + succeeded >= minimum:
            phase = "Running"
        elif scheduled >= minimum:
            phase = "Scheduled"
        elif scheduled:
            phase = "Scheduling"
        else:
            phase = "PreScheduling"
        status: dict[str, Any] = {
            "phase": phase,
            "scheduled": scheduled,
            "running": running,
            "succeeded": succeeded,
            "failed": failed,
        }
        if scheduled:
            status["scheduleStartTime"] = self._group_started.setdefault(key, rfc3339())
        if key in self._group_owner:
            status["occupiedBy"] = self._group_owner[key]
        return status

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.status_interval)
            if not self.leading or self.scheduler is None or self.api is None:
                continue
            for key in list(self.scheduler.cache.pod_groups):
                try:
                    await self._write_group_status(key)
                except Exception:  # one group's trouble must not end the loop (a vital task)
                    log.exception("writing the status of PodGroup %s", key)

    async def _write_group_status(self, key: str) -> None:
        assert self.scheduler is not None
        if key in self._group_final or key in self._group_checking:
            return
        if key not in self.scheduler.cache.pod_groups:
            return  # deleted while another group's status was being written
        status = self.pod_group_status(key)
        if _same_status(self._written_group_status.get(key, {}), status):
            return
        namespace, name = key.split("/", 1)
        group_api = f"/apis/{PODGROUP_GROUP}/{PODGROUP_VERSION}"
        path = f"{group_api}/namespaces/{namespace}/{PODGROUP_PLURAL}/{name}/status"
        if await self._write_status(path, status, f"PodGroup {key}"):
            self._written_group_status[key] = status


class StatelessDiffBase(kopf.DiffBaseStorage):
    """shoal has only event handlers: no object essence to build (kopf deep-copies every body for
    it otherwise) and nothing to store on objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class StatelessProgress(kopf.ProgressStorage):
    """No handler progress is ever kept, in annotations or status."""

    def fetch(self, *, key: Any, body: kopf.Body) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def purge(self, *, key: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


def _same_status(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when every field we write already has the value we want."""
    return all(current.get(k) == v for k, v in desired.items())
