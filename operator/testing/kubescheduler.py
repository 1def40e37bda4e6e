"""kube-scheduler of the same release, run against a test control plane: the specification.

Differential tests and benchmarks schedule the same objects with it and with shoal. It runs with
a KubeSchedulerConfiguration (its default profile unless ``profiles`` are passed) and is ready when
``/readyz`` answers: informers synced, and with leader election off scheduling starts then. It
runs with the control plane's Workload feature gates, so its default profile includes
GangScheduling and TopologyPlacementGenerator: native gangs and their topology constraints are
scheduled by kube-scheduler itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shoal.testing.component import ComponentProcess
from shoal.testing.controlplane import WORKLOAD_FEATURE_GATES, Binaries


class KubeSchedulerProcess(ComponentProcess):
    name = "kube-scheduler"

    def __init__(
        self, kubeconfig: Path, workdir: Path, *, profiles: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(kubeconfig, workdir)
        self.profiles = profiles

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

    def argv(self, port: int) -> list[str]:
        cfg = self.workdir / "kube-scheduler.yaml"
        cfg.write_text(json.dumps(self.config()))
        gates = f"--feature-gates={WORKLOAD_FEATURE_GATES}"
        return [str(Binaries.locate().kube_scheduler), f"--config={cfg}", gates]
