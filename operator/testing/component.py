"""A Kubernetes component of the same release (kube-scheduler, kube-controller-manager) run
against a test control plane: started by PID with ``PR_SET_PDEATHSIG`` (it never outlives the test
run), leader election off, ready when its health endpoint answers 200, stopped by PID.
"""

from __future__ import annotations

import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

from shoal.testing.controlplane import free_port, spawn, stop_process, tail


class ComponentProcess:
    #: the binary's name (log file, messages)
    name = ""
    #: the endpoint that answers 200 once the component works (anonymous may read it)
    health_path = "/readyz"

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.kubeconfig, self.workdir = kubeconfig, workdir
        self.log = workdir / f"{self.name}.log"
        self.popen: Any = None

    def argv(self, port: int) -> list[str]:
        """The command line, serving on 127.0.0.1:``port``."""
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        common = [
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--v=1",
        ]
        self.popen = spawn([*self.argv(port), *common], self.log)
        self._wait_healthy(f"https://127.0.0.1:{port}{self.health_path}", timeout)
        return self

    def _wait_healthy(self, url: str, timeout: float) -> None:
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.popen.returncode}):\n{tail(self.log)}")
            try:
                with urllib.request.urlopen(url, timeout=1, context=insecure) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready in {timeout:.0f} s:\n{tail(self.log)}")

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def stop(self) -> int | None:
        return stop_process(self.popen) if self.popen is not None else None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
