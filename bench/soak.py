"""make soak: a real cluster's churn for SOAK_MINUTES, shoal and kube-scheduler side by side.

For each scheduler (same seed, same churn; both at once by default, each on its own control
plane, or ``--sequential``), on a fresh control plane whose nodes are played by KWOK (pods turn
Running; a Job's pods complete, as its "fast" stages do), with the scheduler run as **two
replicas with leader election** (bench/replicas.py: a replica that dies is started again, as its
kubelet would):

* **node churn as an autoscaler does it**: every ``node_churn_s`` a node with a new unique name
  is added, and the oldest churned node is cordoned, drained (its pods deleted) and deleted;
* **workload churn**: a steady stream of Job-owned pods that run and complete (the harness then
  deletes them, as the Job TTL controller would), service pods that run for a random lifetime,
  and gangs of four (scheduler-plugins PodGroups: shoal places them whole; kube-scheduler, which
  has no gang plugin, one by one) that run and are deleted;
* **DRA**: ``gpu_nodes`` nodes whose driver publishes 8 GPUs in a ResourceSlice, pods that claim
  one from a ResourceClaimTemplate (kube-controller-manager's resourceclaim controller makes the
  claim and removes it after the pod), and every ``republish_every_s`` one node's driver
  republishing its slice under a new pool generation, as after a driver restart;
* **preemption**: a pool of tainted nodes kept full of low-priority fillers, and every
  ``preempt_every_s`` a high-priority pod that fits only once two fillers are evicted (its
  create → bound, victims' graceful deletion included, is reported apart from the stream's);
* **measured per window** (``window_s``): the leader's RSS, both replicas' CPU per pod bound,
  create → bound p50 / p99 (a watch in the harness sees each binding), pods pending longer
  than a minute; the invariant checker every minute (no over-commit, no pod on a deleted
  node, no pod bound twice, no device allocated to two claims, and for shoal no partial gang);
* **at the end**, after the stream stops and a drain: every pod created is bound, deleted by the
  harness (or evicted by a preemption), or pending with ``PodScheduled=False`` and a reason —
  anything else is *lost*.

* **faults on a timer** (``fault_every_s``; ``make soak``: every 5 minutes), in turn: the API
  server restarted (etcd keeps its data; every watch is cut and resumes from a resource version
  the new watch cache no longer holds: 410 Gone, a relist), the API server stalled (SIGSTOP for
  ``stall_s``, then SIGCONT), the leader stalled as long while the load goes on (the standby
  takes the Lease once it expires; the stalled one wakes to find it lost), and the leader
  SIGKILLed (the standby takes over; the killed one comes back as the standby). For each: when
  it hit, and how long from its end until a pod created after it was bound (``recovery_s``).

Writes bench/results/soak.json (``rss_growth``, ``p99_drift``, ``violations``, ``lost_pods``
and the same for kube-scheduler with ``_kube``), docs/soak.png, and the "soak" section of
docs/reliability.md. ``make test`` runs a 3-minute version for shoal (tests/reliability/test_soak.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.e2e import machine
from bench.e2e_dra import TEMPLATE, cluster_objects, gpu_slice
from bench.replicas import Replicas
from bench.report import revision, write_section
from shoal.kube.listing import list_objects
from shoal.kube.rest import RawClient
from shoal.testing.cluster import apply_crds, create, list_all, wait_for
from shoal.testing.controlplane import ControlPlane, _die_with_parent
from shoal.testing.invariants import check_invariants
from shoal.testing.kubecontrollermanager import DRA_CONTROLLERS, KubeControllerManagerProcess
from shoal.testing.kwok import KWOK_ANNOTATION, KwokProcess
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_priority_class

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "soak.json"
PLOT = ROOT / "docs" / "soak.png"
NS = "soak"


@dataclass
class SoakConfig:
    minutes: float = 60.0
    window_s: float = 300.0
    nodes: int = 1000
    node_churn_s: float = 5.0
    job_pods_per_s: float = 5.0
    service_pods_per_s: float = 1.0
    gang_every_s: float = 20.0
    lifetime_s: tuple[float, float] = (30.0, 120.0)
    #: a high-priority pod that must preempt, this often (0: none): the pool of POOL_NODES
    #: tainted nodes is kept full of low-priority fillers, and each such pod needs two of them gone
    preempt_every_s: float = 30.0
    #: GPU nodes whose DRA driver publishes 8 GPUs each (0: no DRA), pods/s that each claim one
    #: GPU from a ResourceClaimTemplate and run a service's lifetime, and how often one node's
    #: driver republishes its slice (a new pool generation, then the old slice deleted)
    gpu_nodes: int = 20
    dra_pods_per_s: float = 0.3
    republish_every_s: float = 20.0
    seed: int = 1
    #: a fault of FAULTS, in turn, every this many seconds (0: none)
    fault_every_s: float = 0.0
    #: how long a stall (API server or scheduler) lasts
    stall_s: float = 30.0


#: the faults a soak injects on its timer, in this order
FAULTS = ("apiserver-restart", "apiserver-stall", "scheduler-stall", "leader-kill")
#: the preemption pool: nodes of 4 CPUs that only fillers (1 CPU, low priority) and preemptors
#: (2 CPUs, high priority) tolerate
POOL_NODES = 5
POOL_CPUS = 4
POOL = {"soak/pool": "preempt"}
POOL_TAINT = {"key": "soak/pool", "value": "preempt", "effect": "NoSchedule"}
LOW, HIGH = "soak-low", "soak-high"
#: etcd compacted this often (the API server's default is 5 minutes)
COMPACTION = "--etcd-compaction-interval=1m"


@dataclass
class Fault:
    name: str
    #: seconds into the churn it began, and how long it lasted
    t: float
    seconds: float
    #: from its end to the binding of the first pod created after it (None: none was bound)
    recovery_s: float | None = None


@dataclass
class Window:
    t: float
    rss_mb: float
    cpu_ms_per_pod: float | None
    bound: int
    p50_ms: float | None
    p99_ms: float | None
    pending_over_60s: int


@dataclass
class Run:
    scheduler: str
    windows: list[Window] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    created: int = 0
    bound: int = 0
    faults: list[Fault] = field(default_factory=list)
    #: scheduler replicas started again (after a leader kill, or exiting on a lost Lease)
    restarts: int = 0
    #: high-priority pods created, and bound (each bound one preempted two fillers)
    preemptors: int = 0
    preemptors_bound: int = 0
    #: fillers deleted by the scheduler (preemption victims)
    victims: int = 0
    #: ResourceSlices republished (a GPU node's driver, a new pool generation)
    republished: int = 0
    #: pods with a GPU claim created, and bound
    gpu_pods: int = 0
    gpu_bound: int = 0
    #: a preemptor's create -> bound (its victims' graceful deletion included), median and worst
    preempt_p50_s: float | None = None
    preempt_max_s: float | None = None

    def rss_growth(self, after_s: float) -> float | None:
        """RSS of the last window over that of the first window ending after ``after_s`` (the
        warm-up), less one."""
        base = next((w for w in self.windows if w.t >= after_s), None)
        if base is None or base is self.windows[-1]:
            base = self.windows[0] if len(self.windows) > 1 else None
        if base is None:
            return None
        return self.windows[-1].rss_mb / base.rss_mb - 1.0

    def p99_drift(self) -> float | None:
        first = next((w.p99_ms for w in self.windows if w.p99_ms), None)
        last = self.windows[-1].p99_ms if self.windows else None
        return None if not first or not last else last / first


def fake_node(name: str, *, pool: bool = False) -> dict[str, Any]:
    if pool:
        node = make_node(name, cpu=str(POOL_CPUS), memory="16Gi", pods=110, labels=POOL, taints=[POOL_TAINT])
    else:
        node = make_node(name, cpu="32", memory="128Gi", pods=110)
    node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
    return node


def job_owned(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod as a Job's controller makes it (KWOK completes pods a Job owns)."""
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "stream",
            "uid": str(uuid.uuid4()),
            "controller": True,
        }
    ]
    pod["spec"]["restartPolicy"] = "Never"
    return pod


class Soak:
    """One scheduler through the churn."""

    def __init__(self, kind: str, cfg: SoakConfig, workdir: Path) -> None:
        self.kind, self.cfg, self.workdir = kind, cfg, workdir
        self.rng = random.Random(cfg.seed)
        self.run = Run(kind)
        self.created_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.deleted: set[str] = set()
        self.expiry: dict[str, float] = {}  # service pods / gangs: name -> when to delete
        self.churned: list[str] = []
        self.gangs: dict[str, float] = {}  # PodGroup -> when it is deleted with its members
        self.next_sweep = 0.0
        #: GPU node -> its driver's current pool generation (the slice of generation 1 is
        #: ``<node>-gpu``, later ones ``<node>-gpu-<generation>``)
        self.slices: dict[str, int] = {}
        #: the preemption pool's fillers, and its preemptors still running -> when each was created
        self.fillers: set[str] = set()
        self.preemptors: dict[str, float] = {}
        #: create -> bound seconds of each preemptor (victims' graceful deletion included)
        self.preempt_latency: list[float] = []
        self.api: client.ApiClient | None = None
        self.cp: ControlPlane
        self._fault_ended = 0.0
        self._faults_started = 0
        #: a leader kill's takeover and the replacement replica's start, while under way
        self._takeover: asyncio.Task[None] | None = None
        #: how to end the stall on (SIGCONT), and the timer that will
        self._stalled: tuple[Callable[[], None], asyncio.TimerHandle] | None = None

    async def go(self) -> Run:
        async with contextlib.AsyncExitStack() as stack:
            cp = self.cp = ControlPlane(workdir=self.workdir / "cp", extra_apiserver_args=[COMPACTION])
            await asyncio.to_thread(cp.start)
            stack.push_async_callback(asyncio.to_thread, cp.stop)
            self.api = api = await config.new_client_from_config(config_file=str(cp.kubeconfig))
            stack.push_async_callback(api.close)
            await apply_crds(api)
            await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            kwok = KwokProcess(cp.kubeconfig, self.workdir / "kwok")
            await asyncio.to_thread(kwok.start)
            stack.callback(kwok.stop)
            if self.cfg.gpu_nodes > 0:
                # the resourceclaim controller makes each pod's claim from its template, and
                # deallocates and deletes it once the pod is gone, as in a cluster
                kcm = KubeControllerManagerProcess(
                    cp.kubeconfig, self.workdir / "kcm", controllers=DRA_CONTROLLERS
                )
                await asyncio.to_thread(kcm.start)
                stack.callback(kcm.stop)
            await self._nodes(api)
            sched = Replicas(self.kind, cp, self.workdir / "sched")
            stack.callback(sched.stop)
            await sched.start(api)
            await self._churn(api, sched)
        return self.run

    async def _nodes(self, api: client.ApiClient) -> None:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                await create(api, fake_node(f"base-{i:05d}"))

        await asyncio.gather(*(one(i) for i in range(self.cfg.nodes)))
        if self.cfg.preempt_every_s > 0:
            for i in range(POOL_NODES):
                await create(api, fake_node(f"pool-{i}", pool=True))
            await create(api, make_priority_class(LOW, 10))
            await create(api, make_priority_class(HIGH, 1000))
        if self.cfg.gpu_nodes > 0:
            device_class, template = cluster_objects(0, NS)
            await create(api, device_class)
            await create(api, template)
            for i in range(self.cfg.gpu_nodes):
                node = f"gpu-{i:03d}"
                await create(api, fake_node(node))
                await create(api, gpu_slice(node))
                self.slices[node] = 1

    async def _churn(self, api: client.ApiClient, sched: Replicas) -> None:
        cfg = self.cfg
        watcher = asyncio.create_task(self._watch(RawClient(api)))
        churner = asyncio.create_task(self._node_loop(api))
        began = time.monotonic()
        end = began + cfg.minutes * 60
        next_window = began + cfg.window_s
        next_check = began + 60
        cpu0, bound0, window_start = sched.cpu(), 0, began
        ticks = {"job": began, "service": began, "gang": began, "preempt": began, "dra": began}
        next_republish = began + cfg.republish_every_s
        # the first window stays free of faults too (p99_drift compares it with the last)
        first = max(cfg.fault_every_s, cfg.window_s + 5.0)
        next_fault = began + first if cfg.fault_every_s > 0 else float("inf")
        n = 0
        try:
            while time.monotonic() < end:
                now = time.monotonic()
                n += 1
                # a fault needs load after it to show its recovery, and the last window stays free
                # of faults (p99_drift compares it with the first): none in the churn's last stretch
                # (15 s: about what an API server's restart takes here)
                room = end - now >= max(min(60.0, cfg.fault_every_s), cfg.window_s + cfg.stall_s + 15.0)
                idle = self._stalled is None and (self._takeover is None or self._takeover.done())
                if now >= next_fault and idle and room:
                    self._fault(FAULTS[self._faults_started % len(FAULTS)], sched, now - began)
                    self._faults_started += 1
                    # from the fault's start: a slow API server restart does not push the
                    # faults after it out of the churn
                    next_fault = now + cfg.fault_every_s
                    continue
                self._recovered()
                jobs = int((now - ticks["job"]) * cfg.job_pods_per_s)
                services = int((now - ticks["service"]) * cfg.service_pods_per_s)
                try:
                    if jobs:
                        ticks["job"] += jobs / cfg.job_pods_per_s
                        await self._pods(api, sched, jobs, job=True)
                    if services:
                        ticks["service"] += services / cfg.service_pods_per_s
                        await self._pods(api, sched, services, job=False)
                    if now - ticks["gang"] >= cfg.gang_every_s:
                        ticks["gang"] = now
                        await self._gang(api, sched)
                    claims = int((now - ticks["dra"]) * cfg.dra_pods_per_s) if self.slices else 0
                    if claims:
                        ticks["dra"] += claims / cfg.dra_pods_per_s
                        await self._pods(api, sched, claims, job=False, gpu=True)
                    if self.slices and now >= next_republish:
                        next_republish = now + cfg.republish_every_s
                        await self._republish(api)
                    if cfg.preempt_every_s > 0:
                        preempt = now - ticks["preempt"] >= cfg.preempt_every_s
                        if await self._pool(api, sched, preempt=preempt):
                            ticks["preempt"] = now
                    await self._reap(api)
                    if now >= next_check:
                        next_check += 60
                        self.run.violations += await check_invariants(api, gangs=self.kind == "shoal")
                except (client.ApiException, aiohttp.ClientError, OSError) as exc:
                    # a connection the restarted API server dropped: this turn's work is retried
                    print(f"  [{self.kind} soak] {type(exc).__name__}: {exc}"[:300], flush=True)
                if now >= next_window:
                    cpu = sched.cpu()
                    bound = len(self.bound_at)
                    self.run.windows.append(
                        self._window(now - began, sched, cpu - cpu0, bound - bound0, window_start)
                    )
                    cpu0, bound0, window_start = cpu, bound, now
                    next_window += cfg.window_s
                    w = self.run.windows[-1]
                    print(
                        f"  [{self.kind} soak] {w.t / 60:5.1f} min: RSS {w.rss_mb:.0f} MB, p99 {w.p99_ms} ms, "
                        f"{w.bound} bound, {w.pending_over_60s} pending > 60 s",
                        flush=True,
                    )
                await asyncio.sleep(0.2)
            now = time.monotonic()
            if now - window_start >= cfg.window_s / 2:  # the last window, up to the churn's end
                cpu = sched.cpu()
                self.run.windows.append(
                    self._window(now - began, sched, cpu - cpu0, len(self.bound_at) - bound0, window_start)
                )
            churner.cancel()
            self._resume_stalled()
            await self._settle(api)
            self._recovered()
        finally:
            self._resume_stalled()
            if self._takeover is not None:  # a leader kill still settling
                try:
                    await asyncio.wait_for(self._takeover, 90)
                except Exception as exc:  # (not survived: its recovery stays unmeasured)
                    print(f"  [{self.kind} soak] leader kill: {type(exc).__name__}: {exc}"[:300], flush=True)
            self.run.restarts = sched.restarts
            self.run.preemptors_bound = len(self.preempt_latency)
            self.run.gpu_pods = sum(p.startswith("gpu-") for p in self.created_at)
            self.run.gpu_bound = sum(p.startswith("gpu-") for p in self.bound_at)
            if self.preempt_latency:
                self.run.preempt_p50_s = round(statistics.median(self.preempt_latency), 1)
                self.run.preempt_max_s = round(max(self.preempt_latency), 1)
            for task in (churner, watcher):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.run.violations += await check_invariants(api, gangs=self.kind == "shoal")

    def _fault(self, name: str, sched: Replicas, t: float) -> None:
        """Start one fault. A restart is over when this returns (the API server answers again);
        a stall (SIGSTOP) ends ``stall_s`` later by a timer on the loop, so the load goes on
        meanwhile (calls to a stalled API server wait for it)."""
        print(f"  [{self.kind} soak] {t / 60:5.1f} min: fault {name}", flush=True)
        began = time.monotonic()
        if name == "apiserver-restart":
            # on the loop's own thread: a child started from a short-lived executor thread would
            # get its parent-death signal when that thread ends (controlplane.py)
            self.cp.restart_apiserver()
            self._ended(name, t, began)
            return
        if name == "leader-kill":
            self._takeover = asyncio.create_task(self._kill_leader(sched, t))
            return
        pid = self.cp.named_pids["kube-apiserver"] if name == "apiserver-stall" else sched.pid
        os.kill(pid, signal.SIGSTOP)

        def resume() -> None:
            self._stalled = None
            os.kill(pid, signal.SIGCONT)
            self._ended(name, t, began)

        self._stalled = (resume, asyncio.get_running_loop().call_later(self.cfg.stall_s, resume))

    async def _kill_leader(self, sched: Replicas, t: float) -> None:
        """The fault is the kill itself: its recovery is the failover (the standby takes the
        Lease once it expires, then schedules); the next fault waits until two replicas run."""
        began = time.monotonic()
        old = await sched.kill_leader()
        self._ended("leader-kill", t, began)
        await sched.settled(old)

    def _ended(self, name: str, t: float, began: float) -> None:
        self._fault_ended = ended = time.monotonic()
        self.run.faults.append(Fault(name, round(t, 1), round(ended - began, 1)))

    def _resume_stalled(self) -> None:
        """A stall still on when the churn ends (or fails) is ended now."""
        if self._stalled is not None:
            resume, timer = self._stalled
            timer.cancel()
            with contextlib.suppress(ProcessLookupError):
                resume()

    def _recovered(self) -> None:
        """The last fault's recovery: its end to the first binding of a pod created after it."""
        if not self.run.faults or self.run.faults[-1].recovery_s is not None:
            return
        after = [
            self.bound_at[p]
            for p, c in self.created_at.items()
            if c >= self._fault_ended and p in self.bound_at
        ]
        if after:
            self.run.faults[-1].recovery_s = round(min(after) - self._fault_ended, 1)

    def _window(self, t: float, sched: Replicas, cpu: float, bound: int, start: float) -> Window:
        lat = sorted(
            (self.bound_at[p] - self.created_at[p]) * 1000
            for p, at in self.bound_at.items()
            # a preemptor waits for its victims' graceful deletion: reported on its own
            if at >= start and p in self.created_at and not p.startswith("hp-")
        )
        now = time.monotonic()
        pending = sum(
            1
            for p, c in self.created_at.items()
            if p not in self.bound_at and p not in self.deleted and now - c > 60
        )
        return Window(
            t=round(t, 1),
            rss_mb=round(sched.rss_mb(), 1),
            cpu_ms_per_pod=round(cpu * 1000 / bound, 2) if bound else None,
            bound=bound,
            p50_ms=round(statistics.median(lat), 1) if lat else None,
            p99_ms=round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1) if lat else None,
            pending_over_60s=pending,
        )

    async def _watch(self, raw: RawClient) -> None:
        """Every binding and deletion as the API server reports it: a listing, then a watch from
        it (listed again when the server says the version is gone)."""
        version = ""
        while True:
            try:
                if not version:
                    version = await self._relist(raw)
                path = f"/api/v1/namespaces/{NS}/pods?watch=1&allowWatchBookmarks=true"
                if version:
                    path += f"&resourceVersion={version}"
                async for event in raw.stream(path, timeout=3600):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    version = str(meta.get("resourceVersion") or version)
                    name = meta.get("name")
                    if event.get("type") == "ERROR":
                        version = ""
                        break
                    if not name:
                        continue
                    if event.get("type") == "DELETED":
                        self._gone(name)
                    else:
                        self._seen(name, obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(0.5)

    async def _republish(self, api: client.ApiClient) -> None:
        """The next GPU node's driver republishes its devices, as after a restart: a slice of
        the next pool generation, then the old one deleted (the same devices, by name, so the
        claims allocated from it stay valid)."""
        custom: Any = client.CustomObjectsApi(api)
        node = min(self.slices, key=lambda n: (self.slices[n], n))
        gen = self.slices[node]
        new = gpu_slice(node)
        new["metadata"]["name"] = f"{node}-gpu-{gen + 1}"
        new["spec"]["pool"]["generation"] = gen + 1
        await create(api, new)
        self.slices[node] = gen + 1
        old = f"{node}-gpu" if gen == 1 else f"{node}-gpu-{gen}"
        with contextlib.suppress(client.ApiException):
            await custom.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", old)
        self.run.republished += 1

    async def _relist(self, raw: RawClient) -> str:
        """The pods as they are now: bindings the watch missed recorded, and fillers and
        preemptors that are gone (deleted while no watch ran) forgotten. Returns the listing's
        resourceVersion, for the watch."""
        started = time.monotonic()
        listed = await list_objects(raw, f"/api/v1/namespaces/{NS}/pods")
        present = set()
        for obj in listed:
            name = obj["metadata"]["name"]
            present.add(name)
            self._seen(name, obj)
        for name in [*self.fillers, *self.preemptors]:
            # one created just before the listing may be missing from it only because its
            # create was still on its way
            if name not in present and self.created_at.get(name, started) < started - 5.0:
                self._gone(name)
        return listed.resource_version

    def _seen(self, name: str, pod: dict[str, Any]) -> None:
        """A pod as the watch or a listing shows it: its binding recorded the first time."""
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound_at:
            self.bound_at[name] = at = time.monotonic()
            if name in self.preemptors:
                self.preempt_latency.append(at - self.created_at.get(name, at))

    def _gone(self, name: str) -> None:
        """A pod deleted: a filler the harness did not delete was a preemption victim."""
        if name in self.fillers:
            self.fillers.discard(name)
            if name not in self.deleted:
                self.run.victims += 1
                self.deleted.add(name)
        self.preemptors.pop(name, None)

    async def _pool(self, api: client.ApiClient, sched: Replicas, *, preempt: bool) -> bool:
        """Keep the pool full of fillers (less what the preemptors hold); with ``preempt``, and
        the pool full, a preemptor: it fits only once two fillers are gone. True if one was made."""
        room = POOL_NODES * POOL_CPUS - 2 * len(self.preemptors)
        missing = room - len(self.fillers)
        if missing > 0:
            fillers = [
                self._pool_pod(f"fill-{uuid.uuid4().hex[:10]}", sched, "1", LOW) for _ in range(missing)
            ]
            self.fillers |= {f["metadata"]["name"] for f in fillers}
            await self._create(api, fillers)
            self.fillers &= self.created_at.keys()  # those whose create failed are not there
            return False
        if not preempt or len(self.preemptors) >= POOL_NODES or not self.fillers <= self.bound_at.keys():
            # (a filler still pending would leave room: the preemptor would preempt nothing)
            return False
        name = f"hp-{uuid.uuid4().hex[:10]}"
        self.preemptors[name] = time.monotonic()
        self.expiry[name] = time.monotonic() + self.rng.uniform(*self.cfg.lifetime_s)
        await self._create(api, [self._pool_pod(name, sched, "2", HIGH)])
        if name not in self.created_at:
            del self.preemptors[name]
            return False
        self.run.preemptors += 1
        return True

    @staticmethod
    def _pool_pod(name: str, sched: Replicas, cpu: str, priority_class: str) -> dict[str, Any]:
        return make_pod(
            name,
            namespace=NS,
            cpu=cpu,
            memory="64Mi",
            scheduler_name=sched.scheduler_name,
            priority_class=priority_class,
            node_selector=POOL,
            tolerations=[{**POOL_TAINT, "operator": "Equal"}],
        )

    async def _pods(
        self, api: client.ApiClient, sched: Replicas, count: int, *, job: bool, gpu: bool = False
    ) -> None:
        """``count`` pods of the stream: a Job's (they complete), or a service's that run a
        while (with ``gpu``, each with a claim for one GPU from the template)."""
        objs = []
        for _ in range(count):
            name = f"{'job' if job else 'gpu' if gpu else 'svc'}-{uuid.uuid4().hex[:10]}"
            pod = make_pod(name, namespace=NS, cpu="100m", memory="64Mi", scheduler_name=sched.scheduler_name)
            if gpu:
                pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
                pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            objs.append(job_owned(pod) if job else pod)
            if not job:
                self.expiry[name] = time.monotonic() + self.rng.uniform(*self.cfg.lifetime_s)
        await self._create(api, objs)

    async def _gang(self, api: client.ApiClient, sched: Replicas) -> None:
        group = f"gang-{uuid.uuid4().hex[:8]}"
        await create(api, make_pod_group(group, namespace=NS, min_member=4))  # raises: no members
        members = [
            make_pod(
                f"{group}-{i}",
                namespace=NS,
                cpu="4",
                memory="1Gi",
                scheduler_name=sched.scheduler_name,
                pod_group=group,
            )
            for i in range(4)
        ]
        life = time.monotonic() + self.rng.uniform(*self.cfg.lifetime_s)
        self.gangs[group] = life
        for m in members:
            self.expiry[m["metadata"]["name"]] = life
        await self._create(api, members)

    async def _create(self, api: client.ApiClient, objs: list[dict[str, Any]]) -> None:
        """Create ``objs``; a pod whose create failed (the API server just back from a fault)
        is forgotten: it was never created."""
        for obj in objs:
            self.created_at[obj["metadata"]["name"]] = time.monotonic()
        done = await asyncio.gather(*(create(api, o) for o in objs), return_exceptions=True)
        for obj, result in zip(objs, done, strict=True):
            if isinstance(result, BaseException):
                self.created_at.pop(obj["metadata"]["name"], None)
                self.expiry.pop(obj["metadata"]["name"], None)
                print(f"  [{self.kind} soak] create: {type(result).__name__}: {result}"[:300], flush=True)
            elif obj.get("kind") == "Pod":
                self.run.created += 1

    async def _node_loop(self, api: client.ApiClient) -> None:
        """Every ``node_churn_s``: a node with a new name joins; once 20 have, the oldest is
        cordoned, drained (its pods deleted, and gone: KWOK ends them within their grace
        period, as kubectl drain waits for) and deleted, as an autoscaler scales down."""
        while True:
            began = time.monotonic()
            try:
                await self._node_step(api)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an API server restarting or stalled: the next turn retries
                print(f"  [{self.kind} soak] node churn: {type(exc).__name__}: {exc}"[:300], flush=True)
            await asyncio.sleep(max(0.0, self.cfg.node_churn_s - (time.monotonic() - began)))

    async def _node_step(self, api: client.ApiClient) -> None:
        """One turn of :meth:`_node_loop` (a failed turn leaves the oldest node for the next)."""
        core: Any = client.CoreV1Api(api)
        name = f"churn-{uuid.uuid4().hex[:10]}"
        await create(api, fake_node(name))
        self.churned.append(name)
        if len(self.churned) <= 20:
            return
        old = self.churned[0]
        await core.patch_node(old, {"spec": {"unschedulable": True}})
        selector = f"spec.nodeName={old}"
        for p in await list_all(core.list_pod_for_all_namespaces, field_selector=selector):
            await self._delete(api, p["metadata"]["name"])

        async def drained() -> bool:
            return not await list_all(core.list_pod_for_all_namespaces, field_selector=selector)

        with contextlib.suppress(TimeoutError):
            await wait_for(drained, 30, what=f"node {old} drained")
        await core.delete_node(old)
        self.churned.pop(0)
        # a binding decided before the cordon may land after the drain: the pod GC
        # controller deletes pods of a node that is gone, and so does the harness
        for p in await list_all(core.list_pod_for_all_namespaces, field_selector=selector):
            await self._delete(api, p["metadata"]["name"])

    async def _delete(self, api: client.ApiClient, name: str) -> None:
        core: Any = client.CoreV1Api(api)
        self.deleted.add(name)
        self.expiry.pop(name, None)
        with contextlib.suppress(client.ApiException):
            await core.delete_namespaced_pod(name, NS, grace_period_seconds=1)

    async def _reap(self, api: client.ApiClient) -> None:
        """Delete what is due: service pods and gangs whose lifetime is over, and (every few
        seconds) Job pods that completed, as the Job TTL controller would."""
        now = time.monotonic()
        for name in [n for n, t in self.expiry.items() if t <= now]:
            await self._delete(api, name)
        custom: Any = client.CustomObjectsApi(api)
        for group in [g for g, t in self.gangs.items() if t <= now]:
            del self.gangs[group]
            with contextlib.suppress(client.ApiException):
                await custom.delete_namespaced_custom_object(
                    "scheduling.x-k8s.io", "v1alpha1", NS, "podgroups", group
                )
        if now >= self.next_sweep:
            self.next_sweep = now + 5.0
            core: Any = client.CoreV1Api(api)
            done = await list_all(core.list_namespaced_pod, NS, field_selector="status.phase=Succeeded")
            for p in done:
                await self._delete(api, p["metadata"]["name"])

    async def _settle(self, api: client.ApiClient, timeout: float = 60.0) -> None:
        """After the stream: wait for what is pending to bind, then account for every pod."""
        core: Any = client.CoreV1Api(api)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = [p for p in self.created_at if p not in self.bound_at and p not in self.deleted]
            if not waiting:
                break
            await asyncio.sleep(1.0)
        pods = {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, NS)}
        for name in self.created_at:
            if name in self.bound_at or name in self.deleted:
                continue
            pod = pods.get(name)
            if pod is not None and (pod["spec"].get("nodeName") or _has_reason(pod)):
                continue
            self.run.lost.append(name)
        self.run.bound = len(self.bound_at)


def _has_reason(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason")
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


async def soak(kinds: list[str], cfg: SoakConfig, workdir: Path) -> dict[str, Run]:
    out: dict[str, Run] = {}
    for kind in kinds:
        print(f"soak: {kind}, {cfg.minutes:g} min, {cfg.nodes:,} nodes", flush=True)
        out[kind] = await Soak(kind, cfg, workdir / kind).go()
    return out


def run_from(d: dict[str, Any]) -> Run:
    """A :class:`Run` from its ``asdict`` form (a ``--raw`` file)."""
    windows = [Window(**w) for w in d.pop("windows")]
    faults = [Fault(**f) for f in d.pop("faults")]
    return Run(**d, windows=windows, faults=faults)


def together(kinds: list[str], argv: list[str], workdir: Path) -> dict[str, Run]:
    """Each scheduler's soak in its own process at the same time (each on its own control
    plane): the machine's noise falls on both alike, and the whole takes SOAK_MINUTES once."""
    procs = {}
    for kind in kinds:
        raw = workdir / f"{kind}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--only", kind, "--raw", str(raw)]
        # each in its own session (its own CPU group), dying with this process
        procs[kind] = (subprocess.Popen(cmd, start_new_session=True, preexec_fn=_die_with_parent), raw)
    try:
        for proc, _ in procs.values():
            proc.wait()
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)
    missing = [k for k, (proc, raw) in procs.items() if not raw.exists()]
    if missing:
        raise SystemExit(f"soak: no result from {', '.join(missing)} (see its output above)")
    return {kind: run_from(json.loads(raw.read_text())) for kind, (_, raw) in procs.items()}


def summary(runs: dict[str, Run], cfg: SoakConfig, commit: str) -> dict[str, Any]:
    warm = min(600.0, cfg.minutes * 60 / 3)
    s: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit,
        "machine": machine(),
        "config": asdict(cfg),
    }
    for kind, run in runs.items():
        suffix = "" if kind == "shoal" else "_kube"
        s[f"rss_growth{suffix}"] = run.rss_growth(warm)
        s[f"p99_drift{suffix}"] = run.p99_drift()
        s[f"violations{suffix}"] = len(run.violations)
        s[f"lost_pods{suffix}"] = len(run.lost)
        s[f"created{suffix}"] = run.created
        s[f"windows{suffix}"] = [asdict(w) for w in run.windows]
        s[f"faults{suffix}"] = [asdict(f) for f in run.faults]
        s[f"faults_survived{suffix}"] = sum(f.recovery_s is not None for f in run.faults)
        s[f"replica_restarts{suffix}"] = run.restarts
        keys = (
            *("preemptors", "preemptors_bound", "victims", "preempt_p50_s", "preempt_max_s"),
            *("republished", "gpu_pods", "gpu_bound"),
        )
        for key in keys:
            s[f"{key}{suffix}"] = getattr(run, key)
    return s


def plot(runs: dict[str, Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rss, p99) = plt.subplots(1, 2, figsize=(10, 3.6))
    for kind, run in runs.items():
        t = [w.t / 60 for w in run.windows]
        rss.plot(t, [w.rss_mb for w in run.windows], marker="o", label=kind)
        p99.plot(t, [w.p99_ms or 0 for w in run.windows], marker="o", label=kind)
    rss.set(title="RSS (MB)", xlabel="minutes")
    p99.set(title="create → bound p99 (ms)", xlabel="minutes")
    for ax in (rss, p99):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _fault_rows(s: dict[str, Any]) -> list[str]:
    """Per fault kind: how many hit each scheduler, and the longest recovery (a fault whose
    recovery is missing was not survived: nothing created after it was bound)."""
    rows = []
    for name in FAULTS:
        cells = []
        for suffix in ("", "_kube"):
            hits = [f for f in s.get(f"faults{suffix}") or () if f["name"] == name]
            if not hits:
                cells.append("—")
                continue
            times = [f["recovery_s"] for f in hits if f["recovery_s"] is not None]
            lost = len(hits) - len(times)
            worst = f"{max(times):.1f} s" if times else "n/a"
            cells.append(
                f"{len(hits)}, longest recovery {worst}" + (f", **{lost} not recovered**" if lost else "")
            )
        if any(c != "—" for c in cells):
            rows.append(f"| fault `{name}` | {cells[0]} | {cells[1]} |")
    return rows


def write_doc(s: dict[str, Any]) -> None:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v * 100:+.1f} %"

    def ratio(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}×"

    cfg = s["config"]

    def both(key: str, fmt: Callable[[Any], str] = str) -> str:
        return f"| {fmt(s.get(key))} | {fmt(s.get(key + '_kube'))} |"

    def count(v: Any) -> str:
        return "n/a" if v is None else f"{v:,}"

    def pair(a: str, b: str) -> str:
        return f"| {count(s.get(a))} / {count(s.get(b))} | {count(s.get(a + '_kube'))} / {count(s.get(b + '_kube'))} |"

    def seconds(v: Any) -> str:
        return "n/a" if v is None else f"{v:.1f} s"

    churn = (
        f"{cfg['nodes']:,} KWOK nodes plus one node added and one drained and deleted every "
        f"{cfg['node_churn_s']:g} s, {cfg['job_pods_per_s']:g} Job pods/s that complete, "
        f"{cfg['service_pods_per_s']:g} service pods/s and a gang of 4 every {cfg['gang_every_s']:g} s that "
        f"run {cfg['lifetime_s'][0]:g}–{cfg['lifetime_s'][1]:g} s"
    )
    if cfg.get("gpu_nodes"):
        churn += (
            f", {cfg['dra_pods_per_s']:g} pods/s claiming one GPU each (ResourceClaimTemplate) from "
            f"{cfg['gpu_nodes']} GPU nodes whose driver republishes one node's slice every "
            f"{cfg['republish_every_s']:g} s"
        )
    if cfg.get("preempt_every_s"):
        churn += (
            f", a high-priority pod every {cfg['preempt_every_s']:g} s that must preempt two "
            f"low-priority fillers of a full {POOL_NODES}-node pool"
        )
    faults = (
        f"; a fault every {cfg['fault_every_s']:g} s in turn ({', '.join(FAULTS)}; stalls of "
        f"{cfg['stall_s']:g} s), recovery from its end to the first pod created after it bound"
        if cfg.get("fault_every_s")
        else ""
    )
    how = (
        "both schedulers at once, each on its own control plane, so the machine's noise falls on both"
        if s.get("at_once")
        else "one scheduler after the other"
    )
    lines = [
        "## A real cluster's churn, shoal and kube-scheduler side by side (`make soak`)",
        "",
        f"Recorded {s['date']} at commit {s['commit']} on {s['machine']}, {how}: "
        f"{cfg['minutes']:g} minutes, {churn}; each scheduler as two replicas with leader election; "
        f"windows of {cfg['window_s']:g} s (RSS is the leader's, CPU both replicas'){faults}.",
        "",
        "| | shoal | kube-scheduler |",
        "|---|---:|---:|",
        "| pods created " + both("created", count),
        "| RSS growth after the warm-up " + both("rss_growth", pct),
        "| p99 create → bound, last window ÷ first " + both("p99_drift", ratio),
        "| invariant violations " + both("violations"),
        "| lost pods " + both("lost_pods"),
        *_fault_rows(s),
        "| replicas restarted (killed, or exited on a lost Lease) " + both("replica_restarts", count),
        "| GPU pods created / bound " + pair("gpu_pods", "gpu_bound"),
        "| slices republished " + both("republished", count),
        "| preemptors bound / victims " + pair("preemptors_bound", "victims"),
        "| preemptor create → bound, median " + both("preempt_p50_s", seconds),
        "| preemptor create → bound, worst " + both("preempt_max_s", seconds),
        "",
        "![RSS and p99 over the soak](soak.png)",
    ]
    write_section("soak", "make soak", lines, doc=ROOT / "docs" / "reliability.md")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "60")))
    parser.add_argument(
        "--window",
        type=float,
        default=None,
        help="seconds per window (default: 300, or minutes×6 s when short)",
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--fault-every",
        type=float,
        default=300.0,
        help="seconds between faults, in turn: " + ", ".join(FAULTS) + " (0: none; default 300)",
    )
    parser.add_argument("--stall", type=float, default=30.0, help="seconds a stall lasts (default 30)")
    parser.add_argument("--only", choices=("shoal", "kube-scheduler"))
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="shoal, then kube-scheduler (default: both at once, each on its own control plane)",
    )
    parser.add_argument("--raw", type=Path, help=argparse.SUPPRESS)  # --only's Run, for together()
    parser.add_argument("--no-write", action="store_true")
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    window = args.window or (300.0 if args.minutes >= 30 else max(30.0, args.minutes * 10))
    cfg = SoakConfig(
        minutes=args.minutes,
        window_s=window,
        nodes=args.nodes,
        fault_every_s=args.fault_every,
        stall_s=args.stall,
    )
    kinds = [args.only] if args.only else ["shoal", "kube-scheduler"]
    started_at = revision()  # the code the run starts; replicas restarted later load what is there then
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shoal-soak-") as tmp:
        if len(kinds) > 1 and not args.sequential:
            runs = together(kinds, [a for a in argv if a != "--no-write"] + ["--no-write"], Path(tmp))
        else:
            runs = asyncio.run(soak(kinds, cfg, Path(tmp)))
    if args.raw is not None:
        (run,) = runs.values()
        args.raw.write_text(json.dumps(asdict(run)))
    ended_at = revision()
    # a commit or an edit during the run: the restarted replicas may have run other code
    s = summary(
        runs, cfg, started_at if ended_at == started_at else f"{started_at.removesuffix('-dirty')}-dirty"
    )
    s["at_once"] = len(runs) > 1 and not args.sequential
    print(json.dumps({k: v for k, v in s.items() if not k.startswith("windows")}, indent=2))
    if not args.no_write and not args.only:
        RESULTS.write_text(json.dumps(s, indent=2) + "\n")
        plot(runs, PLOT)
        write_doc(s)
        print(f"soak: wrote {RESULTS.relative_to(ROOT)}, {PLOT.relative_to(ROOT)} and docs/reliability.md")
    bad = sum(len(r.violations) + len(r.lost) for r in runs.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
