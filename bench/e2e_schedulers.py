"""The schedulers under test in ``make bench`` (kube-scheduler and shoal, each a process on its own
control plane), how their readiness is awaited and how their CPU and memory are read."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import ClientTimeout
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PLUGINS_SPEC, DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, wait_for
from shoal.testing.controlplane import ControlPlane, spawn
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_profile

CLK_TCK = os.sysconf("SC_CLK_TCK")
SETTLE_S = 1.0  # after a scheduler reports ready, the same short pause for both before any pod


async def wait_ready(url: str, timeout: float, what: str, alive: Any = None) -> None:
    """Poll a health URL until it answers 200 (https without verification: a local self-signed
    serving certificate). ``alive()`` returning False ends the wait with an error at once."""

    async def ready() -> bool:
        if alive is not None and not alive():
            raise RuntimeError(f"{what}: the process exited")
        try:
            async with (
                aiohttp.ClientSession(timeout=ClientTimeout(total=2)) as s,
                s.get(url, ssl=False) as r,
            ):
                return r.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    await wait_for(ready, timeout, interval=0.1, what=what)


# -- process accounting -----------------------------------------------------------------------------
def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS bytes) of a live process."""
    cpu = process_cpu(pid)
    if cpu is None:
        raise ProcessLookupError(pid)
    return cpu, process_status_kb(pid, "VmHWM").get("VmHWM", 0) * 1024


def process_status_kb(pid: int, *fields: str) -> dict[str, int]:
    """The kB-valued ``fields`` of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``, ...); raises
    ``FileNotFoundError`` once the process is gone."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in fields:
                out[key] = int(value.split()[0])
    return out


def process_cpu(pid: int) -> float | None:
    """CPU seconds of a process (user + system), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_cpu(stat_line: str | None = None) -> tuple[float, float, float]:
    """(busy, steal, total) CPU seconds of the whole machine since boot, from ``/proc/stat``'s
    first line (user nice system idle iowait irq softirq steal; guest time is inside user). Busy
    is every field but idle, iowait and steal; steal is what the hypervisor gave other guests."""
    if stat_line is None:
        with open("/proc/stat") as f:
            stat_line = f.readline()
    v = [int(x) for x in stat_line.split()[1:9]]
    v += [0] * (8 - len(v))
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    return busy / CLK_TCK, v[7] / CLK_TCK, sum(v) / CLK_TCK


@dataclass(frozen=True)
class CpuSample:
    """The machine's CPU counters and some processes' CPU seconds at one moment (monotonic)."""

    at: float
    busy: float
    steal: float
    total: float
    procs: Mapping[str, float]


def cpu_window(samples: Sequence[CpuSample], t0: float, t1: float, cores: int) -> dict[str, Any] | None:
    """Where the machine's CPU went between ``t0`` and ``t1``: from the last sample at or before
    ``t0`` (the first, when none is) to the first at or after ``t1`` (the last, when none is).
    ``cores_used`` per process (its CPU seconds per second of the window), ``busy`` and ``steal``
    as shares of all ``cores``; None with fewer than two samples in that span."""
    if len(samples) < 2:
        return None
    before = [s for s in samples if s.at <= t0]
    after = [s for s in samples if s.at >= t1]
    s0 = before[-1] if before else samples[0]
    s1 = after[0] if after else samples[-1]
    seconds = s1.at - s0.at
    if seconds <= 0:
        return None
    span = max(s1.total - s0.total, 1e-9)
    return {
        "seconds": seconds,
        "cores": cores,
        "busy": (s1.busy - s0.busy) / span,
        "steal": (s1.steal - s0.steal) / span,
        "cores_used": {
            name: (s1.procs[name] - s0.procs[name]) / seconds for name in s1.procs if name in s0.procs
        },
    }


def machine_ms_per_pod(run: Mapping[str, Any]) -> float | None:
    """The whole machine's busy CPU per pod bound (ms) in a backlog run with a ``cpu_window``: what
    the run cost the machine, whatever share of its time the host gave it."""
    w = run.get("cpu_window")
    if not w or not run.get("pods_per_s"):
        return None
    return 1000 * float(w["busy"]) * int(w["cores"]) / float(run["pods_per_s"])


@dataclass
class CpuSampler:
    """Samples the machine's CPU counters and the named processes' CPU seconds every ``interval``
    while in its ``async with``, and once more on leaving it."""

    pids: Mapping[str, int]
    interval: float = 0.2
    samples: list[CpuSample] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        busy, steal, total = machine_cpu()
        procs = {n: c for n, pid in self.pids.items() if (c := process_cpu(pid)) is not None}
        self.samples.append(CpuSample(time.monotonic(), busy, steal, total, procs))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    async def __aenter__(self) -> CpuSampler:
        self.sample()  # the window's start even if what it waits for is already over
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()


# -- schedulers under test --------------------------------------------------------------------------
class KubeScheduler:
    name = "kube-scheduler"
    scheduler_name = "default-scheduler"

    def __init__(
        self,
        cp: ControlPlane,
        workdir: Path,
        profiles: list[dict[str, Any]] | None = None,
        args: Sequence[str] = (),
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.cp, self.workdir = cp, workdir
        self.profiles = profiles
        self.args = args
        #: more top-level KubeSchedulerConfiguration fields
        self.settings = settings
        self.proc: KubeSchedulerProcess | None = None

    async def start(self, api: client.ApiClient) -> None:
        # kube-scheduler's default profile (or ``profiles``), qps/burst 5000, no leader election;
        # /readyz turns 200 once informers and event handlers have synced, and scheduling starts then
        self.proc = KubeSchedulerProcess(
            self.cp.kubeconfig, self.workdir, profiles=self.profiles, args=self.args, settings=self.settings
        )
        await asyncio.to_thread(self.proc.start, 60.0)
        await asyncio.sleep(SETTLE_S)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def same_work_profiles() -> list[dict[str, Any]]:
    """kube-scheduler doing shoal's work: every node scored, NodeResourcesFit's MostAllocated
    strategy with shoal's resource weights, PodTopologySpread without default constraints (as
    shoal's profile), and shoal's Score plugins and weights (those kube has:
    GPUMemory and NetworkLatency are shoal's own, and score nothing for pods without GPUs or
    peers). Filters are the same already: shoal's default profile runs kube's default Filters."""
    args = {c["name"]: c["args"] for c in DEFAULT_PROFILE_SPEC["pluginConfig"]}
    kube_scores = {
        "NodeResourcesFit",
        "TaintToleration",
        "NodeAffinity",
        "PodTopologySpread",
        "InterPodAffinity",
    }
    kube_scores |= {"ImageLocality", "VolumeBinding", "DynamicResources"}
    score = [
        {"name": ref["name"], "weight": ref.get("weight", 1)}
        for ref in DEFAULT_PLUGINS_SPEC["score"]
        if ref["name"] in kube_scores
    ]
    return [
        {
            "schedulerName": "default-scheduler",
            "percentageOfNodesToScore": 100,
            "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": score}},
            # the same NodeResourcesFit strategy, and no default spreading (defaultingType: List)
            "pluginConfig": [{"name": n, "args": args[n]} for n in ("NodeResourcesFit", "PodTopologySpread")],
        }
    ]


class Shoal:
    name = "shoal"
    scheduler_name = "gpu-scheduler"

    def __init__(self, cp: ControlPlane, workdir: Path, extra: Sequence[str] = ()) -> None:
        """``extra``: more ``shoal run`` flags (``--web`` for the fleet page)."""
        self.cp, self.workdir, self.extra = cp, workdir, tuple(extra)
        self.op: OperatorProcess | None = None

    async def start(self, api: client.ApiClient) -> None:
        await create(api, make_profile("gpu-scheduler", DEFAULT_PROFILE_SPEC))
        self.op = OperatorProcess(
            self.cp.kubeconfig, self.workdir / "shoal.log", leader_elect=False, extra=self.extra
        ).start()
        op = self.op
        try:
            await wait_ready(f"http://127.0.0.1:{op.metrics_port}/readyz", 60, "shoal ready", op.alive)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n--- {op.log} ---\n{op.tail()}") from exc
        await asyncio.sleep(SETTLE_S)

    @property
    def pid(self) -> int:
        assert self.op is not None
        return self.op.pid

    def stop(self) -> None:
        if self.op is not None:
            self.op.stop()


#: the backlog scenario's schedulers, in the order they run (and are reported)
BACKLOG_KINDS = ("null", "null-events", "kube-scheduler", "kube-same-work", "shoal")


class NullScheduler:
    """bench/nullscheduler.py as a process: binds round-robin, decides nothing (the ceiling).
    ``events``: also posts a ``Scheduled`` event per pod (kind ``null-events``)."""

    scheduler_name = "null-scheduler"

    def __init__(self, cp: ControlPlane, workdir: Path, *, events: bool = False) -> None:
        self.cp, self.workdir = cp, workdir
        self.events = events
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return "null-events" if self.events else "null"

    async def start(self, api: client.ApiClient) -> None:
        ready = self.workdir / "null-ready"
        ready.unlink(missing_ok=True)
        script = Path(__file__).with_name("nullscheduler.py")
        args = [sys.executable, str(script), "--kubeconfig", str(self.cp.kubeconfig), "--ready", str(ready)]
        args += ["--events"] if self.events else []
        self.proc = proc = await asyncio.to_thread(self._spawn, args)

        async def watching() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"null scheduler exited ({self.workdir / 'null.log'})")
            return ready.exists()

        await wait_for(watching, 60, interval=0.1, what="null scheduler watching")
        await asyncio.sleep(SETTLE_S)

    def _spawn(self, args: list[str]) -> subprocess.Popen[bytes]:
        # its own session, as every other process under test: with the kernel's autogroup
        # scheduling a session is one CPU group, and sharing the harness's would have the ceiling
        # compete with the bench's own pod watcher for one group's share of the CPU
        return spawn(args, self.workdir / "null.log")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
