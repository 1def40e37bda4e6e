"""Differential: kube-scheduler of the same release and shoal schedule the same objects.

A fleet of 12 nodes in 3 zones (one tainted) and groups of pods with required anti-affinity,
affinity (to other pods and to themselves), topology spread, node selectors, tolerations and
JobSet-style exclusive placement (one job per zone, as the JobSet webhook writes it) are scheduled
once by kube-scheduler (its default profile) and once by shoal (its default profile). The two may
choose different nodes (kube-scheduler spreads, shoal packs), but every constraint must
hold for both (``shoal.testing.placement_checks``), and each group must end with the same number
of pods placed: the pods kube-scheduler leaves pending for a constraint, shoal leaves pending too.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import make_node, make_pod, make_profile
from shoal.testing.placement_checks import constraint_violations

pytestmark = pytest.mark.slow

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def fleet() -> list[dict[str, Any]]:
    nodes = []
    for z in "abc":
        for i in range(4):
            name = f"{z}-{i}"
            taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}] if name == "c-3" else []
            nodes.append(make_node(name, cpu="16", gpus=0, labels={ZONE: z, HOST: name}, taints=taints))
    return nodes


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


JOB_KEY = "jobset.sigs.k8s.io/job-key"


def jobset_exclusive(job: str) -> dict[str, Any]:
    """What the JobSet webhook injects for `alpha.jobset.sigs.k8s.io/exclusive-topology: zone`:
    required affinity to the pods of its own job, anti-affinity to any other job's pods."""
    own = {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job]}]}
    others = {
        "matchExpressions": [
            {"key": JOB_KEY, "operator": "Exists"},
            {"key": JOB_KEY, "operator": "NotIn", "values": [job]},
        ]
    }
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    return {
        "affinity": {
            "podAffinity": {required: [{"labelSelector": own, "namespaceSelector": {}, "topologyKey": ZONE}]},
            "podAntiAffinity": {
                required: [{"labelSelector": others, "namespaceSelector": {}, "topologyKey": ZONE}]
            },
        }
    }


#: group -> (replicas, extra pod spec); created in this order, each settled before the next
GROUPS: list[tuple[str, int, dict[str, Any]]] = [
    (
        "web",
        6,
        {
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", HOST)]}
            }
        },
    ),
    (
        "cache",
        14,
        {
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("cache", HOST)]}
            }
        },
    ),
    (
        "spread",
        9,
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                }
            ]
        },
    ),
    (
        "near-web",
        3,
        {
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", ZONE)]}
            }
        },
    ),
    (
        "one-per-zone",
        4,
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term("one-per-zone", ZONE)]
                }
            }
        },
    ),
    (
        "orphan",
        2,
        {
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("nobody", ZONE)]}
            }
        },
    ),
    (
        "self-affine",
        3,
        {
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("self-affine", ZONE)]}
            }
        },
    ),
    ("zone-a", 3, {"nodeSelector": {ZONE: "a"}}),
    (
        "infra",
        2,
        {
            "nodeSelector": {HOST: "c-3"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
            ],
        },
    ),
]


GROUPS += [(f"job-{j}", 2, jobset_exclusive(f"job-{j}")) for j in "abcd"]

#: placed pods per group once settled: what kube-scheduler of the same release does (asserted)
EXPECTED = {
    # JobSet exclusive placement: one job per zone; three zones, so the fourth job waits
    "job-a": 2,
    "job-b": 2,
    "job-c": 2,
    "job-d": 0,
    "web": 6,
    "cache": 11,
    "spread": 9,
    "near-web": 3,
    "one-per-zone": 3,
    "orphan": 0,
    "self-affine": 3,
    "zone-a": 3,
    "infra": 2,
}


async def settle(api: client.ApiClient, namespace: str, group: str, names: list[str]) -> dict[str, int]:
    """Wait until the group has its expected number of pods bound and every other one has a
    FailedScheduling event (so a pod still being retried cannot let the next group start early);
    on a timeout the error shows how far it got."""
    core: Any = client.CoreV1Api(api)
    ev: Any = client.EventsV1Api(api)

    async def done() -> dict[str, int] | None:
        failed = {
            e["regarding"]["name"]
            for e in await list_all(ev.list_namespaced_event, namespace)
            if e.get("reason") == "FailedScheduling"
        }
        bound = {
            p["metadata"]["name"]
            for p in await list_all(core.list_namespaced_pod, namespace)
            if p["spec"].get("nodeName")
        }
        placed = sum(1 for n in names if n in bound)
        refused_all = all(n in bound or n in failed for n in names)
        return {group: placed} if placed == EXPECTED[group] and refused_all else None

    result: dict[str, int] = await wait_for(
        done, 60, what=f"{group}: {EXPECTED[group]} of {len(names)} placed"
    )
    return result


async def run_groups(
    api: client.ApiClient, namespace: str, scheduler: str
) -> tuple[dict[str, int], list[str]]:
    """Create the groups one after the other; returns placed pods per group and the violations."""
    core: Any = client.CoreV1Api(api)
    for group, replicas, extra in GROUPS:
        pods = []
        for i in range(replicas):
            obj = make_pod(
                f"{group}-{i}",
                namespace=namespace,
                cpu="100m",
                scheduler_name=scheduler,
                labels={"app": group, **({JOB_KEY: group} if group.startswith("job-") else {})},
            )
            obj["spec"].update(extra)
            pods.append(obj)
        await create_many(api, pods)
        await settle(api, namespace, group, [p["metadata"]["name"] for p in pods])
    nodes = {n["metadata"]["name"]: NodeSpec.from_dict(n) for n in await list_all(core.list_node)}
    pods_now = [PodInfo.from_dict(p) for p in await list_all(core.list_namespaced_pod, namespace)]
    placed = {g: sum(1 for p in pods_now if p.bound and p.labels.get("app") == g) for g, _, _ in GROUPS}
    return placed, constraint_violations(nodes, pods_now)


async def test_same_constraints_same_pending_as_kube_scheduler(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    await create_many(api, fleet())
    namespaces = [f"diff-kube-{uuid.uuid4().hex[:6]}", f"diff-shoal-{uuid.uuid4().hex[:6]}"]
    for ns in namespaces:
        await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube_placed, kube_violations = await run_groups(api, namespaces[0], "default-scheduler")
    await core.delete_collection_namespaced_pod(namespaces[0], grace_period_seconds=0)

    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    shoal_placed, shoal_violations = await run_groups(api, namespaces[1], sched)

    assert kube_violations == []
    assert shoal_violations == []
    assert kube_placed == EXPECTED, "the workload itself changed: kube-scheduler is the reference"
    assert shoal_placed == kube_placed
