"""Two replicas of a scheduler with leader election, as a Deployment of two runs them.

``make soak`` runs shoal and kube-scheduler this way so that a fault can SIGKILL the leader: the
standby takes the Lease once it expires (15 s for both), and the killed replica is started again
at once, as its kubelet restarts a killed container (it then competes for the Lease too). Any
replica that exits by itself (kube-scheduler exits when it loses its Lease, say after a stall
longer than its renew deadline) is restarted the same way, within a second.

The figures a soak takes follow the leader: its RSS, and the CPU of every replica (the standby
watches too, so its cost is part of running two).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from kubernetes_asyncio import client

from bench.e2e_schedulers import SETTLE_S, process_cpu, process_status_kb, wait_ready
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_profile

#: the Lease each scheduler's replicas compete for (kube-scheduler's is its default)
LEASES = {"shoal": ("kube-system", "shoal-soak"), "kube-scheduler": ("kube-system", "kube-scheduler")}


class Replica:
    """One process of the pair: started, asked whether it leads, killed, its CPU kept."""

    def __init__(self, kind: str, cp: ControlPlane, workdir: Path, n: int) -> None:
        self.kind, self.n = kind, n
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc: OperatorProcess | KubeSchedulerProcess
        if kind == "shoal":
            namespace, lease = LEASES[kind]
            self.proc = OperatorProcess(
                cp.kubeconfig,
                workdir / f"shoal-{n}.log",
                identity=f"shoal-{n}",
                lease_name=lease,
                extra=["--lease-namespace", namespace],
            )
        else:
            self.proc = KubeSchedulerProcess(cp.kubeconfig, workdir / f"kube-{n}", leader_elect=True)
        #: CPU seconds when last read (what a replica used is kept once it is gone)
        self.cpu = 0.0

    async def start(self) -> None:
        """Start and wait until ready; a replica that does not get there is stopped (never left
        running untracked, competing for the Lease)."""
        try:
            if isinstance(self.proc, OperatorProcess):
                op = self.proc.start()
                try:
                    url = f"http://127.0.0.1:{op.metrics_port}/readyz"
                    await wait_ready(url, 60, f"shoal-{self.n} ready", op.alive)
                except (RuntimeError, TimeoutError) as exc:
                    raise RuntimeError(f"{exc}\n--- {op.log} ---\n{op.tail()}") from exc
            else:
                await asyncio.to_thread(self.proc.start, 60.0)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        popen = self.proc.popen
        return popen is not None and popen.poll() is None

    def leads(self) -> bool:
        if isinstance(self.proc, OperatorProcess):
            return self.alive() and self.proc.is_leader()
        return self.proc.leads()

    def sample(self) -> None:
        """Read its CPU while its PID is still its own (not yet reaped: an exited child stays a
        zombie, CPU included, until polled)."""
        popen = self.proc.popen
        if popen is not None and popen.returncode is None:
            cpu = process_cpu(self.pid)
            if cpu is not None:
                self.cpu = cpu

    def kill(self) -> None:
        self.sample()
        self.proc.popen.kill()  # nothing once it was reaped
        self.proc.popen.wait(10)

    def stop(self) -> None:
        self.sample()
        popen = self.proc.popen
        if popen is not None and popen.poll() is None:
            self.proc.stop()


class Replicas:
    """The pair, with a supervisor restarting what exited (as a kubelet would)."""

    def __init__(self, kind: str, cp: ControlPlane, workdir: Path) -> None:
        self.kind, self.cp, self.workdir = kind, cp, workdir
        self.scheduler_name = "gpu-scheduler" if kind == "shoal" else "default-scheduler"
        self.replicas: list[Replica] = []
        #: every replica ever started, for the CPU they used
        self.every: list[Replica] = []
        self.leader: Replica | None = None
        #: replicas started again after they exited or were killed
        self.restarts = 0
        self._started = 0
        self._filling = asyncio.Lock()
        self._supervisor: asyncio.Task[None] | None = None

    async def _spawn(self) -> Replica:
        r = Replica(self.kind, self.cp, self.workdir, self._started)
        self._started += 1
        self.every.append(r)
        await r.start()  # stops what it started if it fails
        self.replicas.append(r)
        return r

    async def _fill(self) -> None:
        """Back to two replicas (each start after the first two is a restart)."""
        async with self._filling:
            while len(self.replicas) < 2:
                try:
                    await self._spawn()
                except (RuntimeError, TimeoutError) as exc:  # tried again at the next tick
                    print(f"  [{self.kind} replicas] a replica did not start: {exc}"[:400], flush=True)
                    return
                self.restarts += self._started > 2

    async def start(self, api: client.ApiClient) -> None:
        """The first replica until it leads, then the standby."""
        if self.kind == "shoal":
            await create(api, make_profile("gpu-scheduler", DEFAULT_PROFILE_SPEC))
        first = await self._spawn()
        await self._wait_leader(60, want=first)
        await self._spawn()
        self._supervisor = asyncio.create_task(self._supervise())
        await asyncio.sleep(SETTLE_S)

    @property
    def pid(self) -> int:
        """The leader's (the last one known, or a live replica, during a takeover)."""
        live = [r for r in self.replicas if r.alive()]
        if self.leader is not None and self.leader in live:
            return self.leader.pid
        assert live, f"no {self.kind} replica is running"
        return live[0].pid

    def rss_mb(self) -> float:
        """The leader's resident memory (see :attr:`pid`)."""
        for _ in range(3):  # a replica may exit between choosing it and reading it
            try:
                return process_status_kb(self.pid, "VmRSS").get("VmRSS", 0) / 1024
            except FileNotFoundError:
                continue
        return 0.0

    def cpu(self) -> float:
        """CPU seconds every replica used so far, the killed and exited ones included."""
        for r in self.replicas:
            r.sample()
        return sum(r.cpu for r in self.every)

    async def _find_leader(self) -> Replica | None:
        for r in list(self.replicas):
            if await asyncio.to_thread(r.leads):
                self.leader = r
                return r
        return None

    async def _wait_leader(
        self, timeout: float, other_than: Replica | None = None, *, want: Replica | None = None
    ) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = await self._find_leader()
            if found is not None and found is not other_than and (want is None or found is want):
                return found
            await asyncio.sleep(0.2)
        raise TimeoutError(f"no {self.kind} replica took the Lease in {timeout:.0f} s")

    async def kill_leader(self) -> Replica:
        """SIGKILL the leader (waiting up to 30 s for one to lead). The supervisor starts the
        replacement at once, as a kubelet restarts a killed container; :meth:`settled` says
        when another replica leads and two run again."""
        old = await self._wait_leader(30)
        old.kill()
        self.replicas.remove(old)
        return old

    async def settled(self, old: Replica, timeout: float = 90.0) -> None:
        await self._wait_leader(timeout, other_than=old)
        await self._fill()  # (or waits for the supervisor's fill under way)

    async def _supervise(self) -> None:
        """Every second: each replica's CPU read, one that exited dropped and replaced."""
        while True:
            await asyncio.sleep(1.0)
            for r in list(self.replicas):
                r.sample()
                if not r.alive():
                    self.replicas.remove(r)
            await self._fill()
            with contextlib.suppress(Exception):
                await self._find_leader()

    def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
        for r in self.every:  # a replica still starting included
            r.stop()
