"""NodeDeclaredFeatures on the real API server, with kube-scheduler 1.37 as the reference.

A pod with a ``RestartAllContainers`` restart rule (as the 1.37 API server accepts it, with the
container's own ``restartPolicy`` and ``exitCodes``) needs its node to declare
``RestartAllContainersOnContainerExits``. Of two nodes, one registered as a 1.37 kubelet does
(``status.declaredFeatures``) and one as an older kubelet (no list): both schedulers place the pod
on the first, and refuse one pinned to the second with the plugin's reason.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import (
    OperatorProcess,
    create,
    create_many,
    failed_scheduling_note,
    node_of,
    wait_for,
)
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import KUBELET_1_37_DECLARED_FEATURES, make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

REASON = "node(s) didn't match Pod's required features"


def restarter(name: str, namespace: str, scheduler: str, **kwargs: Any) -> dict[str, Any]:
    pod = make_pod(name, namespace=namespace, scheduler_name=scheduler, **kwargs)
    pod["spec"]["containers"][0].update(
        restartPolicy="Never",
        restartPolicyRules=[
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ],
    )
    return pod


async def run(api: client.ApiClient, scheduler: str) -> tuple[str | None, str]:
    """(where the pod goes, the FailedScheduling note of one pinned to the older node)."""
    core: Any = client.CoreV1Api(api)
    ns = f"ndf-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create(api, restarter("free", ns, scheduler))
    await create(api, restarter("pinned", ns, scheduler, node_selector={"kubelet": "older"}))

    node = await wait_for(lambda: node_of(api, ns, "free"), 60, what=f"{scheduler}: pod placed")
    note = await wait_for(
        lambda: failed_scheduling_note(api, ns, "pinned"), 60, what=f"{scheduler}: pinned pod refused"
    )
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return node, note


async def test_declared_features_as_with_kube_scheduler(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    api = clean
    await create_many(
        api,
        [
            make_node(
                "kubelet-137", labels={"kubelet": "1.37"}, declared_features=KUBELET_1_37_DECLARED_FEATURES
            ),
            make_node("kubelet-older", labels={"kubelet": "older"}),
        ],
    )
    core: Any = client.CoreV1Api(api)
    stored = await core.read_node("kubelet-137")
    assert "RestartAllContainersOnContainerExits" in (stored.status.declared_features or []), stored.status
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await run(api, "default-scheduler")
    sched = f"ndf-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal = await run(api, sched)
    assert kube[0] == shoal[0] == "kubelet-137"
    for note in (kube[1], shoal[1]):
        assert f"1 {REASON}" in note and "1 node(s) didn't match Pod's node affinity/selector" in note, note
