"""The operator: composes the informer, the scheduler and the parts below; runs them as one process.

Parts (each its own module): :mod:`~shoal.kube.informer` (watch events and listings into typed
events, re-list checks), :mod:`.profiles` (ownership, validation, status), :mod:`.podgroups`
(PodGroup phase and status loop), :mod:`.leadership` (Lease terms, stepping down), :mod:`.health`
(ready, alive, vital tasks), :mod:`.kopf_glue` (kopf keeps nothing on objects).

Watched kinds (all ``@kopf.on.event``, so kopf writes **no** annotation, finalizer or status):

* nodes → the cache's node table;
* pods → the cache (every non-terminated pod, whoever schedules it) and the queue (pending pods
  whose schedulerName has a profile); a pod that finishes leaves the field selector as DELETED;
* SchedulingProfiles → build, replace or remove the framework for a schedulerName, live;
* PodGroups of both APIs (scheduler-plugins' and native ``scheduling.k8s.io``, if served) → gang
  state; the leader writes their status;
* namespaces → their labels (pod affinity's namespaceSelector);
* PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes → the cache's volume store
  (the volume plugins);
* DeviceClasses, ResourceSlices, ResourceClaims (``resource.k8s.io/v1``, if served) → the cache's
  DRA store (DynamicResources).

Structure: one task group for the process (kopf, the vital tasks, the re-list checks); the vital
tasks (election, PodGroup status loop) in a group of their own, so that one ending marks the
replica broken and cancels the others — the Lease is released — while kopf keeps the cache warm
until the kubelet restarts the replica; and one group per leadership term (scheduling loop,
bootstrap), cancelled on stepping down. On SIGTERM kopf stops, then everything else does:
in-flight bindings finish (or are released) and the Lease is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import kopf
from kubernetes_asyncio import client

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.hierarchy import CompositeGroupInfo
from shoal.core.state.objects import NodeSpec, PodGroupInfo, PodInfo
from shoal.core.state.spreadselectors import SelectorOwner
from shoal.core.state.workloads import REASON_POD_GROUP_ERROR
from shoal.kube.binder import KubeBinder
from shoal.kube.bootstrap import bootstrap_profiles
from shoal.kube.delegated_auth import DelegatedAuth
from shoal.kube.dra import KubeClaimWriter
from shoal.kube.informer import Event, Informer, Kind
from shoal.kube.kinds import (
    KIND_COMPOSITE_PODGROUPS,
    KIND_NAMESPACES,
    KIND_NODES,
    KIND_PDBS,
    KIND_PODS,
    KIND_PROFILES,
    POD_GROUP_KINDS,
    SPREAD_SELECTOR_KINDS,
    STORE_KINDS,
    NamespaceInfo,
    ProfileObject,
)
from shoal.kube.leader import LeaseElector
from shoal.kube.preemption import KubePreemptionExecutor
from shoal.kube.reporter import KubeReporter
from shoal.kube.rest import RawClient, connect, server_minor
from shoal.kube.status import MergePatchStatus, StatusWriter
from shoal.kube.volumes import KubeVolumeWriter
from shoal.operator_app import kopf_glue
from shoal.operator_app.health import Health, run_vital
from shoal.operator_app.leadership import Leadership
from shoal.operator_app.memory import trim_forever
from shoal.operator_app.metrics import HealthServer, PromMetrics
from shoal.operator_app.podgroups import PodGroupStatus
from shoal.operator_app.profiles import ProfileController, Profiles
from shoal.operator_app.secure_serving import auth_middleware, server_context
from shoal.operator_app.settings import GC_THRESHOLDS, RunSettings, tune_gc
from shoal.operator_app.webview import FleetRoutes
from shoal.plugins.defaultpreemption.ports import PREEMPTION_EXECUTOR
from shoal.plugins.dynamicresources.ports import CLAIM_WRITER
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry
from shoal.plugins.volumebinding.ports import VOLUME_WRITER

__all__ = ["GC_THRESHOLDS", "RunSettings", "ShoalOperator", "tune_gc"]

log = logging.getLogger("shoal.operator")


class _Stopped(Exception):
    """kopf has stopped (SIGTERM/SIGINT): the process group winds down."""


class ShoalOperator:
    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        self.metrics = PromMetrics()
        self.health = Health()
        self.informer = Informer()
        self.informer.watch(KIND_PROFILES, self._on_profile)
        self.informer.watch(KIND_COMPOSITE_PODGROUPS, self._on_composite)
        for group_kind in POD_GROUP_KINDS:  # scheduler-plugins' and native PodGroups: one gang model
            self.informer.watch(group_kind, self._on_pod_group)
        self.informer.watch(KIND_NAMESPACES, self._on_namespace, gone=self._namespace_gone)
        self.informer.watch(KIND_NODES, self._on_node, gone=self._node_gone)
        for kind in STORE_KINDS:
            self.informer.watch(kind, self._on_stored, gone=self._stored_gone(kind))

        self.informer.watch(KIND_PDBS, self._on_pdb, gone=self._pdb_gone)
        for owner_kind, kind in SPREAD_SELECTOR_KINDS.items():
            self.informer.watch(kind, self._on_spread_selector, gone=self._spread_selector_gone(owner_kind))
        self.informer.watch(KIND_PODS, self._on_pod, gone=self._pod_gone)
        self.api: client.ApiClient | None = None
        self.raw: RawClient | None = None
        self.reporter: KubeReporter | None = None
        #: the secure port's server (HTTPS, authenticated /metrics), and the plain-HTTP one if asked
        self.server: HealthServer | None = None
        self.insecure_server: HealthServer | None = None
        self.elector: LeaseElector | None = None
        # the parts, made by compose()
        self.scheduler: Scheduler | None = None
        self.profiles: ProfileController | None = None
        self.podgroups: PodGroupStatus | None = None
        self.leadership: Leadership | None = None
        self._primed = asyncio.Event()
        #: the process group's tasks other than kopf's, stopped by kopf's clean-up handler
        self._background: list[asyncio.Task[None]] = []

    @property
    def leading(self) -> bool:
        return self.leadership is not None and self.leadership.leading

    def compose(self, scheduler: Scheduler, writer: StatusWriter, *, raw: RawClient | None = None) -> None:
        """Build the parts around ``scheduler``. ``start()`` does it with the API server's writer;
        tests call it with their own ``writer`` (and no ``raw``: nothing else is called)."""
        s = self.settings
        self.scheduler = scheduler
        self.profiles = ProfileController(
            Profiles(scheduler, load_registry(), DEFAULT_PLUGINS), writer, lambda: self.leading, self.metrics
        )
        self.podgroups = PodGroupStatus(
            scheduler, writer, lambda: self.leading, raw=raw, interval=s.status_interval
        )
        self.leadership = Leadership(
            scheduler,
            self.metrics,
            self.health,
            elector=self.elector,
            renew_deadline=s.renew_deadline,
            on_lead=self._on_lead,
            side_tasks=self._term_side_tasks,
        )

    # -- the process ---------------------------------------------------------------------------
    async def run(self) -> None:
        """kopf, the vital tasks and the re-list checks, until kopf stops; then close everything."""
        try:
            async with asyncio.TaskGroup() as process:
                self._background = [
                    process.create_task(self._vital(), name="vital"),
                    process.create_task(self._relist(), name="relist"),
                    process.create_task(trim_forever(), name="trim-memory"),
                ]
                process.create_task(self._kopf(), name="kopf")
        except* _Stopped:
            pass
        finally:
            await self.close()

    def registry(self) -> kopf.OperatorRegistry:
        reg = kopf.OperatorRegistry()
        kopf.on.login(registry=reg)(self._login)
        kopf.on.startup(registry=reg)(self._startup)
        kopf.on.cleanup(registry=reg)(self._cleanup)
        self.informer.install(reg)
        return reg

    def configure(self, settings: kopf.OperatorSettings) -> None:
        kopf_glue.configure(
            settings,
            self.settings.watch_timeout,
            primed=self.informer.primed_versions,
            unchanged=self.informer.replayed_unchanged,
        )
        self.informer.configure(settings)

    async def _kopf(self) -> None:
        settings = kopf.OperatorSettings()
        self.configure(settings)
        try:
            await kopf.operator(
                registry=self.registry(), settings=settings, clusterwide=True, standalone=True
            )
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # cancelled by us, not a stop of kopf's own
        raise _Stopped

    async def _login(self, **kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf_glue.login(self.settings.kubeconfig, **kwargs)

    async def _startup(self, **_: Any) -> None:
        """kopf's start-up handler: kopf watches only once the caches are primed. A start that
        fails half-way is undone (ports released, clients closed) before kopf tries it again."""
        try:
            await self.start()
        except Exception:
            await self.close()
            raise
        self._primed.set()

    async def _cleanup(self, **_: Any) -> None:
        """kopf's clean-up handler (on SIGTERM, before kopf cancels every task it did not start):
        stop the vital tasks — stepping down gracefully and releasing the Lease — and the re-list
        checks while the reporter still writes, then close."""
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.close()

    async def _vital(self) -> None:
        await self._primed.wait()
        assert self.leadership is not None
        assert self.podgroups is not None
        tasks: dict[str, Coroutine[Any, Any, Any]] = {
            "election" if self.elector is not None else "leadership": self.leadership.run(),
            "podgroup-status": self.podgroups.run(),
        }
        self.health.started = True
        log.info("shoal started as %s (%s)", self.settings.identity, self._ports())
        await run_vital(self.health, tasks)  # returns when one ended: broken, and no longer leading

    async def _relist(self) -> None:
        await self._primed.wait()
        assert self.raw is not None
        await self.informer.run(self.raw)

    def _ports(self) -> str:
        ports = [f"https :{self.server.port}"] if self.server is not None else []
        if self.insecure_server is not None:
            ports.append(f"plain http :{self.insecure_server.port}")
        return "metrics on " + ", ".join(ports) if ports else "no metrics port"

    async def _serve(self) -> None:
        """The secure port (HTTPS; /metrics needs a token the API server accepts and allows to
        get it) and, only when asked for, the plain-HTTP one."""
        s = self.settings
        assert self.raw is not None
        routes = FleetRoutes(self.scheduler).routes() if s.web and self.scheduler is not None else []
        if s.metrics_port:
            tls = server_context(s.tls_cert_file, s.tls_private_key_file, host=s.metrics_host)
            self.server = HealthServer(
                self.metrics,
                self.health.ready,
                alive=self.health.alive,
                host=s.metrics_host,
                port=s.metrics_port,
                tls=tls,
                middlewares=[auth_middleware(DelegatedAuth(self.raw))],
                routes=routes,
            )
            await self.server.start()
        if s.insecure_metrics_port:
            self.insecure_server = HealthServer(
                self.metrics,
                self.health.ready,
                alive=self.health.alive,
                host=s.metrics_host,
                port=s.insecure_metrics_port,
                routes=routes,
            )
            await self.insecure_server.start()

    async def start(self) -> None:
        """API client, reporter, scheduler, parts, health server; then prime the caches."""
        s = self.settings
        self.api = await connect(s.kubeconfig)
        self.raw = RawClient(self.api)
        self.reporter = KubeReporter(
            self.api,
            instance=s.identity,
            enabled=lambda: self.leading or self._draining(),
            on_dropped=self.metrics.event_dropped,
        )
        self.reporter.start()
        binder = KubeBinder(self.api, concurrency=s.binding_concurrency)
        scheduler = Scheduler(
            load_registry(), binder, reporter=self.reporter, metrics=self.metrics, defaults=DEFAULT_PLUGINS
        )
        if s.leader_elect:
            self.elector = LeaseElector(
                self.api,
                namespace=s.lease_namespace,
                name=s.lease_name,
                identity=s.identity,
                lease_duration=s.lease_duration,
                renew_deadline=s.renew_deadline,
                retry_period=s.retry_period,
            )
        scheduler.handle.extras[VOLUME_WRITER] = KubeVolumeWriter(self.raw)  # VolumeBinding's PreBind
        scheduler.handle.extras[CLAIM_WRITER] = KubeClaimWriter(self.raw)  # DynamicResources' PreBind
        scheduler.handle.extras[PREEMPTION_EXECUTOR] = KubePreemptionExecutor(
            self.raw, instance=s.identity, claim_condition=self.reporter.claim_condition
        )
        self.compose(scheduler, MergePatchStatus(self.raw), raw=self.raw)
        if await server_minor(self.raw) >= 38 and self.podgroups is not None:
            self.podgroups.validation_reason = REASON_POD_GROUP_ERROR  # as kube-scheduler 1.38 writes it
        await self._serve()
        await self.prime()
        gc.freeze()  # the primed cache is long-lived: keep it out of every future collection

    async def prime(self) -> None:
        """Fill the cache before anything is scheduled, as kube-scheduler waits for its informers:
        scheduling before the nodes and the other schedulers' pods are known could over-commit."""
        assert self.raw is not None
        assert self.scheduler is not None
        assert self.podgroups is not None
        began = time.monotonic()
        await self.informer.prime(self.raw)
        await self.podgroups.load_finished(self.raw)
        log.info(
            "cache primed in %.1f s: %d nodes, %d pods, %d profiles",
            time.monotonic() - began,
            len(self.scheduler.cache.table),
            len(self.scheduler.cache.pods),
            len(self.profiles.profiles.objects) if self.profiles is not None else 0,
        )

    async def close(self) -> None:
        """Step down (bindings finish or are released), release the Lease, close the clients.
        Idempotent: kopf's clean-up handler calls it, and the process group's end."""
        if self.leadership is not None:
            await self.leadership.follow(False)
        if self.elector is not None:
            await self.elector.release()
        reporter, servers, api = self.reporter, (self.server, self.insecure_server), self.api
        self.reporter = self.server = self.insecure_server = self.api = None
        if reporter is not None:
            await reporter.stop()
        for server in servers:
            if server is not None:
                await server.stop()
        if api is not None:
            await api.close()
            log.info("shoal stopped")

    def _draining(self) -> bool:
        return self.leadership is not None and self.leadership.draining

    # -- a leadership term -----------------------------------------------------------------------
    async def _on_lead(self) -> None:
        """A new term publishes the statuses it computed, whatever an earlier term wrote."""
        assert self.profiles is not None
        assert self.podgroups is not None
        self.profiles.new_term()
        self.podgroups.new_term()
        await self.profiles.write_all()

    def _term_side_tasks(self) -> dict[str, Coroutine[Any, Any, Any]]:
        if not self.settings.bootstrap_profiles or self.raw is None:
            return {}
        # new profiles arrive through the watch like any other
        return {
            "bootstrap-profiles": bootstrap_profiles(
                self.raw,
                self.settings.bootstrap_profiles,
                load_registry(),
                DEFAULT_PLUGINS,
                leading=lambda: self.leading,
            )
        }

    # -- watch handlers --------------------------------------------------------------------------
    async def _on_namespace(self, event: Event[NamespaceInfo]) -> None:
        if self.scheduler is not None:
            ns = event.obj
            self.scheduler.on_namespace(ns.name, ns.labels, deleted=event.deleted)

    def _namespace_gone(self, name: str) -> None:
        if self.scheduler is not None:
            self.scheduler.on_namespace(name, None, deleted=True)

    async def _on_node(self, event: Event[NodeSpec]) -> None:
        if self.scheduler is not None:
            if event.deleted:
                self.scheduler.on_node_deleted(event.obj.name)
            else:
                self.scheduler.on_node(event.obj)

    def _node_gone(self, name: str) -> None:
        if self.scheduler is not None:
            self.scheduler.on_node_deleted(name)

    async def _on_stored(self, event: Event[Any]) -> None:
        """A storage or DRA object: its plugin package's store takes it."""
        if self.scheduler is not None:
            self.scheduler.on_object(event.obj, deleted=event.deleted)

    def _stored_gone(self, kind: Kind[Any]) -> Callable[[str], None]:
        """Forget an object deleted while kopf re-listed (``kind``'s identity is its key)."""

        def gone(key: str) -> None:
            namespace, _, name = key.rpartition("/")
            meta = {"name": name, "namespace": namespace} if namespace else {"name": key}
            if self.scheduler is not None:
                self.scheduler.on_object(kind.decode({"metadata": meta}), deleted=True)

        return gone

    async def _on_pdb(self, event: Event[PDBInfo]) -> None:
        """PDBs only steer preemption: no pod becomes schedulable when one changes."""
        if self.scheduler is not None:
            if event.deleted:
                self.scheduler.cache.pdbs.pop(event.obj.key, None)
            else:
                self.scheduler.cache.pdbs[event.obj.key] = event.obj

    def _pdb_gone(self, key: str) -> None:
        if self.scheduler is not None:
            self.scheduler.cache.pdbs.pop(key, None)

    async def _on_spread_selector(self, event: Event[SelectorOwner]) -> None:
        """Only the selector of later cycles' default spread constraints changes: no pod is woken
        (kube-scheduler's PodTopologySpread registers no event for these kinds either)."""
        if self.scheduler is not None:
            store = self.scheduler.cache.spread_selectors
            if event.deleted:
                store.remove(event.obj.kind, event.obj.key)
            else:
                store.upsert(event.obj)

    def _spread_selector_gone(self, owner_kind: str) -> Callable[[str], None]:
        """Gone in a re-list: ``owner_kind`` says which of the four kinds the key is of."""

        def gone(key: str) -> None:
            if self.scheduler is not None:
                self.scheduler.cache.spread_selectors.remove(owner_kind, key)

        return gone

    async def _on_pod(self, event: Event[PodInfo]) -> None:
        if self.scheduler is None:
            return
        pod = event.obj
        if pod.group_key is not None and self.podgroups is not None:
            self.podgroups.on_member(pod, event.raw, event.deleted)
        self.scheduler.on_pod(pod, deleted=event.deleted)
        if (event.deleted or pod.bound) and self.reporter is not None:
            self.reporter.forget(pod.uid)

    def _pod_gone(self, uid: str) -> None:
        if self.scheduler is not None and (cached := self.scheduler.cache.pods.get(uid)) is not None:
            self.scheduler.on_pod(cached, deleted=True)

    async def _on_profile(self, event: Event[ProfileObject]) -> None:
        if self.profiles is not None:
            await self.profiles.on_event(event)

    async def _on_composite(self, event: Event[CompositeGroupInfo]) -> None:
        if self.scheduler is None or self.podgroups is None:
            return
        self.scheduler.on_composite(event.obj, deleted=event.deleted)
        self.podgroups.on_composite(event)

    async def _on_pod_group(self, event: Event[PodGroupInfo]) -> None:
        if self.scheduler is None or self.podgroups is None:
            return
        self.scheduler.on_pod_group(event.obj, deleted=event.deleted)
        self.podgroups.on_group(event)
