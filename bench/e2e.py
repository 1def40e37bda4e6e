"""make bench: shoal side by side with kube-scheduler on the same local control plane.

For each scheduler under test a fresh control plane is started; nodes and pods are created through
the API as kube-scheduler's scheduler_perf does (nodes with capacity, allocatable and a Ready
condition, no kubelet); kube-scheduler runs with its default profile and
``clientConnection.qps/burst`` 5000, shoal with the ``gpu-scheduler`` profile (its client has no
rate limiter; both stay far below 5000 requests/s here). A scheduler's pods are created only once
its ``/readyz`` answers 200 (kube-scheduler: informers and event handlers synced) and the same
short settle has passed. Measured per scheduler: pods/s from the first pod created to the last pod
bound, p50/p99 of create→bound (client-observed), peak RSS and CPU seconds of the scheduler process.

Scenarios: basic (1,000 nodes / 5,000 pods), basic_viewer (basic again, shoal only, run with
``--web`` while three fleet-page viewers poll it: bench/fleet_viewers.py), scale (5,000 / 50,000; --large; unpaced, and
again with pods created at 200/s for both), paced (5,000
nodes / 10,000 pods created at a fixed 150/s and 200/s, the same offered load for both), gang (a 64-pod gang
on 1,000 nodes: last member created → all bound), topology (gangs of 8/16/64 required in one
clique/rack/block, native PodGroups, both schedulers: bench/e2e_topology.py), preemption
(scheduler_perf's PreemptionBasic) and gang preemption (victims beyond the minimum:
bench/e2e_preemption.py), packing (64 × 8-GPU nodes, a seeded mix of 1/2/4/
8-GPU pods and gangs: GPUs allocated before the first 8-GPU pod that cannot be placed), herding
(GPU-memory requests against free-memory labels: nodes that end over their label), dra (one-GPU
claims from a template: bench/e2e_dra.py) and, after scheduler_perf's DRA workloads,
dra_extended (extended resources backed by DeviceClasses), dra_partitionable (MIG partitions on
shared counters) and dra_shared (GPUs shared by memory, consumable capacity), then dra_gang
(native gangs of two on one MIG-partitionable GPU whose first member would take the whole GPU,
kubernetes/kubernetes#138765: gangs placed, not pods/s): bench/e2e_dra_kinds.py. The gang
scenario's gang not all bound fails the run at once (nothing is written but bench's temporary
folder).

``--only NAME[,NAME...]`` runs only those scenarios (``SCENARIOS``; nothing is written unless
they are all the run would have), ``--dra-nodes``/``--dra-pods`` size the DRA scenarios
(``--dra-nodes`` alone sizes dra_gang: a gang a node).

Writes bench/results/e2e.json, the "e2e" section of docs/benchmarks.md and PNG plots;
``--report-only`` rewrites that section from bench/results/e2e.json without running anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

# Run as a script (`python bench/x.py`, PYTHONSAFEPATH=1): the repository root goes at the *end*
# of sys.path, so `bench` is found and the checkout's operator/ never shadows the standard library.
if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench import e2e_dra, e2e_dra_kinds, e2e_preemption, e2e_topology
from bench.e2e_report import CPU_GROUPS, DRA_SCENARIOS, PLOTS, plot, write_doc
from bench.e2e_schedulers import (
    BACKLOG_KINDS,
    SETTLE_S,
    CpuSampler,
    KubeScheduler,
    NullScheduler,
    Shoal,
    cpu_window,
    machine_ms_per_pod,
    proc_stats,
    same_work_profiles,
)
from bench.e2e_workloads import CONSTRAINED, workload_node, workload_pod
from bench.fleet_viewers import VIEWERS, Viewers
from bench.profiles import Profiler, write_profiles
from bench.report import DOC, revision, write_summary
from shoal.kube.informer import stream
from shoal.kube.kinds import KIND_PODS
from shoal.kube.listing import list_objects
from shoal.kube.rest import RawClient
from shoal.testing.cluster import apply_crds, create, list_all, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane, spawn, stop_process
from shoal.testing.kubecontrollermanager import DRA_CONTROLLERS, FAST_CLAIMS, KubeControllerManagerProcess
from shoal.testing.objects import make_node, make_pod, make_pod_group

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "e2e.json"
PROFILE_RESULTS = HERE / "results" / "profiles.json"
PROFILE_DOC = ROOT / "docs" / "profiles.md"
NS = "bench"
#: kube-scheduler 1.38's setting that scores every placement a gang's generators give (its default
#: is adaptive: max(5, 100 - nodes * 9 / 500) % of them)
ALL_PLACEMENTS = {"percentageOfPlacementsToScore": 100}
#: the keys bench/e2e_next.py writes into e2e.json (the race against the next release), by prefix
NEXT_PREFIX = "k138_"
NEXT_KEYS = (NEXT_PREFIX, "gang_topology_preemption_", "cpg_")
#: --profile: scenario -> summary of py-spy's samples of shoal (bench/profiles.py); None: no profiling
PROFILES: dict[str, dict[str, Any]] | None = None


# -- machine description ----------------------------------------------------------------------------
def machine() -> str:
    """CPU model, cores, total RAM and Python version, from /proc (for the report's setup line)."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = " ".join(line.split(":", 1)[1].split())
                break
    ram = ""
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                ram = f", {int(line.split()[1]) / 2**20:.1f} GiB RAM"
                break
    return f"{model} ({platform.machine()}), {os.cpu_count()} cores{ram}, Python {platform.python_version()}"


# -- the pod watcher ------------------------------------------------------------------------------
@dataclass
class Watcher:
    """Client-side view of when each pod was bound (or found unschedulable), from one watch
    through shoal's informer (``kube.informer.stream``: the same kind, paths and selector)."""

    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    unschedulable: dict[str, float] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    async def run(self, api: client.ApiClient, namespace: str) -> None:
        async for event in stream(RawClient(api), KIND_PODS, namespace=namespace):
            self.observe(event.raw)  # the raw body: no PodInfo parse on the load generator's CPU

    def observe(self, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        node = (obj.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = time.monotonic()
            self.nodes[name] = node
        elif not node:
            for c in (obj.get("status") or {}).get("conditions") or ():
                if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                    self.unschedulable.setdefault(name, time.monotonic())

    def start(self, api: client.ApiClient, namespace: str) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(api, namespace))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


# -- one scheduler on one fresh control plane -------------------------------------------------------
class Bench:
    def __init__(self, kind: str, base: Path, kube_args: Sequence[str] = ()) -> None:
        """``kube_args``: extra command-line flags for kube-scheduler (tests only)."""
        self.kind = kind
        self.kube_args = kube_args
        self.dir = base / kind
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cp = ControlPlane(workdir=self.dir / "cp")
        self.api: client.ApiClient | None = None
        self.scheduler: KubeScheduler | Shoal | NullScheduler | None = None
        self.watcher = Watcher()
        self.profiler: Profiler | None = None

    async def __aenter__(self) -> Bench:
        self.cp.start()
        self.api = await config.new_client_from_config(config_file=str(self.cp.kubeconfig))
        await apply_crds(self.api)
        await create(self.api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        if self.kind in ("null", "null-events"):
            self.scheduler = NullScheduler(self.cp, self.dir, events=self.kind == "null-events")
        elif self.kind == "kube-scheduler":
            self.scheduler = KubeScheduler(self.cp, self.dir, args=self.kube_args)
        elif self.kind == "kube-all-placements":  # 1.38+: every placement scored, as 1.37 did
            self.scheduler = KubeScheduler(self.cp, self.dir, args=self.kube_args, settings=ALL_PLACEMENTS)
        elif self.kind == "kube-same-work":
            self.scheduler = KubeScheduler(self.cp, self.dir, same_work_profiles(), args=self.kube_args)
        elif self.kind == "shoal-viewed":
            self.scheduler = Shoal(self.cp, self.dir, extra=("--web",))
        else:
            self.scheduler = Shoal(self.cp, self.dir)
        self.watcher.start(self.api, NS)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.profiler is not None and PROFILES is not None:
            summary = await asyncio.to_thread(self.profiler.stop)
            if summary is not None:
                PROFILES[self.dir.parent.name] = summary
        await self.watcher.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.api is not None:
            await self.api.close()
        self.cp.stop()

    @property
    def scheduler_name(self) -> str:
        assert self.scheduler is not None
        return self.scheduler.scheduler_name

    async def start_scheduler(self) -> None:
        assert self.scheduler is not None and self.api is not None
        await self.scheduler.start(self.api)
        if PROFILES is not None and self.kind == "shoal":
            self.profiler = Profiler(self.dir / "py-spy.txt")
            self.profiler.start(self.scheduler.pid)

    async def create_all(
        self,
        objs: Sequence[dict[str, Any]],
        concurrency: int = 48,
        label: str = "",
        rate: float | None = None,
    ) -> dict[str, float]:
        """Create objects concurrently (the ``i``-th not before ``i / rate`` s, when paced);
        returns pod name -> time its create returned."""
        assert self.api is not None
        done: dict[str, float] = {}
        slots = asyncio.Semaphore(concurrency)
        start = time.monotonic()

        async def one(i: int, obj: dict[str, Any]) -> None:
            if rate:
                await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            async with slots:
                for attempt in range(5):
                    try:
                        await create(self.api, obj)  # type: ignore[arg-type]
                        break
                    except (client.ApiException, aiohttp.ClientError):
                        if attempt == 4:
                            raise
                        await asyncio.sleep(0.2 * (attempt + 1))
                if obj["kind"] == "Pod":
                    done[obj["metadata"]["name"]] = time.monotonic()

        await asyncio.gather(*(one(i, o) for i, o in enumerate(objs)))
        return done

    async def wait_bound(self, names: Sequence[str], timeout: float, label: str) -> bool:
        began = time.monotonic()
        last_print = 0.0
        want = set(names)
        while time.monotonic() - began < timeout:
            if self.watcher.task is not None and self.watcher.task.done():
                self.watcher.task.result()  # a dead watcher must fail the run, not hang it
                raise RuntimeError("the pod watcher stopped")
            bound = len(want & self.watcher.bound.keys())
            if time.monotonic() - last_print >= 2:
                print(f"    [{self.kind} {label}] bound {bound:,}/{len(want):,}", flush=True)
                last_print = time.monotonic()
            if bound == len(want):
                return True
            await asyncio.sleep(0.1)
        return False

    def cpu_pids(self) -> dict[str, int]:
        """The processes whose CPU the backlog scenario accounts: the scheduler under test, the
        API server and etcd, and this bench process (load generator and watcher)."""
        assert self.scheduler is not None
        return {"scheduler": self.scheduler.pid, "bench": os.getpid(), **self.cp.named_pids}

    def stats(self) -> tuple[float, int]:
        assert self.scheduler is not None
        return proc_stats(self.scheduler.pid)

    async def pod_names(self) -> set[str]:
        assert self.api is not None
        pods = await list_all(client.CoreV1Api(self.api).list_namespaced_pod, NS)
        return {p["metadata"]["name"] for p in pods}

    def bound_nodes(self) -> dict[str, str]:
        return self.watcher.nodes

    def bound_times(self) -> dict[str, float]:
        return self.watcher.bound


async def topology(
    kind: str, base: Path, nodes: int = e2e_topology.NODES, gangs: tuple[int, ...] = e2e_topology.GANGS
) -> dict[str, Any]:
    """bench/e2e_topology.py's scenario on a fresh control plane."""
    async with Bench(kind, base / "topology") as b:
        await b.create_all(e2e_topology.fleet(nodes))
        await b.create_all(e2e_topology.background(NS, nodes_count=nodes))
        await b.start_scheduler()
        return await e2e_topology.run_gangs(b, NS, gangs=gangs, nodes_count=nodes)


@contextlib.contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """A busy Python process for the duration (``on``): the machine's CPU shared with a hog, as
    on a slower or busier machine. Stopped by its PID.

    The hog runs in a session of its own, as the control plane and the scheduler do: with the
    kernel's autogroup scheduling (on wherever the CPU cgroup is the root one, as here) each
    session is one CPU group. Started from the bench's session, the hog only competed with the
    load generator and the pod watcher, slowing the offered load rather than the machine."""
    if not on:
        yield
        return
    hog = spawn([sys.executable, "-c", "while True: pass"], Path(os.devnull))
    try:
        yield
    finally:
        stop_process(hog)


async def throughput(
    kind: str,
    base: Path,
    nodes: int,
    pods: int,
    label: str,
    workload: str = "basic",
    timeout: float = 1800,
    hog: bool = False,
    rate: float | None = None,
) -> dict[str, Any]:
    async with Bench(kind, base / label) as b:
        print(f"  {kind}: {nodes:,} nodes ({workload}{', with a CPU hog' if hog else ''})", flush=True)
        await b.create_all([workload_node(workload, i) for i in range(nodes)])
        await b.start_scheduler()
        if kind == "shoal-viewed":  # the fleet page open in VIEWERS browsers all along
            assert isinstance(b.scheduler, Shoal) and b.scheduler.op is not None
            async with Viewers(f"http://127.0.0.1:{b.scheduler.op.metrics_port}") as viewers:
                got = await _stream(b, nodes, pods, label, workload, timeout, rate)
            return got | {"viewers": viewers.summary()}
        with cpu_hog(hog):
            return await _stream(b, nodes, pods, label, workload, timeout, rate)


async def _stream(
    b: Bench, nodes: int, pods: int, label: str, workload: str, timeout: float, rate: float | None = None
) -> dict[str, Any]:
    """Pods created as fast as the API server takes them while the scheduler runs, or at
    ``rate`` pods/s (the same offered load for every scheduler)."""
    kind = b.kind
    cpu0, _ = b.stats()
    objs = [workload_pod(workload, i, b.scheduler_name, NS) for i in range(pods)]
    print(f"  {kind}: creating {pods:,} pods", flush=True)
    first = time.monotonic()
    creating = asyncio.ensure_future(b.create_all(objs, rate=rate))
    ok = await b.wait_bound([o["metadata"]["name"] for o in objs], timeout, label)
    created = await creating
    last_bound = max(b.watcher.bound.values()) if b.watcher.bound else time.monotonic()
    cpu1, rss = b.stats()
    latencies = sorted(b.watcher.bound[n] - created[n] for n in created if n in b.watcher.bound)
    return {
        "nodes": nodes,
        "pods": pods,
        "all_bound": ok,
        "bound": len(latencies),
        "seconds": last_bound - first,
        "pods_per_s": len(latencies) / max(last_bound - first, 1e-9),
        "p50_s": statistics.median(latencies) if latencies else None,
        "p99_s": latencies[int(len(latencies) * 0.99) - 1] if latencies else None,
        "offered_per_s": rate,
        # what the load generator reached: unpaced, it depends on the CPU the scheduler leaves it
        "created_per_s": len(created) / max(max(created.values(), default=first) - first, 1e-9),
        "cpu_s": cpu1 - cpu0,
        "peak_rss_mb": rss / 2**20,
    }


async def backlog(kind: str, base: Path, nodes: int, pods: int, timeout: float = 1800) -> dict[str, Any]:
    """Scheduler-bound throughput: every pod created before the scheduler starts, so the load
    generator is out of the measurement; pods/s from the first binding to the last (the start-up
    and cache priming left out, for every kind alike). ``null``: bench/nullscheduler.py;
    ``null-events``: the same, also writing a ``Scheduled`` event per pod after its binding."""
    async with Bench(kind, base / "backlog") as b:
        print(f"  {kind}: {nodes:,} nodes, {pods:,} pods created first", flush=True)
        await b.create_all([workload_node("basic", i) for i in range(nodes)])
        assert b.scheduler is not None
        await b.create_all([workload_pod("basic", i, b.scheduler.scheduler_name, NS) for i in range(pods)])
        await b.start_scheduler()
        cpu0, _ = b.stats()
        async with CpuSampler(b.cpu_pids()) as sampler:
            ok = await b.wait_bound([f"pod-{i:06d}" for i in range(pods)], timeout, "backlog")
        cpu1, rss = b.stats()
        assert b.api is not None
        events = await scheduled_events(b.api)
        times = sorted(b.watcher.bound.values())
        seconds = times[-1] - times[0] if len(times) > 1 else 0.0
        window = cpu_window(sampler.samples, times[0], times[-1], os.cpu_count() or 1) if times else None
        return {
            "cpu_window": window,
            "nodes": nodes,
            "pods": pods,
            "all_bound": ok,
            "bound": len(times),
            "seconds": seconds,
            "pods_per_s": (len(times) - 1) / max(seconds, 1e-9),
            "cpu_s": cpu1 - cpu0,
            "peak_rss_mb": rss / 2**20,
            "events_at_end": events,
        }


async def scheduled_events(api: client.ApiClient) -> int:
    """How many ``Scheduled`` events the namespace has now (listed by metadata alone): read as the
    last pod is seen bound, it says how many of a scheduler's events were written by then."""
    items = await list_objects(
        RawClient(api),
        f"/api/v1/namespaces/{NS}/events",
        field_selector="reason=Scheduled",
        metadata_only=True,
    )
    return len(items)


async def gang(base: Path, nodes: int = 1000, members: int = 64) -> dict[str, Any]:
    async with Bench("shoal", base / "gang") as b:
        await b.create_all([make_node(f"gpu-{i:05d}", gpus=8, gfd_labels=False) for i in range(nodes)])
        await b.start_scheduler()
        await b.create_all([make_pod_group("train", namespace=NS, min_member=members)])
        objs = [
            make_pod(
                f"train-{i:03d}", namespace=NS, gpus=8, pod_group="train", scheduler_name=b.scheduler_name
            )
            for i in range(members)
        ]
        created = await b.create_all(objs)
        last_created = max(created.values())
        ok = await b.wait_bound(list(created), 120, "gang")
        bound = sum(1 for n in created if n in b.watcher.bound)
        last_bound = max((b.watcher.bound[n] for n in created if n in b.watcher.bound), default=None)
        return {
            "nodes": nodes,
            "members": members,
            "all_bound": ok,
            "bound": bound,
            "seconds": last_bound - last_created if ok and last_bound is not None else None,
        }


def packing_workload(seed: int = 42, count: int = 400) -> list[list[dict[str, Any]]]:
    """Arrival groups in order: a single pod, or a gang's members together."""
    rng = random.Random(seed)
    groups: list[list[dict[str, Any]]] = []
    for i in range(count):
        r = rng.random()
        if r < 0.35:
            size = 1
        elif r < 0.6:
            size = 2
        elif r < 0.8:
            size = 4
        elif r < 0.93:
            size = 8
        else:
            members, per = rng.choice([(2, 4), (4, 2), (2, 8)])
            name = f"gang-{i:03d}"
            groups.append(
                [make_pod_group(name, namespace=NS, min_member=members)]
                + [
                    make_pod(f"{name}-{m}", namespace=NS, cpu="1", memory="8Gi", gpus=per, pod_group=name)
                    for m in range(members)
                ]
            )
            continue
        groups.append([make_pod(f"p{i:03d}-{size}gpu", namespace=NS, cpu="1", memory="8Gi", gpus=size)])
    return groups


async def packing(kind: str, base: Path, nodes: int = 64) -> dict[str, Any]:
    async with Bench(kind, base / "packing") as b:
        await b.create_all(
            [
                make_node(f"gpu-{i:03d}", cpu="96", memory="1Ti", gpus=8, gfd_labels=False)
                for i in range(nodes)
            ]
        )
        await b.start_scheduler()
        gpus_of: dict[str, int] = {}
        allocated_at_failure = None
        for group in packing_workload():
            for obj in group:
                if obj["kind"] == "Pod":
                    obj["spec"]["schedulerName"] = b.scheduler_name
                    gpus_of[obj["metadata"]["name"]] = int(
                        obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
                    )
            await b.create_all(group)
            names = [o["metadata"]["name"] for o in group if o["kind"] == "Pod"]

            async def settled(names: list[str] = names) -> bool:
                return all(n in b.watcher.bound or n in b.watcher.unschedulable for n in names)

            await wait_for(settled, 60, interval=0.05, what=f"{names} settled")
            failed_8 = [n for n in names if gpus_of[n] == 8 and n not in b.watcher.bound]
            if failed_8:
                await asyncio.sleep(0.5)
                allocated_at_failure = sum(gpus_of[n] for n in b.watcher.bound if n in gpus_of)
                print(
                    f"    [{kind} packing] first 8-GPU pod unplaced ({failed_8[0]}): {allocated_at_failure} GPUs allocated",
                    flush=True,
                )
                break
        allocated = (
            allocated_at_failure
            if allocated_at_failure is not None
            else sum(gpus_of[n] for n in b.watcher.bound)
        )
        return {
            "nodes": nodes,
            "capacity": nodes * 8,
            "allocated": allocated,
            "fraction": allocated / (nodes * 8),
        }


async def herding(kind: str, base: Path) -> dict[str, Any]:
    labels = [40, 30, 20, 10] * 5
    async with Bench(kind, base / "herding") as b:
        await b.create_all(
            [
                make_node(f"gpu-{i:02d}", gpus=8, gpu_memory_free_gb=gb, gfd_labels=False)
                for i, gb in enumerate(labels)
            ]
        )
        await b.start_scheduler()
        pods = [
            make_pod(f"mem-{i:03d}", namespace=NS, gpus=0, gpu_memory_gb=10, scheduler_name=b.scheduler_name)
            for i in range(80)
        ]
        await b.create_all(pods)
        names = [p["metadata"]["name"] for p in pods]

        async def settled() -> bool:
            return all(n in b.watcher.bound or n in b.watcher.unschedulable for n in names)

        await wait_for(settled, 60, what="herding settled")
        used: dict[str, int] = {}
        for n in names:
            if n in b.watcher.nodes:
                used[b.watcher.nodes[n]] = used.get(b.watcher.nodes[n], 0) + 10
        over = sum(1 for i, gb in enumerate(labels) if used.get(f"gpu-{i:02d}", 0) > gb)
        return {
            "nodes": len(labels),
            "label_capacity_gb": sum(labels),
            "requested_gb": 10 * len(pods),
            "placed_gb": sum(used.values()),
            "nodes_over_label": over,
        }


async def preemption(
    kind: str, base: Path, nodes: int = 1000, preemptors: int = 1000, kube_args: Sequence[str] = ()
) -> dict[str, Any]:
    """scheduler_perf's PreemptionBasic (bench/e2e_preemption.py) on a fresh control plane."""
    async with Bench(kind, base / "preemption", kube_args) as b:
        await b.create_all(e2e_preemption.priority_classes())
        await b.create_all(e2e_preemption.basic_nodes(nodes))
        await b.create_all(e2e_preemption.basic_victims(nodes, NS))
        await b.start_scheduler()
        return await e2e_preemption.run_basic(b, NS, nodes, preemptors, timeout=600)


async def gang_preemption(kind: str, base: Path) -> dict[str, Any]:
    """A high-priority gang of 8 preempting on 16 full nodes: victims beyond the minimum."""
    async with Bench(kind, base / "gang-preemption") as b:
        await b.create_all(e2e_preemption.priority_classes())
        await b.create_all(e2e_preemption.gang_nodes())
        await b.create_all(e2e_preemption.gang_victims(NS))
        await b.start_scheduler()
        return await e2e_preemption.run_gang(b, NS, native=kind == "kube-scheduler")


@contextlib.asynccontextmanager
async def claim_controller(b: Bench) -> AsyncIterator[None]:
    """kube-controller-manager's resourceclaim controller for the duration: pods' claims made from
    their templates, as in a cluster."""
    kcm = KubeControllerManagerProcess(
        b.cp.kubeconfig, b.dir / "kcm", controllers=DRA_CONTROLLERS, extra_args=FAST_CLAIMS
    )
    await asyncio.to_thread(kcm.start)
    try:
        yield
    finally:
        kcm.stop()


async def dra(
    kind: str, base: Path, nodes: int = 1000, pods: int = 5000, timeout: float = 1800
) -> dict[str, Any]:
    """bench/e2e_dra.py: one-GPU claims from a template on nodes of 8 GPU devices, with the real
    resourceclaim controller."""
    async with Bench(kind, base / "dra") as b:
        await b.create_all(e2e_dra.cluster_objects(nodes, NS))
        async with claim_controller(b):
            await b.start_scheduler()
            assert b.api is not None
            return {"nodes": nodes, **await e2e_dra.run(b, b.api, NS, pods, timeout)}


async def dra_extended(
    kind: str,
    base: Path,
    nodes: int = e2e_dra_kinds.EXTENDED_NODES,
    pods: int = e2e_dra_kinds.EXTENDED_PODS,
    timeout: float = 1800,
) -> dict[str, Any]:
    """bench/e2e_dra_kinds.py: scheduler_perf's ExtendedResource (25 DeviceClasses with an
    extendedResourceName). No template, so no resourceclaim controller: the scheduler makes the claims."""
    async with Bench(kind, base / "dra-extended") as b:
        await b.create_all(e2e_dra_kinds.extended_objects(nodes))
        await b.start_scheduler()
        assert b.api is not None
        return {"nodes": nodes, **await e2e_dra_kinds.run_extended(b, b.api, NS, pods, timeout)}


async def dra_partitionable(
    kind: str,
    base: Path,
    nodes: int = e2e_dra_kinds.PARTITIONABLE_NODES,
    pods: int = e2e_dra_kinds.PARTITIONABLE_PODS,
    timeout: float = 1800,
) -> dict[str, Any]:
    """bench/e2e_dra_kinds.py: scheduler_perf's Partitionable as MIG partitions of 4 GPUs a node
    (shared counters), claims from templates, with the real resourceclaim controller."""
    async with Bench(kind, base / "dra-partitionable") as b:
        await b.create_all(e2e_dra_kinds.partitionable_objects(nodes, NS))
        async with claim_controller(b):
            await b.start_scheduler()
            assert b.api is not None
            return {"nodes": nodes, **await e2e_dra_kinds.run_partitionable(b, b.api, NS, pods, timeout)}


async def dra_shared(
    kind: str,
    base: Path,
    nodes: int = e2e_dra_kinds.SHARED_NODES,
    pods: int = e2e_dra_kinds.SHARED_PODS,
    timeout: float = 1800,
) -> dict[str, Any]:
    """bench/e2e_dra_kinds.py: scheduler_perf's ConsumableCapacity as 4 GPUs a node shared by
    memory, claims from a template, with the real resourceclaim controller."""
    async with Bench(kind, base / "dra-shared") as b:
        await b.create_all(e2e_dra_kinds.shared_objects(nodes, NS))
        async with claim_controller(b):
            await b.start_scheduler()
            assert b.api is not None
            return {"nodes": nodes, **await e2e_dra_kinds.run_shared(b, b.api, NS, pods, timeout)}


async def dra_gang(
    kind: str,
    base: Path,
    nodes: int = e2e_dra_kinds.GANG_NODES,
    timeout: float = e2e_dra_kinds.GANG_TIMEOUT_S,
) -> dict[str, Any]:
    """bench/e2e_dra_kinds.py: a native gang of two a node on its one MIG-partitionable GPU, the
    first member asking the whole GPU else a 3g.40gb, the second a 3g.40gb
    (kubernetes/kubernetes#138765); claims from templates, with the real resourceclaim controller."""
    async with Bench(kind, base / "dra-gang") as b:
        await b.create_all(e2e_dra_kinds.gang_objects(nodes, NS))
        async with claim_controller(b):
            await b.start_scheduler()
            assert b.api is not None
            return {"nodes": nodes, **await e2e_dra_kinds.run_gang(b, b.api, NS, nodes, timeout)}


def topology_summary(topo: dict[str, Any]) -> dict[str, Any]:
    shoal, kube = topo["shoal"], topo["kube-scheduler"]
    latency = None
    if shoal["gang_latency_p50_s"] is not None and kube["gang_latency_p50_s"]:
        latency = shoal["gang_latency_p50_s"] / kube["gang_latency_p50_s"]
    return {
        "topology_domain_fit": shoal["domain_fit"],
        "topology_domain_fit_kube": kube["domain_fit"],
        "topology_latency_ratio": latency,
        "topology_pods_per_s_ratio": shoal["pods_per_s"] / max(kube["pods_per_s"], 1e-9),
        "topology_free_racks_ratio": shoal["free_racks"] / max(kube["free_racks"], 1),
    }


#: rounds of the backlog scenario in one run, every kind once a round, the order reversed every
#: other round; one round moved the ceiling fraction by a third from run to run on this machine
BACKLOG_ROUNDS = 3
#: the order the kinds run in a round: the two sides of each ratio near its target side by side
#: (shoal beside the null scheduler, beside kube-scheduler's same-work run; kube-scheduler beside
#: both null schedulers), so a slower minute of the shared machine falls on both sides of a pair
BACKLOG_ORDER = ("kube-same-work", "shoal", "null", "kube-scheduler", "null-events")


async def backlog_rounds(
    base: Path, nodes: int, pods: int, rounds: int = BACKLOG_ROUNDS
) -> list[dict[str, dict[str, Any]]]:
    """The backlog scenario ``rounds`` times, alternating: each kind's runs spread over the whole
    stretch of the run, so a slower or faster minute of a shared machine falls on every kind."""
    out: list[dict[str, dict[str, Any]]] = []
    for r in range(rounds):
        order = BACKLOG_ORDER if r % 2 == 0 else tuple(reversed(BACKLOG_ORDER))
        print(f"  round {r + 1} of {rounds}", flush=True)
        done = {k: await backlog(k, base / f"round-{r + 1}", nodes, pods) for k in order}
        out.append({k: done[k] for k in BACKLOG_KINDS})
    return out


def median_round(rounds: Sequence[Mapping[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per kind, its round with the median pods/s (the upper one of an even count): the figures
    the report's table and plot show."""
    return {
        k: sorted((r[k] for r in rounds), key=lambda x: float(x["pods_per_s"]))[len(rounds) // 2]
        for k in rounds[0]
    }


def backlog_summary(rounds: Sequence[Mapping[str, dict[str, Any]]]) -> dict[str, Any]:
    """The backlog's ratios: each the median over the rounds of that round's own ratio (the two
    kinds paired within one round), and ``<key>_rounds`` listing them. ``ceiling_cpu_fraction``
    (and ``_kube``): the null scheduler's machine CPU per pod ÷ the scheduler's, when every round
    sampled it: the ceiling fraction the run would show if the host had given every kind the same
    CPU (``steal`` and a busier minute change pods/s, not the CPU a pod costs)."""
    pairs = {
        "ceiling_fraction": ("shoal", "null"),
        "ceiling_fraction_kube": ("kube-scheduler", "null"),
        "events_ceiling_fraction": ("shoal", "null-events"),
        "events_ceiling_fraction_kube": ("kube-scheduler", "null-events"),
        "null_events_fraction": ("null-events", "null"),
        "backlog_ratio": ("shoal", "kube-scheduler"),
        "same_work_ratio": ("shoal", "kube-same-work"),
    }

    def ratio(run: Mapping[str, dict[str, Any]], a: str, b: str) -> float:
        return float(run[a]["pods_per_s"]) / max(float(run[b]["pods_per_s"]), 1e-9)

    out: dict[str, Any] = {}
    for key, (a, b) in pairs.items():
        each = [ratio(r, a, b) for r in rounds]
        out[key] = statistics.median(each)
        out[f"{key}_rounds"] = each
    for key, a in (("ceiling_cpu_fraction", "shoal"), ("ceiling_cpu_fraction_kube", "kube-scheduler")):
        costs = [(machine_ms_per_pod(r["null"]), machine_ms_per_pod(r[a])) for r in rounds]
        each = [n / m for n, m in costs if n is not None and m]
        if each and len(each) == len(rounds):  # runs recorded before the sampling have none
            out[key] = statistics.median(each)
            out[f"{key}_rounds"] = each
    return out


#: the streams whose pods are created as fast as the load generator can
UNPACED_STREAMS = ("scale", "scale_hog", "xlarge")


def stream_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """``<scenario>_p50_ratio`` / ``_p99_ratio`` (create→bound latency) and ``_pods_per_s_ratio``,
    shoal ÷ kube-scheduler, for the --large streaming scenarios; ``_offered_ratio`` for the unpaced
    ones (pods/s the load generator created while shoal ran ÷ while kube-scheduler ran, when the
    results carry it); ``xlarge_rss_ratio``."""
    out: dict[str, Any] = {}
    for scenario in (*UNPACED_STREAMS, "scale_paced", *(paced_name(r) for r in PACED_RATES)):
        if scenario not in results:
            continue
        s, k = results[scenario]["shoal"], results[scenario]["kube-scheduler"]
        out[f"{scenario}_p50_ratio"] = s["p50_s"] / k["p50_s"] if s["p50_s"] and k["p50_s"] else None
        out[f"{scenario}_p99_ratio"] = s["p99_s"] / k["p99_s"] if s["p99_s"] and k["p99_s"] else None
        out[f"{scenario}_pods_per_s_ratio"] = s["pods_per_s"] / max(k["pods_per_s"], 1e-9)
        if scenario in UNPACED_STREAMS and s.get("created_per_s") and k.get("created_per_s"):
            # the load each was offered: unpaced, the generator gets the CPU the scheduler leaves
            out[f"{scenario}_offered_ratio"] = s["created_per_s"] / k["created_per_s"]
    if "xlarge" in results:
        x = results["xlarge"]
        out["xlarge_rss_ratio"] = x["shoal"]["peak_rss_mb"] / x["kube-scheduler"]["peak_rss_mb"]
    return out


#: offered loads (pods/s) of the paced scenario: pods created at a fixed rate, the same for both
#: schedulers (an unpaced stream offers more load to whichever leaves the load generator more CPU)
PACED_RATES = (150, 200)
PACED_NODES, PACED_PODS = 5000, 10000
#: the scale scenario (5,000 nodes, 50,000 pods) again with pods created at this rate for both
#: schedulers: its latency at an equal offered load, about the rate kube-scheduler's own unpaced
#: stream reaches on this machine
SCALE_PACED_RATE = 200


def paced_name(rate: int) -> str:
    return f"paced{rate}"


def constrained_runs(nodes: int) -> tuple[tuple[str, int], ...]:
    """scheduler_perf's constrained workloads and their pod counts, for --profile as for the
    side-by-side run (one list, so the profiles stay those of the benchmarks)."""
    return (("antiaffinity", min(900, nodes)), ("affinity", 2000), ("spread", 2000))


async def profile_async(args: argparse.Namespace) -> int:
    """--profile: every scenario with shoal only, py-spy attached (bench/profiles.py)."""
    global PROFILES
    PROFILES = {}
    base = Path(tempfile.mkdtemp(prefix="shoal-profile-"))
    print(f"bench: profiling shoal (raw samples under {base})", flush=True)
    await throughput("shoal", base, args.nodes, args.pods, "basic")
    if args.large:
        await throughput("shoal", base, 5000, 50000, "scale")
    for workload, pods in constrained_runs(args.nodes):
        await throughput("shoal", base, args.nodes, pods, workload, workload)
    await backlog("shoal", base, args.nodes, args.pods)
    await topology("shoal", base)
    await preemption("shoal", base)
    await dra("shoal", base, args.nodes, args.pods)
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    write_profiles(PROFILES, PROFILE_RESULTS, PROFILE_DOC, when, machine(), revision())
    print(json.dumps({n: p["parts"] for n, p in PROFILES.items()}, indent=2))
    print(f"bench: wrote {PROFILE_RESULTS.relative_to(ROOT)} and {PROFILE_DOC.relative_to(ROOT)}")
    return 0


def report_from_results(results_file: Path = RESULTS, doc: Path = DOC) -> None:
    """The e2e section again from recorded results (the plots already in docs/ are kept as they are)."""
    recorded = json.loads(results_file.read_text())
    results = recorded.pop("results")
    images = [name for name in PLOTS if (doc.parent / name).is_file()]
    write_doc(results, recorded, images, doc=doc, settle_s=SETTLE_S)


#: the scenarios of a run in the order they run, by the name ``--only`` takes (their key in the
#: results); the ``LARGE_SCENARIOS`` only with ``--large`` (or when ``--only`` names them)
LARGE_SCENARIOS = ("scale", "scale_paced", "scale_hog", "xlarge")
SCENARIOS = (
    "basic",
    "basic_viewer",
    *LARGE_SCENARIOS,
    *(w for w, _ in constrained_runs(1000)),
    *(paced_name(r) for r in PACED_RATES),
    "backlog",
    "gang",
    "topology",
    "preemption",
    "gang_preemption",
    *DRA_SCENARIOS,
    "dra_gang",
    "packing",
    "herding",
)


def scenario_list(text: str) -> tuple[str, ...]:
    """``--only``'s value: scenario names, comma-separated."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown scenario {', '.join(unknown) or '(none given)'}; choose from {', '.join(SCENARIOS)}"
        )
    return names


def planned(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The scenarios this run runs, in order, and whether they are all a run without ``--only``
    would (only then are results and docs written)."""
    every = [s for s in SCENARIOS if args.large or s not in LARGE_SCENARIOS]
    if not args.only:
        return every, True
    chosen = [s for s in SCENARIOS if s in args.only]
    return chosen, set(every) <= set(chosen)


def dra_size(args: argparse.Namespace, scenario: str) -> tuple[int, int]:
    """Nodes and pods of a DRA scenario: ``--dra-nodes``/``--dra-pods`` when given, else ``dra``'s
    ``--nodes``/``--pods`` and the others' own (bench/e2e_dra_kinds.py). ``dra_gang``: a gang of
    two a node, ``--dra-pods`` not taken."""
    if scenario == "dra_gang":
        nodes = args.dra_nodes or e2e_dra_kinds.GANG_NODES
        return nodes, nodes * len(e2e_dra_kinds.GANG_MEMBERS)
    nodes, pods = (args.nodes, args.pods) if scenario == "dra" else e2e_dra_kinds.SIZES[scenario][:2]
    return args.dra_nodes or nodes, args.dra_pods or pods


def ratio(results: Mapping[str, Any], scenario: str) -> float:
    """A scenario's shoal pods/s ÷ kube-scheduler pods/s."""
    r = results[scenario]
    return float(r["shoal"]["pods_per_s"]) / max(float(r["kube-scheduler"]["pods_per_s"]), 1e-9)


def run_summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of a run (those of the scenarios it ran), printed and written with the results."""
    summary: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": revision(),
        "machine": machine(),
        "pods_after": "readyz",  # results recorded before this key waited 2 s blind for kube-scheduler
        # results recorded before this key ran the CPU hog and the null scheduler in the bench's own
        # session, hence CPU group under autogroup scheduling (see bench/e2e_report.py)
        "cpu_groups": CPU_GROUPS,
        "kube_version": Binaries.locate().kube_version,
    }
    if "basic" in results:
        summary["basic_ratio"] = (
            results["basic"]["shoal"]["pods_per_s"] / results["basic"]["kube-scheduler"]["pods_per_s"]
        )
    summary |= {
        f"{w}_ratio": results[w]["shoal"]["pods_per_s"] / results[w]["kube-scheduler"]["pods_per_s"]
        for w in CONSTRAINED
        if w in results
    }
    if "basic_viewer" in results and "basic" in results:
        viewed = results["basic_viewer"]["shoal"]["pods_per_s"]
        summary |= {
            "basic_viewer_ratio": viewed / results["basic"]["kube-scheduler"]["pods_per_s"],
            "viewer_cost_ratio": viewed / results["basic"]["shoal"]["pods_per_s"],
        }
    if "gang" in results:
        summary |= {
            "gang64_seconds": results["gang"]["seconds"],
            "gang64_all_bound": results["gang"]["all_bound"],
        }
    rss_scenario = "scale" if "scale" in results else "basic"
    if rss_scenario in results:
        rss_from = results[rss_scenario]
        summary |= {
            "rss_ratio": rss_from["shoal"]["peak_rss_mb"] / rss_from["kube-scheduler"]["peak_rss_mb"],
            "rss_scenario": rss_scenario,
        }
    if "packing" in results:
        summary |= {
            "packing_ratio": results["packing"]["shoal"]["allocated"]
            / max(results["packing"]["kube-scheduler"]["allocated"], 1),
            "packing_fraction": results["packing"]["shoal"]["fraction"],
        }
    if "topology" in results:
        summary |= topology_summary(results["topology"])
    if "preemption" in results:
        summary["preemption_ratio"] = ratio(results, "preemption")
    if "gang_preemption" in results:
        gp = results["gang_preemption"]
        summary |= {
            "gang_preemption_excess_victims": gp["shoal"]["excess_victims"],
            "gang_preemption_excess_victims_kube": gp["kube-scheduler"]["excess_victims"],
        }
    summary |= {f"{d}_ratio": ratio(results, d) for d in DRA_SCENARIOS if d in results}
    if "dra_gang" in results:
        dg = results["dra_gang"]
        summary |= {
            "dra_gang_placed": dg["shoal"]["placed"],
            "dra_gang_placed_kube": dg["kube-scheduler"]["placed"],
            "dra_gang_gangs": dg["shoal"]["gangs"],
        }
    if "backlog_rounds" in results:
        summary |= backlog_summary(results["backlog_rounds"])
    return summary | stream_summary(results)


async def main_async(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    results: dict[str, Any] = {}
    kinds = ["kube-scheduler", "shoal"]
    scenarios, every = planned(args)
    run = set(scenarios)
    if args.only:
        print(f"bench: only {', '.join(scenarios)}" + ("" if every else " (nothing written)"), flush=True)
    if "basic" in run:
        print(f"bench: basic ({args.nodes:,} nodes, {args.pods:,} pods)", flush=True)
        results["basic"] = {k: await throughput(k, base, args.nodes, args.pods, "basic") for k in kinds}
    if "basic_viewer" in run:
        print(f"bench: basic with {VIEWERS} fleet-page viewers polling shoal", flush=True)
        results["basic_viewer"] = {
            "shoal": await throughput("shoal-viewed", base, args.nodes, args.pods, "basic_viewer", "basic")
        }
    if "scale" in run:
        print("bench: scale (5,000 nodes, 50,000 pods)", flush=True)
        results["scale"] = {k: await throughput(k, base, 5000, 50000, "scale") for k in kinds}
    if "scale_paced" in run:
        print(f"bench: scale paced (5,000 nodes, 50,000 pods created at {SCALE_PACED_RATE}/s)", flush=True)
        results["scale_paced"] = {
            k: await throughput(k, base, 5000, 50000, "scale_paced", rate=SCALE_PACED_RATE) for k in kinds
        }
    if "scale_hog" in run:
        print("bench: scale with a CPU hog (5,000 nodes, 50,000 pods)", flush=True)
        results["scale_hog"] = {
            k: await throughput(k, base, 5000, 50000, "scale_hog", hog=True) for k in kinds
        }
    if "xlarge" in run:
        print("bench: xlarge (15,000 nodes, 100,000 pods)", flush=True)
        results["xlarge"] = {
            k: await throughput(k, base, 15000, 100000, "xlarge", timeout=3600) for k in kinds
        }
    for workload, pods in constrained_runs(args.nodes):
        if workload not in run:
            continue
        print(f"bench: {workload} ({args.nodes:,} nodes, {pods:,} pods)", flush=True)
        results[workload] = {
            k: await throughput(k, base, args.nodes, pods, workload, workload) for k in kinds
        }
    for rate in PACED_RATES:
        if paced_name(rate) not in run:
            continue
        print(f"bench: paced ({PACED_NODES:,} nodes, {PACED_PODS:,} pods created at {rate}/s)", flush=True)
        results[paced_name(rate)] = {
            k: await throughput(k, base, PACED_NODES, PACED_PODS, paced_name(rate), rate=rate) for k in kinds
        }
    if "backlog" in run:
        print(f"bench: backlog ({args.nodes:,} nodes, {args.pods:,} pods created first)", flush=True)
        results["backlog_rounds"] = await backlog_rounds(base, args.nodes, args.pods, args.backlog_rounds)
        results["backlog"] = median_round(results["backlog_rounds"])
    if "gang" in run:
        print("bench: gang (64 members on 1,000 nodes)", flush=True)
        results["gang"] = await gang(base)
        if not results["gang"]["all_bound"]:
            failed = base / "e2e-failed.json"
            failed.write_text(json.dumps({"results": results}, indent=2, default=str) + "\n")
            raise RuntimeError(
                f"gang: only {results['gang']['bound']} of {results['gang']['members']} members bound; "
                f"nothing written to bench/results or docs (partial results: {failed}; logs under {base})"
            )
    if "topology" in run:
        print("bench: topology (gangs of 8/16/64 in one clique/rack/block, 1,024 nodes)", flush=True)
        results["topology"] = {k: await topology(k, base) for k in kinds}
    if "preemption" in run:
        print("bench: preemption (scheduler_perf PreemptionBasic, 1,000 nodes, 1,000 preemptors)", flush=True)
        results["preemption"] = {k: await preemption(k, base) for k in kinds}
    if "gang_preemption" in run:
        print("bench: gang preemption (a gang of 8 on 16 full nodes)", flush=True)
        results["gang_preemption"] = {k: await gang_preemption(k, base) for k in kinds}
    if "dra" in run:
        nodes, pods = dra_size(args, "dra")
        print(f"bench: dra ({nodes:,} nodes x 8 GPU devices, {pods:,} one-GPU claims)", flush=True)
        results["dra"] = {k: await dra(k, base, nodes, pods) for k in kinds}
    if "dra_extended" in run:
        nodes, pods = dra_size(args, "dra_extended")
        print(
            f"bench: dra_extended (scheduler_perf ExtendedResource: {nodes:,} nodes x "
            f"{e2e_dra_kinds.EXTENDED_DEVICES} devices, {e2e_dra_kinds.EXTENDED_CLASSES} DeviceClasses "
            f"with an extendedResourceName, {pods:,} pods asking one)",
            flush=True,
        )
        results["dra_extended"] = {k: await dra_extended(k, base, nodes, pods) for k in kinds}
    if "dra_partitionable" in run:
        nodes, pods = dra_size(args, "dra_partitionable")
        print(
            f"bench: dra_partitionable (scheduler_perf Partitionable: {nodes:,} nodes x "
            f"{e2e_dra_kinds.MIG_GPUS} MIG-partitionable GPUs, {pods:,} 1g/2g/3g MIG claims)",
            flush=True,
        )
        results["dra_partitionable"] = {k: await dra_partitionable(k, base, nodes, pods) for k in kinds}
    if "dra_shared" in run:
        nodes, pods = dra_size(args, "dra_shared")
        print(
            f"bench: dra_shared (scheduler_perf ConsumableCapacity: {nodes:,} nodes x "
            f"{e2e_dra_kinds.SHARED_GPUS} shareable GPUs of {e2e_dra_kinds.SHARED_MEMORY}, {pods:,} claims "
            f"of {e2e_dra_kinds.SHARE} on two)",
            flush=True,
        )
        results["dra_shared"] = {k: await dra_shared(k, base, nodes, pods) for k in kinds}
    if "dra_gang" in run:
        nodes, _ = dra_size(args, "dra_gang")
        print(
            f"bench: dra_gang (kubernetes/kubernetes#138765: {nodes:,} nodes x one MIG-partitionable GPU, "
            f"{nodes:,} native gangs of two, one a node: the whole GPU or else a "
            f"{e2e_dra_kinds.HALF}, then a {e2e_dra_kinds.HALF})",
            flush=True,
        )
        results["dra_gang"] = {k: await dra_gang(k, base, nodes) for k in kinds}
    if "packing" in run:
        print("bench: packing", flush=True)
        results["packing"] = {k: await packing(k, base) for k in kinds}
    if "herding" in run:
        print("bench: herding", flush=True)
        results["herding"] = {k: await herding(k, base) for k in kinds}
    summary = run_summary(results)
    print(json.dumps(summary, indent=2))
    if not args.no_write and every:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(recorded(summary, results), indent=2, default=str) + "\n")
        write_doc(results, summary, plot(results), settle_s=SETTLE_S)
        write_summary()
        print(f"bench: wrote {RESULTS.relative_to(ROOT)} and docs/benchmarks.md")
    return 0


def previous_results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return data


def recorded(summary: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """What e2e.json holds after a run: its summary and results, and the figures of the race
    against the next release (bench/e2e_next.py) kept from the file as they were."""
    kept = {k: v for k, v in previous_results().items() if k.startswith(NEXT_KEYS)}
    return {**summary, **kept, "results": results}


def arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/e2e.py")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument(
        "--large",
        action="store_true",
        help="also the 5,000-node / 50,000-pod scale scenario (alone and with a CPU hog) and 15,000 / 100,000",
    )
    parser.add_argument(
        "--backlog-rounds",
        type=int,
        default=BACKLOG_ROUNDS,
        help=f"alternating rounds of the backlog scenario, its ratios the median over them (default {BACKLOG_ROUNDS})",
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--only",
        type=scenario_list,
        metavar="NAME[,NAME...]",
        help="run only these scenarios (nothing is written unless they are all a run without it has): "
        + ", ".join(SCENARIOS),
    )
    sizes = e2e_dra_kinds.SIZES.items()
    parser.add_argument(
        "--dra-nodes",
        type=int,
        help="nodes of every DRA scenario (default: dra --nodes, "
        + ", ".join(f"{s} {n:,}" for s, (n, _, _) in sizes)
        + f", dra_gang {e2e_dra_kinds.GANG_NODES:,}: a gang of two a node)",
    )
    parser.add_argument(
        "--dra-pods",
        type=int,
        help="pods of every DRA scenario but dra_gang (default: dra --pods, "
        + ", ".join(f"{s} {p:,}" for s, (_, p, _) in sizes)
        + ")",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="shoal only, py-spy attached: write docs/profiles.md and bench/results/profiles.json",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the e2e section of docs/benchmarks.md from bench/results/e2e.json; run nothing",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    if args.report_only:
        report_from_results()
        return 0
    missing = Binaries.locate().missing("etcd", "kube_apiserver", "kube_scheduler")
    if missing:
        print(f"bench: missing {missing}; run `make cluster-bin`", file=sys.stderr)
        return 2
    if args.profile:
        if Profiler.available() is None:
            print("bench: py-spy is not installed (pip install -e '.[bench]')", file=sys.stderr)
            return 2
        return asyncio.run(profile_async(args))
    scenarios, _ = planned(args)
    too_many = [
        e
        for s in scenarios
        if s in e2e_dra_kinds.SIZES and (e := e2e_dra_kinds.size_error(s, *dra_size(args, s))) is not None
    ]
    if "dra_gang" in scenarios and dra_size(args, "dra_gang")[0] < 1:
        too_many.append("dra_gang: nodes must be at least 1")
    if too_many:
        print("bench: " + "; ".join(too_many), file=sys.stderr)
        return 2
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
