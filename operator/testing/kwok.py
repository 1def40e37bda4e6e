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

from typing import Self

from shoal.testing.component import ComponentProcess
from shoal.testing.controlplane import Binaries, free_port, spawn

KWOK_ANNOTATION = "kwok.x-k8s.io/node"


class KwokProcess(ComponentProcess):
    """kwok as a :class:`ComponentProcess` (waiting for health, PID, stop), with its own command
    line: it serves plain HTTP and takes no kube-scheduler-style serving flags."""

    name = "kwok"
    health_path = "/healthz"

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
        self._wait_healthy(f"http://127.0.0.1:{port}{self.health_path}", timeout)
        return self
