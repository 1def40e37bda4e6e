"""A real etcd + kube-apiserver on loopback, for tests, the demo and benchmarks.

Why this module exists: shoal is tested against the real API server, never an imitation, and this
machine cannot download release binaries. ``hack/k8s/build.sh`` builds etcd, kube-apiserver,
kube-scheduler, kube-controller-manager and helm from Go modules into
``~/.cache/shoal/bin/<version>/``; this module starts them on free loopback ports in a temporary
directory and stops them again.

What it guarantees:

* start-up waits for ``/readyz``; on failure the error carries the tail of every log and the work
  directory is kept, so the logs it names can still be read (a normal :meth:`ControlPlane.stop`
  removes a temporary work directory);
* the admin identity is a static token in ``system:masters``; authorization is RBAC, so the chart's
  ServiceAccount can be tested with least privilege; service-account signing keys make the
  TokenRequest API work;
* no orphan process: children get ``PR_SET_PDEATHSIG`` so they die with the process that started
  them (even on SIGKILL), and :meth:`ControlPlane.stop` ends them by PID, never by name.
  Start a control plane from a long-lived thread (the main thread): the death signal fires when the
  *thread* that forked the child exits.

Command line (used by ``make cluster-up`` / ``make cluster-down``)::

    python -m shoal.testing.controlplane up   [--dir .cluster]   # prints export KUBECONFIG=...
    python -m shoal.testing.controlplane down [--dir .cluster]
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

ADMIN_TOKEN = "shoal-admin-token"
#: Kubernetes' native gang API (``scheduling.k8s.io/v1beta1`` Workload and PodGroup, KEP-4671) and
#: topology-aware workload scheduling (KEP-5732), off by default in 1.37: turned on in every control
#: plane this module starts and in kube-scheduler of the same release (``testing/kubescheduler.py``),
#: so shoal and kube-scheduler schedule native gangs side by side. 1.37 has no separate
#: ``GangScheduling`` gate: ``GenericWorkload`` enables kube-scheduler's GangScheduling plugin.
WORKLOAD_FEATURE_GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
#: 1.38 adds CompositePodGroup (beta, off by default; it needs the two above): gangs of gangs
COMPOSITE_FEATURE_GATE = "CompositePodGroup=true"


def workload_feature_gates(kube_version: str) -> str:
    """The workload gates a release has: 1.37's, and from 1.38 CompositePodGroup (a gate a
    release does not know stops its components at start)."""
    if kube_version >= "v1.38":
        return f"{WORKLOAD_FEATURE_GATES},{COMPOSITE_FEATURE_GATE}"
    return WORKLOAD_FEATURE_GATES


#: beta API versions of groups served only by kube-apiserver are off by default
WORKLOAD_RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message carries the logs' tails."""


def _find_versions_file() -> Path | None:
    candidates = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for base in candidates:
        path = base / "hack" / "k8s" / "versions.env"
        if path.is_file():
            return path
    return None


def _read_versions() -> dict[str, str]:
    versions = {
        "KUBE_VERSION": "v1.37.2",
        "ETCD_VERSION": "v3.6.16",
        "HELM_VERSION": "v3.22.0",
        "KWOK_VERSION": "v0.8.0",
    }
    path = _find_versions_file()
    if path is not None:
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                versions[key.strip()] = value.strip()
    for key in list(versions):
        versions[key] = os.environ.get(f"SHOAL_{key}", versions[key])
    return versions


@dataclass(frozen=True)
class Binaries:
    """Where the built binaries live, keyed by version (see hack/k8s/build.sh)."""

    kube_version: str
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    helm: Path
    #: the PV binder for the volume tests (built by hack/k8s/build.sh like the others)
    kube_controller_manager: Path
    #: KWOK's kwok (kubelets of fake nodes, for the preemption tests) and the stages it runs with
    kwok: Path = Path("/nonexistent/kwok")
    kwok_stages: Path = Path("/nonexistent/stages.yaml")

    @classmethod
    def locate(cls) -> Binaries:
        versions = _read_versions()
        root = Path(os.environ.get("SHOAL_BIN_DIR", Path.home() / ".cache" / "shoal" / "bin"))
        kube = root / versions["KUBE_VERSION"]
        return cls(
            kube_version=versions["KUBE_VERSION"],
            etcd=root / f"etcd-{versions['ETCD_VERSION']}" / "etcd",
            kube_apiserver=kube / "kube-apiserver",
            kube_scheduler=kube / "kube-scheduler",
            helm=root / f"helm-{versions['HELM_VERSION']}" / "helm",
            kube_controller_manager=kube / "kube-controller-manager",
            kwok=root / f"kwok-{versions['KWOK_VERSION']}" / "kwok",
            kwok_stages=root / f"kwok-{versions['KWOK_VERSION']}" / "stages.yaml",
        )

    def missing(self, *names: str) -> list[Path]:
        wanted = names or ("etcd", "kube_apiserver")
        return [p for n in wanted if not (p := getattr(self, n)).is_file()]


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a helper process that dies with us (PR_SET_PDEATHSIG) and logs to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,  # only prctl: async-signal-safe
            start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop children in order
        )


def stop_process(popen: subprocess.Popen[bytes], grace: float = 10.0) -> int | None:
    """SIGTERM by PID, then SIGKILL after ``grace`` seconds; returns the exit code."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(grace)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(10)
    return popen.returncode


def python_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``python -m shoal...`` children: PYTHONSAFEPATH keeps the checkout's
    ``operator/`` folder from shadowing the standard library when the cwd is the repository."""
    return {**os.environ, "PYTHONSAFEPATH": "1", **(extra or {})}


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class ControlPlane:
    """etcd + kube-apiserver on loopback. Use as a context manager or call start()/stop()."""

    workdir: Path | None = None
    binaries: Binaries = field(default_factory=Binaries.locate)
    extra_apiserver_args: Sequence[str] = ()
    keep_workdir: bool = False
    #: serve the native Workload API (False: a cluster without it, as before 1.37 or with the gates off)
    native_workloads: bool = True
    #: more ``--feature-gates`` for the API server (``Name=true``), beside the workload ones
    feature_gates: Sequence[str] = ()

    def __post_init__(self) -> None:
        self._own_workdir = self.workdir is None
        self.dir = Path(self.workdir or tempfile.mkdtemp(prefix="shoal-cp-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.etcd_port = 0
        self.port = 0
        self._procs: list[_Proc] = []
        self.startup_seconds = 0.0

    # -- addresses and credentials -------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return ADMIN_TOKEN

    @property
    def ca_file(self) -> Path:
        return self.dir / "certs" / "apiserver.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def logs(self) -> dict[str, Path]:
        return {"etcd": self.dir / "etcd.log", "kube-apiserver": self.dir / "kube-apiserver.log"}

    @property
    def pids(self) -> list[int]:
        return list(self.named_pids.values())

    @property
    def named_pids(self) -> dict[str, int]:
        """The live processes by name (``etcd``, ``kube-apiserver``)."""
        return {p.name: p.popen.pid for p in self._procs if p.popen.poll() is None}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> ControlPlane:
        missing = self.binaries.missing()
        if missing:
            raise ControlPlaneError(
                "control-plane binaries are missing: "
                + ", ".join(map(str, missing))
                + " (run `make cluster-bin`, which builds them from Go modules)"
            )
        began = time.monotonic()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._wait_ready(began + timeout)
        except BaseException as exc:
            # Stop the processes but keep the directory: the error names logs that must still exist.
            self._stop_processes(10.0)
            self.keep_workdir = True
            if isinstance(exc, ControlPlaneError):
                raise ControlPlaneError(f"{exc}\n(logs kept in {self.dir})") from None
            if isinstance(exc, Exception):
                raise ControlPlaneError(
                    f"starting the control plane failed: {exc!r}\n{self._logs_tail()}"
                    f"\n(logs kept in {self.dir})"
                ) from exc
            raise
        self._write_kubeconfig()
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Stop every process this control plane started, apiserver first, by PID; remove a
        temporary work directory unless ``keep_workdir`` (set by a failed :meth:`start`)."""
        self._stop_processes(grace)
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart_apiserver(self, timeout: float = 90.0) -> None:
        """Stop and start kube-apiserver alone (etcd keeps its data): for fault tests."""
        api = next(p for p in self._procs if p.name == "kube-apiserver")
        self._terminate(api, 10.0)
        self._procs.remove(api)
        self._start_apiserver(port=self.port)
        self._wait_ready(time.monotonic() + timeout)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> _Proc:
        log = self.dir / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
                start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop them in order
            )
        proc = _Proc(name, popen, log)
        self._procs.append(proc)
        return proc

    def _stop_processes(self, grace: float) -> None:
        for proc in reversed(self._procs):
            self._terminate(proc, grace)
        self._procs.clear()

    @staticmethod
    def _terminate(proc: _Proc, grace: float) -> None:
        stop_process(proc.popen, grace)

    def _start_etcd(self) -> None:
        self.etcd_port = free_port()
        peer = free_port()
        data = self.dir / "etcd-data"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=shoal",
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=shoal=http://127.0.0.1:{peer}",
                "--quota-backend-bytes=8589934592",
                "--unsafe-no-fsync",  # throw-away data: no fsync keeps a 2-core machine responsive
                "--log-level=warn",
            ],
        )

    def _ensure_credentials(self) -> None:
        (self.dir / "certs").mkdir(exist_ok=True)
        tokens = self.dir / "tokens.csv"
        if not tokens.exists():
            tokens.write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
        key, pub = self.dir / "sa.key", self.dir / "sa.pub"
        if not key.exists():
            openssl = shutil.which("openssl")
            if openssl is None:
                raise ControlPlaneError("openssl is needed to create service-account signing keys")
            subprocess.run([openssl, "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
            subprocess.run(
                [openssl, "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                check=True,
                capture_output=True,
            )

    def _start_apiserver(self, port: int = 0) -> None:
        self._ensure_credentials()
        self.port = port or free_port()
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.dir / 'certs'}",
                f"--token-auth-file={self.dir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                f"--service-account-key-file={self.dir / 'sa.pub'}",
                f"--service-account-signing-key-file={self.dir / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--api-audiences=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--profiling=false",
                "--v=1",
                *self._workload_args(),
                *self.extra_apiserver_args,
            ],
        )

    def _workload_args(self) -> list[str]:
        workload = workload_feature_gates(self.binaries.kube_version)
        gates = [*([workload] if self.native_workloads else []), *self.feature_gates]
        runtime = [f"--runtime-config={WORKLOAD_RUNTIME_CONFIG}"] if self.native_workloads else []
        return [*([f"--feature-gates={','.join(gates)}"] if gates else []), *runtime]

    def _wait_ready(self, deadline: float) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(
            f"{self.url}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        last = ""
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.popen.poll() is not None:
                    raise ControlPlaneError(
                        f"{proc.name} exited with code {proc.popen.returncode}\n{self._logs_tail()}"
                    )
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (OSError, ssl.SSLError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise ControlPlaneError(f"kube-apiserver not ready in time ({last})\n{self._logs_tail()}")

    def _logs_tail(self) -> str:
        return "\n".join(f"--- {name} ({path}) ---\n{tail(path)}" for name, path in self.logs.items())

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "shoal", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
            "contexts": [{"name": "shoal", "context": {"cluster": "shoal", "user": "admin"}}],
            "current-context": "shoal",
        }
        # JSON is valid YAML; no YAML dependency needed here.
        self.kubeconfig.write_text(json.dumps(config, indent=2))


@contextlib.contextmanager
def running(**kwargs: object) -> Iterator[ControlPlane]:
    """``with running() as cp:`` — start, yield, always stop."""
    cp = ControlPlane(**kwargs)  # type: ignore[arg-type]
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()
