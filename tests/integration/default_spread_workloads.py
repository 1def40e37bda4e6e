"""The workloads of the default-spreading differential test (test_default_spread.py), shared with
the unit test that proves each has one outcome whatever ties kube-scheduler breaks at random
(tests/unit/plugins/test_podtopologyspread_defaults.py).

Objects as their controllers write them: a Deployment's ReplicaSet and its pods (owner reference,
``pod-template-hash``), a StatefulSet with its headless Service and ordinal pods, pods selected by a
Service alone, a ReplicationController's pods. Nodes: two in zone a, two in zone b, one without a
zone label (``SCENARIO_NODES``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from shoal.testing.objects import make_node, make_pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
#: (name, zone): a node without a zone label is still scored on its hostname under the system
#: defaults, and never on a zone: it takes the most pods (as kube-scheduler places them)
SCENARIO_NODES: tuple[tuple[str, str | None], ...] = (
    ("a0", "a"),
    ("a1", "a"),
    ("b0", "b"),
    ("b1", "b"),
    ("x0", None),
)


def scenario_nodes(prefix: str = "") -> list[dict[str, Any]]:
    return [
        make_node(
            f"{prefix}{name}", cpu="64", labels={HOST: f"{prefix}{name}", **({ZONE: zone} if zone else {})}
        )
        for name, zone in SCENARIO_NODES
    ]


@dataclass(frozen=True)
class Workload:
    name: str
    #: Deployment, StatefulSet, Service, ReplicationController
    kind: str
    replicas: int
    #: final pods per node, in SCENARIO_NODES order (pre-bound ones included)
    expected: tuple[int, ...]
    #: pods bound before the scheduler sees the others: node name -> count
    prebound: dict[str, int] = field(default_factory=dict)


WORKLOADS: tuple[Workload, ...] = (
    Workload("web", "Deployment", 7, expected=(2, 1, 1, 1, 4), prebound={"a0": 2}),
    Workload("db", "StatefulSet", 8, expected=(1, 1, 1, 1, 4)),
    Workload("api", "Service", 8, expected=(1, 1, 1, 1, 4)),
    Workload("legacy", "ReplicationController", 2, expected=(0, 0, 0, 0, 2)),
)


#: made by kube-controller-manager's deployment, replicaset and statefulset controllers from a
#: Deployment and a StatefulSet (``podManagementPolicy: Parallel``: without kubelets no pod ever
#: becomes Ready, which OrderedReady would wait for); their pods arrive in a burst
CONTROLLER_WORKLOADS: tuple[Workload, ...] = (
    Workload("web", "Deployment", 8, expected=(1, 1, 1, 1, 4)),
    Workload("db", "StatefulSet", 8, expected=(1, 1, 1, 1, 4)),
)


def controller_objects(w: Workload, namespace: str, scheduler: str) -> list[dict[str, Any]]:
    """The Deployment, or the StatefulSet and its headless Service, whose controllers make the pods."""
    labels = {"app": w.name}
    tpl = template(labels)
    tpl["spec"]["schedulerName"] = scheduler
    tpl["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    spec: dict[str, Any] = {"replicas": w.replicas, "selector": {"matchLabels": labels}, "template": tpl}
    if w.kind == "Deployment":
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta(w.name, namespace, labels),
                "spec": spec,
            }
        ]
    service = owner_objects(w, namespace)[0]
    spec.update(serviceName=w.name, podManagementPolicy="Parallel")
    return [
        service,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _meta(w.name, namespace, labels),
            "spec": spec,
        },
    ]


def _meta(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def owner_objects(w: Workload, namespace: str) -> list[dict[str, Any]]:
    """The objects that select the workload's pods."""
    labels = pod_labels(w, 0)
    if w.kind == "Deployment":
        match = {"app": w.name, "pod-template-hash": labels["pod-template-hash"]}
        spec = {"replicas": w.replicas, "selector": {"matchLabels": match}, "template": template(match)}
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": _meta(rs_name(w), namespace, match),
                "spec": spec,
            }
        ]
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(w.name, namespace, {"app": w.name}),
        "spec": {"selector": {"app": w.name}, "ports": [{"name": "main", "port": 8080}]},
    }
    if w.kind == "Service":
        return [service]
    if w.kind == "StatefulSet":
        service["spec"]["clusterIP"] = "None"  # headless, as a StatefulSet's serviceName wants
        spec = {
            "replicas": w.replicas,
            "serviceName": w.name,
            "selector": {"matchLabels": {"app": w.name}},
            "template": template({"app": w.name}),
        }
        ss = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _meta(w.name, namespace, {"app": w.name}),
            "spec": spec,
        }
        return [service, ss]
    spec = {"replicas": w.replicas, "selector": {"app": w.name}, "template": template({"app": w.name})}
    return [
        {
            "apiVersion": "v1",
            "kind": "ReplicationController",
            "metadata": _meta(w.name, namespace, {"app": w.name}),
            "spec": spec,
        }
    ]


def template(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }


def rs_name(w: Workload) -> str:
    return f"{w.name}-5d8f7c9b6d"


def pod_labels(w: Workload, i: int) -> dict[str, str]:
    if w.kind == "Deployment":
        return {"app": w.name, "pod-template-hash": "5d8f7c9b6d"}
    if w.kind == "StatefulSet":
        return {
            "app": w.name,
            "apps.kubernetes.io/pod-index": str(i),
            "controller-revision-hash": f"{w.name}-7c9d5f",
            "statefulset.kubernetes.io/pod-name": f"{w.name}-{i}",
        }
    return {"app": w.name}


def pod_name(w: Workload, i: int) -> str:
    if w.kind == "StatefulSet":
        return f"{w.name}-{i}"
    return f"{rs_name(w) if w.kind == 'Deployment' else w.name}-{i:05d}"


def pods(
    w: Workload, namespace: str, scheduler: str, owner_uids: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The workload's pods, pre-bound ones first (``spec.nodeName`` set), in creation order."""
    owner_uids = owner_uids or {}
    controller = {
        "Deployment": ("apps/v1", "ReplicaSet", rs_name(w)),
        "StatefulSet": ("apps/v1", "StatefulSet", w.name),
        "ReplicationController": ("v1", "ReplicationController", w.name),
    }.get(w.kind)
    bound_to = [node for node, n in w.prebound.items() for _ in range(n)]
    out = []
    for i in range(len(bound_to) + w.replicas):
        obj = make_pod(
            pod_name(w, i),
            namespace=namespace,
            cpu="100m",
            scheduler_name=scheduler,
            labels=pod_labels(w, i),
            node_name=bound_to[i] if i < len(bound_to) else None,
        )
        if controller is not None:
            api, kind, name = controller
            uid = owner_uids.get(f"{kind}/{name}") or str(
                uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{kind}/{name}")
            )
            obj["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": api,
                    "kind": kind,
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        if w.kind == "StatefulSet":
            obj["spec"]["hostname"], obj["spec"]["subdomain"] = pod_name(w, i), w.name
        out.append(obj)
    return out


def scenario_objects(
    w: Workload, namespace: str, scheduler: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(owner objects, pods) of one workload."""
    return owner_objects(w, namespace), pods(w, namespace, scheduler)
