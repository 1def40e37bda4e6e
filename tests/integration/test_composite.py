"""CompositePodGroups (Kubernetes 1.38, gate CompositePodGroup) on the real API server: shoal and
kube-scheduler 1.38.0-beta.0 on the same objects.

The case is kube-scheduler's own (``test/integration/scheduler/podgroup/topology_aware_scheduling/
cpg_tas_test.go``, "zone and rack"): four nodes of 2 CPUs, node3 half busy; a job (CompositePodGroup,
``minGroupCount`` 2, one zone) of two replicas (PodGroups, ``minCount`` 2, one rack each). zone-2's
one rack has 3 CPUs free: the first replica would fit there and the second not, so both schedulers
place the whole job in zone-1, each replica in one rack. Then a job of three replicas that no
zone holds: nothing is placed, and both say so on the CompositePodGroup.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import (
    RACK_LABEL,
    ZONE_LABEL,
    make_composite_pod_group,
    make_native_pod_group,
    make_node,
    make_pod,
    make_profile,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        Binaries.locate().kube_version < "v1.38",
        reason="CompositePodGroup is Kubernetes 1.38 (make test-next)",
    ),
]

NATIVE = ("scheduling.k8s.io", "v1beta1")
WL = ("job", "t")


async def composite_condition(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    custom: Any = client.CustomObjectsApi(api)
    obj = await custom.get_namespaced_custom_object(*NATIVE, namespace, "compositepodgroups", name)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "CompositePodGroupInitiallyScheduled"), None)


async def job(api: client.ApiClient, namespace: str, name: str, replicas: int, scheduler: str) -> None:
    """A CompositePodGroup ``name`` (one zone, all ``replicas`` needed) of PodGroups of two
    one-CPU pods, one rack each."""
    await create(
        api,
        make_composite_pod_group(
            name, namespace=namespace, min_groups=replicas, workload=WL, topology_key=ZONE_LABEL
        ),
    )
    for r in range(replicas):
        group = f"{name}-r{r}"
        await create(
            api,
            make_native_pod_group(
                group, namespace=namespace, min_count=2, workload=WL, topology_key=RACK_LABEL, parent=name
            ),
        )
    await create_many(
        api,
        [
            make_pod(
                f"{name}-r{r}-{i}",
                namespace=namespace,
                cpu="1",
                scheduler_name=scheduler,
                scheduling_group=f"{name}-r{r}",
            )
            for r in range(replicas)
            for i in range(2)
        ],
    )


async def run_jobs(api: client.ApiClient, namespace: str, scheduler: str) -> dict[str, Any]:
    """Job ``fits`` (two replicas) then job ``toobig`` (three): where each pod went, and each
    job's condition once both are settled."""
    core: Any = client.CoreV1Api(api)
    await job(api, namespace, "fits", 2, scheduler)

    async def placed() -> dict[str, str | None] | None:
        pods = await list_all(core.list_namespaced_pod, namespace)
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        return nodes if len(nodes) == 4 and all(nodes.values()) else None

    fits = await wait_for(placed, 60, what=f"{scheduler}: job fits bound")
    await job(api, namespace, "toobig", 3, scheduler)

    async def conditions() -> dict[str, dict[str, Any]] | None:
        found = {j: await composite_condition(api, namespace, j) for j in ("fits", "toobig")}
        settled = found["fits"] is not None and found["toobig"] is not None
        return {j: c for j, c in found.items() if c} if settled else None

    conds = await wait_for(conditions, 90, what=f"{scheduler}: the CompositePodGroups' conditions")
    pods = await list_all(core.list_namespaced_pod, namespace)
    toobig = sum(1 for p in pods if p["metadata"]["name"].startswith("toobig") and p["spec"].get("nodeName"))
    return {"fits": fits, "toobig_bound": toobig, "conditions": conds}


async def test_a_job_of_replicas_as_kube_scheduler_places_it(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Any
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    nodes = [
        make_node("node1", cpu="2", rack="rack-1", zone="zone-1"),
        make_node("node2", cpu="2", rack="rack-2", zone="zone-1"),
        make_node("node3", cpu="2", rack="rack-1", zone="zone-2"),
        make_node("node4", cpu="2", rack="rack-1", zone="zone-2"),
    ]
    await create_many(api, nodes)
    spaces = [
        f"cpg-kube-{uuid.uuid4().hex[:6]}",
        f"cpg-shoal-{uuid.uuid4().hex[:6]}",
        f"busy-{uuid.uuid4().hex[:6]}",
    ]
    for ns in spaces:
        await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create(api, make_pod("busy", namespace=spaces[2], cpu="1", node_name="node3"))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await run_jobs(api, spaces[0], "default-scheduler")
    await core.delete_collection_namespaced_pod(spaces[0], grace_period_seconds=0)

    async def freed() -> bool | None:
        return not await list_all(core.list_namespaced_pod, spaces[0]) or None

    await wait_for(freed, 30, what="kube-scheduler's pods deleted")
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    ours = await run_jobs(api, spaces[1], sched)
    print("kube-scheduler:", kube, "\nshoal:", ours)
    for result in (kube, ours):
        where = result["fits"]
        assert set(where.values()) == {"node1", "node2"}  # zone-1, the only zone holding both
        assert where["fits-r0-0"] == where["fits-r0-1"] and where["fits-r1-0"] == where["fits-r1-1"]
        assert result["toobig_bound"] == 0
        fits, toobig = result["conditions"]["fits"], result["conditions"]["toobig"]
        assert (fits["status"], fits["reason"]) == ("True", "Scheduled")
        assert (toobig["status"], toobig["reason"]) == ("False", "Unschedulable")
    # shoal names the level that cannot hold the job and the best domain's shortfall
    assert (
        "no topology.kubernetes.io/zone domain can hold its members (required)"
        in (ours["conditions"]["toobig"]["message"])
    )
    for ns in spaces:
        await core.delete_namespace(ns)
