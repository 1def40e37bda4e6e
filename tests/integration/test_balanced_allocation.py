"""NodeResourcesBalancedAllocation on the real API server, with kube-scheduler 1.37 as the reference.

1.37 scores the change in balance a pod makes (``50 + (50 + with − without) / 2``), not the
balance it leaves. Two nodes of 10 CPU / 10 GiB: ``even`` already half used in both, ``skewed``
half used in CPU only. A pod asking for 2 GiB of memory and no CPU:

* ``even``: 50%/50% → 50%/70%, balance 100 → 90, score 70;
* ``skewed``: 50%/0% → 50%/20%, balance 75 → 85, score 80.

So both schedulers, scoring with this plugin alone, put it on ``skewed``; scoring the balance it
leaves (90 against 85), as releases before did and shoal did until v1.37.2's table was
translated, puts it on ``even``.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

BALANCE_ONLY = [{"name": "NodeResourcesBalancedAllocation", "weight": 1}]


async def place(api: client.ApiClient, scheduler: str) -> str:
    """Where the memory-only pod goes (the load on each node is bound beforehand, no scheduler)."""
    core: Any = client.CoreV1Api(api)
    ns = f"balance-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create_many(
        api,
        [
            make_pod("even-load", namespace=ns, cpu="5", memory="5Gi", node_name="even"),
            make_pod("skewed-load", namespace=ns, cpu="5", memory=None, node_name="skewed"),
        ],
    )
    await create(api, make_pod("probe", namespace=ns, cpu=None, memory="2Gi", scheduler_name=scheduler))

    async def placed() -> str | None:
        name: str | None = (await core.read_namespaced_pod("probe", ns)).spec.node_name
        return name

    node = await wait_for(placed, 60, what=f"{scheduler}: probe pod placed")
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return str(node)


async def test_balance_scores_the_change_a_pod_makes_as_kube_scheduler_does(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    api = clean
    await create_many(api, [make_node(n, cpu="10", memory="10Gi") for n in ("even", "skewed")])
    kube_profile = {
        "schedulerName": "default-scheduler",
        "percentageOfNodesToScore": 100,
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": BALANCE_ONLY}},
    }
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler", profiles=[kube_profile]):
        kube = await place(api, "default-scheduler")
    sched = f"balance-{uuid.uuid4().hex[:6]}"
    spec = {"schedulerName": sched, "plugins": {"score": BALANCE_ONLY}}
    await create(api, make_profile(sched, spec, scheduler_name=sched))
    shoal = await place(api, sched)
    assert kube == shoal == "skewed"
