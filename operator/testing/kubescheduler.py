"""kube-scheduler of the same release, run against a test control plane: the specification.

Differential tests and benchmarks schedule the same objects with it and with shoal. It runs with
a KubeSchedulerConfiguration (its default profile unless ``profiles`` are passed) and is ready when
``/readyz`` answers: informers synced, and with leader election off scheduling starts then. It
runs with the control plane's Workload feature gates, so its default profile includes
GangScheduling and TopologyPlacementGenerator: native gangs and their topology constraints are
scheduled by kube-scheduler itself.

Tests that wait for kube-scheduler's preemptors start it with ``PREEMPTION_RACE_ARGS``: 1.37 can
leave a preemptor in its unschedulable pool after its asynchronous preemption has finished
(kubernetes/kubernetes#141694, fix pending in #142294) until the pool is flushed, 5 minutes by
default, longer than a test waits. Benchmarks keep the default, as users run it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shoal.testing.component import ComponentProcess
from shoal.testing.controlplane import Binaries, workload_feature_gates

#: a preemptor parked by the race above is retried after 10 s (the pool is checked every 30 s)
PREEMPTION_RACE_ARGS = ("--pod-max-in-unschedulable-pods-duration=10s",)


class KubeSchedulerProcess(ComponentProcess):
    name = "kube-scheduler"

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        *,
        profiles: list[dict[str, Any]] | None = None,
        args: Sequence[str] = (),
        feature_gates: Sequence[str] = (),
        leader_elect: bool = False,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(kubeconfig, workdir)
        #: more top-level KubeSchedulerConfiguration fields (``percentageOfPlacementsToScore``)
        self.settings = dict(settings or {})
        #: compete for the Lease ``kube-system/kube-scheduler`` (its defaults: 15 s, renewed by
        #: 10 s): replicas of one control plane elect one leader, as in a real cluster
        self.leader_elect = leader_elect
        self.profiles = profiles
        self.args = list(args)
        #: more ``--feature-gates`` (``Name=true``), beside the workload ones
        self.feature_gates = list(feature_gates)

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 5000, "burst": 5000},
            "leaderElection": {"leaderElect": self.leader_elect},
            **self.settings,
        }
        if self.profiles is not None:
            cfg["profiles"] = self.profiles
        return cfg

    def leads(self) -> bool:
        """Whether this replica holds the Lease: alive and its log says it acquired it (a
        kube-scheduler that loses its Lease exits, as ``leaderelection lost`` is fatal)."""
        if self.popen is None or self.popen.poll() is not None:
            return False
        try:
            return "Successfully acquired lease" in self.log.read_text(errors="replace")
        except OSError:
            return False

    def argv(self, port: int) -> list[str]:
        cfg = self.workdir / "kube-scheduler.yaml"
        cfg.write_text(json.dumps(self.config()))
        binaries = Binaries.locate()
        workload = workload_feature_gates(binaries.kube_version)
        gates = f"--feature-gates={','.join([workload, *self.feature_gates])}"
        return [str(binaries.kube_scheduler), f"--config={cfg}", gates, *self.args]
