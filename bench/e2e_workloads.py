"""The nodes and pods of the throughput scenarios: scheduler_perf's templates (bench/e2e.py)."""

from __future__ import annotations

import json
from typing import Any

from shoal.testing.objects import make_node, make_pod


def scheduler_perf_node(name: str) -> dict[str, Any]:
    """scheduler_perf's node-default: 4 cpu, 32Gi, 110 pods."""
    return make_node(name, cpu="4", memory="32Gi", pods=110, gfd_labels=False)


ZONE = "topology.kubernetes.io/zone"
#: scheduler_perf's workloads with inter-pod constraints (its pod-with-pod-anti-affinity,
#: pod-with-pod-affinity and pod-with-topology-spreading templates): name -> extra pod spec, labels
CONSTRAINED: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "antiaffinity": (
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"color": "green"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
        },
        {"color": "green", "name": "test"},
    ),
    "affinity": (
        {
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"foo": ""}}, "topologyKey": ZONE}
                    ]
                }
            }
        },
        {"foo": ""},
    ),
    "spread": (
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 5,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"foo": ""}},
                }
            ]
        },
        {"foo": ""},
    ),
}


def workload_node(workload: str, i: int) -> dict[str, Any]:
    node = scheduler_perf_node(f"node-{i:05d}")
    if workload == "affinity":  # scheduler_perf: every node in one zone
        node["metadata"]["labels"][ZONE] = "zone1"
    elif workload in CONSTRAINED:
        node["metadata"]["labels"][ZONE] = f"zone{i % 3}"
    return node


def workload_pod(workload: str, i: int, scheduler_name: str, namespace: str) -> dict[str, Any]:
    extra, labels = CONSTRAINED.get(workload, ({}, {}))
    pod = make_pod(
        f"pod-{i:06d}",
        namespace=namespace,
        cpu="100m",
        memory="500Mi",
        scheduler_name=scheduler_name,
        labels=labels,
    )
    pod["spec"].update(json.loads(json.dumps(extra)))
    return pod
