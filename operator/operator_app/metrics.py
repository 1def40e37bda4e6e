"""Prometheus metrics named like kube-scheduler's, and the health/metrics HTTP server (aiohttp).

Series:

* ``scheduler_schedule_attempts_total{result,profile}`` — result: scheduled, unschedulable, error
* ``scheduler_pending_pods{queue}`` — queue: active, backoff, unschedulable, gated
* ``scheduler_scheduling_attempt_duration_seconds{result,profile}``
* ``scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}``
* ``scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`` — each plugin
  call, in one scheduling cycle out of ten (as kube-scheduler samples it)
* ``scheduler_permit_wait_duration_seconds{result}``
* ``scheduler_pod_scheduling_sli_duration_seconds{attempts}`` — from a pod's first scheduling
  attempt to its binding (kube-scheduler's SLI: the time gated before it is left out), and
  ``scheduler_pod_scheduling_attempts`` (attempts a bound pod took)
* ``shoal_leader`` (1 on the replica that schedules) and ``shoal_profiles{ready}``
* ``shoal_events_dropped_total`` — events and conditions the reporter dropped (its queue was full)
* ``shoal_gang_timeouts_total{profile}`` — gangs whose members timed out waiting at Permit
* ``process_*`` and ``python_gc_*``, ``python_info`` (prometheus-client's collectors)

Endpoints: ``/metrics``, ``/healthz`` (the event loop answers), ``/livez`` (and no vital task —
leader election, the scheduling loop, the PodGroup status loop — has ended), ``/readyz`` (the
caches are filled and nothing is broken). On the secure port (HTTPS, the default) ``/metrics``
needs a bearer token allowed to ``get`` it (:mod:`.secure_serving`); the health paths never do.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics import MetricWrapperBase


def _exp(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class PromMetrics:
    """Implements shoal.core.framework.metrics.Metrics."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        #: labelled children, by (metric, *label values), for every per-call observation:
        #: client_python's ``labels()`` checks and locks on every call (shoal never removes a label set)
        self._children: dict[tuple[object, ...], Any] = {}
        r = self.registry
        self.attempts = Counter(
            "scheduler_schedule_attempts", "Scheduling attempts by result.", ["result", "profile"], registry=r
        )
        self.pending_pods = Gauge("scheduler_pending_pods", "Pending pods by queue.", ["queue"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency (scheduling cycle, and binding for scheduled pods).",
            ["result", "profile"],
            buckets=_exp(0.001, 2, 15),
            registry=r,
        )
        self.point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency of running the plugins of one extension point.",
            ["extension_point", "status", "profile"],
            buckets=_exp(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Latency of one plugin at one extension point (sampled: one cycle in ten).",
            ["plugin", "extension_point", "status"],
            buckets=_exp(0.00001, 1.5, 20),
            registry=r,
        )
        self.permit_wait_seconds = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "Time pods waited at their Permit gate.",
            ["result"],
            buckets=_exp(0.001, 2, 15),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Preemption attempts in the cluster till now.", registry=r
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=_exp(1, 2, 7),
            registry=r,
        )
        self.leader = Gauge("shoal_leader", "1 when this replica holds the lease and schedules.", registry=r)
        self.profiles = Gauge("shoal_profiles", "SchedulingProfiles by readiness.", ["ready"], registry=r)
        for queue in ("active", "backoff", "unschedulable", "gated"):
            self.pending_pods.labels(queue).set(0)
        self._day_two(r)

    def _day_two(self, r: CollectorRegistry) -> None:
        """The pod scheduling SLI, shoal's own counters, and the process and runtime collectors."""
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from its first scheduling attempt to its binding; "
            "may involve several attempts.",
            ["attempts"],
            buckets=_exp(0.01, 2, 20),
            registry=r,
        )
        self.scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_exp(1, 2, 5),
            registry=r,
        )
        self.events_dropped = Counter(
            "shoal_events_dropped",
            "Events and pod conditions dropped: the reporter's queue was full.",
            registry=r,
        )
        self.gang_timeouts = Counter(
            "shoal_gang_timeouts",
            "Gangs whose members timed out waiting at Permit for their quorum.",
            ["profile"],
            registry=r,
        )
        # process_* (CPU, memory, file descriptors), python_gc_*, python_info, as client_golang's
        # process and Go collectors give kube-scheduler's
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        PlatformCollector(registry=r)

    def _child(self, metric: MetricWrapperBase, *labels: str) -> Any:
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self._child(self.attempts, result, profile).inc()
        self._child(self.attempt_duration, result, profile).observe(seconds)

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        self._child(self.point_duration, point, status, profile).observe(seconds)

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        self._child(self.plugin_duration, plugin, point, status).observe(seconds)

    def permit_wait(self, result: str, seconds: float) -> None:
        self._child(self.permit_wait_seconds, result).observe(seconds)

    def pending(self, queue: str, count: int) -> None:
        self._child(self.pending_pods, queue).set(count)

    def pod_scheduled(self, attempts: int, seconds: float) -> None:
        self._child(self.sli_duration, attempts_label(attempts)).observe(seconds)
        self.scheduling_attempts.observe(attempts)

    def gang_timeout(self, profile: str) -> None:
        self._child(self.gang_timeouts, profile).inc()

    def event_dropped(self) -> None:
        self.events_dropped.inc()

    def preemption(self, victims: int) -> None:
        self.preemption_attempts.inc()
        if victims:
            self.preemption_victims.observe(victims)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def attempts_label(attempts: int) -> str:
    """kube-scheduler's ``attempts`` label: capped at "15+" to bound the series."""
    return "15+" if attempts >= 15 else str(attempts)


class HealthServer:
    """/metrics, /healthz, /livez, /readyz on one port (kube-scheduler serves them together).

    ``tls`` makes it HTTPS; ``middlewares`` guard it (:func:`.secure_serving.auth_middleware`).
    Without them it is the plain-HTTP port, open to anyone who can reach it."""

    def __init__(
        self,
        metrics: PromMetrics,
        ready: Callable[[], bool],
        *,
        host: str,
        port: int,
        alive: Callable[[], bool] = lambda: True,
        tls: ssl.SSLContext | None = None,
        middlewares: Sequence[Any] = (),
        routes: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.tls = tls
        #: more GET routes served beside these (the fleet page: operator_app/webview.py)
        self.routes = list(routes)
        self.middlewares = list(middlewares)
        self.metrics = metrics
        self.ready = ready
        self.alive = alive
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=self.middlewares)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._ok)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        for path, handler in self.routes:
            app.router.add_get(path, handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
        await site.start()
        if self.port == 0 and site._server is not None:  # tests ask for any free port
            sockets = getattr(site._server, "sockets", None) or []
            if sockets:
                self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _livez(self, request: web.Request) -> web.Response:
        if self.alive():
            return web.Response(text="ok")
        return web.Response(status=503, text="a vital task ended; see the log")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready")
