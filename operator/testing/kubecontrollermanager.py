"""kube-controller-manager of the same release, running only the controllers a test needs: the
PersistentVolume binder for the volume tests (it binds claims to the PVs VolumeBinding chose, and
marks them bind-completed), the resourceclaim controller for the DRA tests (it creates claims from
ResourceClaimTemplates), the workload controllers for the default-spreading test (Deployments,
ReplicaSets and StatefulSets make their pods), as in a real cluster.

Started by PID with ``PR_SET_PDEATHSIG`` (it never outlives the test run), leader election off, as
:mod:`shoal.testing.kubescheduler` starts kube-scheduler; ready when its ``/healthz`` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from shoal.testing.component import ComponentProcess
from shoal.testing.controlplane import Binaries, workload_feature_gates

#: the controllers it runs: the PV binder only (no provisioner is installed in the tests)
CONTROLLERS = "persistentvolume-binder-controller"
#: for the DRA tests: the resourceclaim controller makes a pod's claims from its
#: ResourceClaimTemplates and records their names in the pod's status, as in a cluster
DRA_CONTROLLERS = "resourceclaim-controller"
#: for the default-spreading test: Deployments, ReplicaSets and StatefulSets make their pods
WORKLOAD_CONTROLLERS = "deployment-controller,replicaset-controller,statefulset-controller"
#: for benchmarks: the controller's client and workers must not be what limits pods/s (its
#: defaults, 20 requests/s and 10 workers, would make claims from templates at ~10 pods/s)
FAST_CLAIMS = ("--kube-api-qps=5000", "--kube-api-burst=5000", "--concurrent-resourceclaim-syncs=50")


class KubeControllerManagerProcess(ComponentProcess):
    name = "kube-controller-manager"
    health_path = "/healthz"

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        *,
        controllers: str = CONTROLLERS,
        extra_args: tuple[str, ...] = (),
        feature_gates: Sequence[str] = (),
    ) -> None:
        super().__init__(kubeconfig, workdir)
        self.controllers = controllers
        self.extra_args = extra_args
        #: more ``--feature-gates`` (``Name=true``), beside the workload ones
        self.feature_gates = list(feature_gates)

    def argv(self, port: int) -> list[str]:
        binaries = Binaries.locate()
        gates = [workload_feature_gates(binaries.kube_version), *self.feature_gates]
        return [
            str(binaries.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={self.controllers}",
            "--leader-elect=false",
            "--authorization-always-allow-paths=/healthz",
            # the API server's and kube-scheduler's gates (controlplane.py): the resourceclaim
            # controller refuses a pod of a native PodGroup while GenericWorkload is off
            f"--feature-gates={','.join(gates)}",
            *self.extra_args,
        ]
