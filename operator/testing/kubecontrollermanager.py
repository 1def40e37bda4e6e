"""kube-controller-manager of the same release, running only the PersistentVolume binder, for the
volume tests: it binds claims to the PVs VolumeBinding chose (and marks them bind-completed), as in
a real cluster.

Started by PID with ``PR_SET_PDEATHSIG`` (it never outlives the test run), leader election off, as
:mod:`shoal.testing.kubescheduler` starts kube-scheduler; ready when its ``/healthz`` answers.
"""

from __future__ import annotations

import ssl
import time
import urllib.request
from pathlib import Path
from typing import Any

from shoal.testing.controlplane import Binaries, free_port, spawn, stop_process, tail

#: the controllers it runs: the PV binder only (no provisioner is installed in the tests)
CONTROLLERS = "persistentvolume-binder-controller"


class KubeControllerManagerProcess:
    def __init__(self, kubeconfig: Path, workdir: Path, *, controllers: str = CONTROLLERS) -> None:
        self.kubeconfig, self.workdir = kubeconfig, workdir
        self.controllers = controllers
        self.log = workdir / "kube-controller-manager.log"
        self.popen: Any = None

    def start(self, timeout: float = 60.0) -> KubeControllerManagerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        argv = [
            str(Binaries.locate().kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={self.controllers}",
            "--leader-elect=false",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--authorization-always-allow-paths=/healthz",
            "--v=1",
        ]
        self.popen = spawn(argv, self.log)
        self._wait_healthy(f"https://127.0.0.1:{port}/healthz", timeout)
        return self

    def _wait_healthy(self, url: str, timeout: float) -> None:
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(
                    f"kube-controller-manager exited ({self.popen.returncode}):\n{tail(self.log)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1, context=insecure) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"kube-controller-manager not healthy in {timeout:.0f} s:\n{tail(self.log)}")

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def stop(self) -> int | None:
        return stop_process(self.popen) if self.popen is not None else None

    def __enter__(self) -> KubeControllerManagerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
