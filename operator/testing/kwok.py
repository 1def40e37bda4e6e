"""KWOK's ``kwok`` against a test control plane: the kubelets of fake nodes.

Without kubelets a pod bound to a node never runs, and a deleted pod stays terminating forever
(graceful deletion waits for the kubelet). kwok plays the kubelet of every node annotated
``kwok.x-k8s.io/node: fake`` (:data:`KWOK_ANNOTATION`) with its release's "fast" stages
(``hack/k8s/build.sh kwok`` copies them next to the binary): a bound pod turns Running and Ready;
a pod being deleted is removed within its grace period (between 1 s and its deletionTimestamp,
kwok's general pod-delete stage), as a kubelet stopping it would. Started by PID with
``PR_SET_PDEATHSIG``, ready when its ``/healthz`` answers, stopped by PID.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any, Self

from shoal.testing.controlplane import Binaries, free_port, spawn, stop_process, tail

KWOK_ANNOTATION = "kwok.x-k8s.io/node"


class KwokProcess:
    name = "kwok"

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.kubeconfig, self.workdir = kubeconfig, workdir
        self.log = workdir / "kwok.log"
        self.popen: Any = None

    def start(self, timeout: float = 60.0) -> Self:
        binaries = Binaries.locate()
        missing = [p for p in (binaries.kwok, binaries.kwok_stages) if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{missing[0]} is missing: run hack/k8s/build.sh kwok")
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        argv = [
            str(binaries.kwok),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={binaries.kwok_stages}",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{port}",
            "--node-lease-duration-seconds=0",
        ]
        self.popen = spawn(argv, self.log)
        self._wait_healthy(f"http://127.0.0.1:{port}/healthz", timeout)
        return self

    def _wait_healthy(self, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"kwok exited ({self.popen.returncode}):\n{tail(self.log)}")
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"kwok not ready in {timeout:.0f} s:\n{tail(self.log)}")

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def stop(self) -> int | None:
        return stop_process(self.popen) if self.popen is not None else None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
