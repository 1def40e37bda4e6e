"""kube-scheduler of the same release, run against a test control plane: the specification.

Differential tests and benchmarks schedule the same objects with it and with shoal. It is started
by PID with ``PR_SET_PDEATHSIG`` (it never outlives the test run), leader election off, and given a
KubeSchedulerConfiguration (its defaults unless ``profiles`` are passed).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

from shoal.testing.controlplane import Binaries, free_port, spawn, stop_process, tail


class KubeSchedulerProcess:
    def __init__(
        self, kubeconfig: Path, workdir: Path, *, profiles: list[dict[str, Any]] | None = None
    ) -> None:
        self.kubeconfig, self.workdir = kubeconfig, workdir
        self.profiles = profiles
        self.log = workdir / "kube-scheduler.log"
        self.popen: Any = None

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 5000, "burst": 5000},
            "leaderElection": {"leaderElect": False},
        }
        if self.profiles is not None:
            cfg["profiles"] = self.profiles
        return cfg

    def start(self, timeout: float = 60.0) -> KubeSchedulerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "kube-scheduler.yaml"
        cfg.write_text(json.dumps(self.config()))
        port = free_port()
        argv = [
            str(Binaries.locate().kube_scheduler),
            f"--config={cfg}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--v=1",
        ]
        self.popen = spawn(argv, self.log)
        self._wait_ready(f"https://127.0.0.1:{port}/readyz", timeout)
        return self

    def _wait_ready(self, url: str, timeout: float) -> None:
        """/readyz is 200 once informers have synced (anonymous may read it); leader election is
        off, so scheduling starts then."""
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"kube-scheduler exited ({self.popen.returncode}):\n{tail(self.log)}")
            try:
                with urllib.request.urlopen(url, timeout=1, context=insecure) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"kube-scheduler not ready in {timeout:.0f} s:\n{tail(self.log)}")

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def stop(self) -> int | None:
        return stop_process(self.popen) if self.popen is not None else None

    def __enter__(self) -> KubeSchedulerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
