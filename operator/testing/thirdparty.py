"""Other projects' objects, shaped as their controllers write them: Volcano's PodGroup CRD, a
minimal KubeRay RayCluster CRD, and a RayCluster's PodGroup and pods as KubeRay creates them for
each of its two gang integrations (scheduler-plugins' and Volcano's).

Why: an integration is only proven with the objects the other controller really writes. These
shapes follow the sources named below (facts: names, labels, annotations, owner references,
arithmetic); the YAML is written here from those facts, not copied.

* Volcano's PodGroup CRD: volcano-sh/volcano ``config/crd/volcano/bases/
  scheduling.volcano.sh_podgroups.yaml`` at ed72c7c8 (2026-08-20), from volcano-sh/apis
  ``pkg/apis/scheduling/v1beta1/types.go``: version v1beta1, namespaced, short names ``pg`` and
  ``podgroup-v1beta1``, **no status subresource**, the printer columns and the fields below.
* KubeRay: ray-project/kuberay ``ray-operator/controllers/ray/batchscheduler/
  scheduler-plugins/scheduler_plugins.go`` and ``.../volcano/volcano_scheduler.go``,
  ``controllers/ray/common/pod.go`` (``labelPod``) and ``controllers/ray/utils/util.go``
  (``CalculateDesiredReplicas``, ``CalculateDesiredResources``, ``CalculateMinResources``) at
  feeaf72f (2026-08-19).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from shoal.core.state.quantity import to_int

JSON = dict[str, Any]

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _int32(minimum: int | None = 0) -> JSON:
    out: JSON = {"type": "integer", "format": "int32"}
    if minimum is not None:
        out["minimum"] = minimum
    return out


def _topology() -> JSON:
    return {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["hard", "soft"], "default": "hard"},
            "highestTierAllowed": {"type": "integer", "minimum": 0},
            "highestTierName": {"type": "string", "maxLength": 253},
        },
    }


def volcano_podgroup_crd() -> JSON:
    """Volcano's ``podgroups.scheduling.volcano.sh`` CRD (the facts listed in the module doc)."""
    quantity = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    sub_group = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 253},
            "networkTopology": _topology(),
            "subGroupSize": {**_int32(1), "default": 1},
            "minSubGroups": {**_int32(0), "default": 0},
            "labelSelector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "matchLabelKeys": {"type": "array", "items": {"type": "string"}},
        },
    }
    spec = {
        "type": "object",
        "properties": {
            "minMember": _int32(0),
            "minTaskMember": {"type": "object", "additionalProperties": _int32(None)},
            "queue": {"type": "string", "default": "default", "maxLength": 253, "pattern": DNS_SUBDOMAIN},
            "priorityClassName": {"type": "string", "maxLength": 253},
            "minResources": {"type": "object", "additionalProperties": quantity},
            "networkTopology": _topology(),
            "subGroupPolicy": {"type": "array", "items": sub_group},
        },
    }
    condition = {
        "type": "object",
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "transitionID": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "message": {"type": "string"},
        },
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {"type": "string", "enum": ["Pending", "Running", "Unknown", "Inqueue", "Completed"]},
            "conditions": {"type": "array", "items": condition},
            "running": _int32(0),
            "succeeded": _int32(0),
            "failed": _int32(0),
        },
    }
    columns: list[JSON] = [
        {"name": "STATUS", "type": "string", "jsonPath": ".status.phase"},
        {"name": "minMember", "type": "integer", "jsonPath": ".spec.minMember"},
        {"name": "RUNNINGS", "type": "integer", "jsonPath": ".status.running"},
        {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "QUEUE", "type": "string", "priority": 1, "jsonPath": ".spec.queue"},
    ]
    return _crd(
        "scheduling.volcano.sh",
        "v1beta1",
        {
            "kind": "PodGroup",
            "listKind": "PodGroupList",
            "plural": "podgroups",
            "singular": "podgroup",
            "shortNames": ["pg", "podgroup-v1beta1"],
        },
        {"type": "object", "properties": {"spec": spec, "status": status}},
        columns=columns,
        subresources={},  # Volcano's has none: status is part of the object
    )


def ray_cluster_crd() -> JSON:
    """A minimal ``rayclusters.ray.io`` CRD: the names, and spec/status kept whole."""
    whole = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return _crd(
        "ray.io",
        "v1",
        {
            "kind": "RayCluster",
            "listKind": "RayClusterList",
            "plural": "rayclusters",
            "singular": "raycluster",
        },
        {"type": "object", "properties": {"spec": whole, "status": whole}},
        subresources={"status": {}},
    )


def _crd(
    group: str,
    version: str,
    names: JSON,
    schema: JSON,
    *,
    columns: list[JSON] | None = None,
    subresources: JSON | None = None,
) -> JSON:
    served: JSON = {"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if columns:
        served["additionalPrinterColumns"] = columns
    if subresources:
        served["subresources"] = subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{group}"},
        "spec": {"group": group, "names": names, "scope": "Namespaced", "versions": [served]},
    }


# -- KubeRay ----------------------------------------------------------------------------------------
SCHEDULER_PLUGINS, VOLCANO = "scheduler-plugins", "volcano"
#: the schedulerName KubeRay sets on every Ray pod, per integration
RAY_SCHEDULER_NAMES = {SCHEDULER_PLUGINS: "scheduler-plugins-scheduler", VOLCANO: "volcano"}
GANG_LABEL = "ray.io/gang-scheduling-enabled"
VOLCANO_QUEUE_LABEL = "volcano.sh/queue-name"
RAY_PRIORITY_CLASS_LABEL = "ray.io/priority-class-name"


def _replicas(group: Mapping[str, Any], *, desired: bool) -> int:
    """A worker group's pods: ``replicas`` within [minReplicas, maxReplicas] (``desired``) or
    ``minReplicas``, times ``numOfHosts``; a suspended group has none."""
    if group.get("suspend"):
        return 0
    low, high = int(group.get("minReplicas") or 0), group.get("maxReplicas")
    replicas = group.get("replicas")
    count = low if not desired else (low if replicas is None or replicas < low else int(replicas))
    if desired and high is not None:
        count = min(count, int(high))
    return count * int(group.get("numOfHosts") or 1)


def _pod_resources(template: Mapping[str, Any]) -> dict[str, int]:
    """KubeRay's ``CalculatePodResource``: containers' requests, limits where a request is absent."""
    out: dict[str, int] = {}
    for c in (template.get("spec") or {}).get("containers") or ():
        resources = c.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            out[name] = out.get(name, 0) + to_int(name, value)
    return out


def _quantities(total: Mapping[str, int]) -> dict[str, str]:
    return {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in sorted(total.items())}


def ray_min_resources(cluster: Mapping[str, Any], *, desired: bool) -> dict[str, str]:
    """The head's resources plus each worker group's times its pods: ``replicas`` as written
    (``desired``: scheduler-plugins' ``CalculateDesiredResources``) or ``minReplicas`` (Volcano's
    ``CalculateMinResources``), times ``numOfHosts``; suspended groups count nothing."""
    spec = cluster["spec"]
    total = dict(_pod_resources(spec["headGroupSpec"]["template"]))
    for group in spec.get("workerGroupSpecs") or ():
        if group.get("suspend"):
            continue
        count = int(group.get("replicas" if desired else "minReplicas") or 0)
        count *= int(group.get("numOfHosts") or 1)
        for name, value in _pod_resources(group["template"]).items():
            total[name] = total.get(name, 0) + value * count
    return _quantities(total)


def ray_pod_group(cluster: Mapping[str, Any], integration: str) -> JSON:
    """The PodGroup KubeRay creates for ``cluster`` (its uid must be set: the owner reference)."""
    meta = cluster["metadata"]
    workers = cluster["spec"].get("workerGroupSpecs") or ()
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": meta["name"], "uid": meta["uid"]}
    if integration == SCHEDULER_PLUGINS:  # named as the cluster; an owner reference without controller
        return {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "ownerReferences": [owner]},
            "spec": {
                "minMember": 1 + sum(_replicas(g, desired=True) for g in workers),
                "minResources": ray_min_resources(cluster, desired=True),
            },
        }
    labels = meta.get("labels") or {}
    spec: JSON = {
        "minMember": 1 + sum(_replicas(g, desired=False) for g in workers),
        "minResources": ray_min_resources(cluster, desired=False),
    }
    if VOLCANO_QUEUE_LABEL in labels:
        spec["queue"] = labels[VOLCANO_QUEUE_LABEL]
    if RAY_PRIORITY_CLASS_LABEL in labels:
        spec["priorityClassName"] = labels[RAY_PRIORITY_CLASS_LABEL]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": f"ray-{meta['name']}-pg",
            "namespace": meta["namespace"],
            "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def ray_pods(cluster: Mapping[str, Any], integration: str) -> list[JSON]:
    """The head and worker pods KubeRay creates for ``cluster`` (desired replicas of each group),
    with the metadata its ``integration`` adds: scheduler-plugins' pod-group label (when the
    cluster has ``ray.io/gang-scheduling-enabled``) or Volcano's group-name and task-spec
    annotations and queue label; and the integration's schedulerName."""
    meta = cluster["metadata"]
    name, labels = meta["name"], meta.get("labels") or {}
    spec = cluster["spec"]
    groups = [("head", "headgroup", spec["headGroupSpec"]["template"], 1)]
    for g in spec.get("workerGroupSpecs") or ():
        groups.append(("worker", g["groupName"], g["template"], _replicas(g, desired=True)))
    owner = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": name,
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pods = []
    for node_type, group, template, count in groups:
        for _ in range(count):
            pod_labels = {
                **(template.get("metadata") or {}).get("labels", {}),
                "ray.io/is-ray-node": "yes",
                "ray.io/cluster": name,
                "ray.io/node-type": node_type,
                "ray.io/group": group,
                "ray.io/identifier": f"{name}-{node_type}",
                "app.kubernetes.io/name": "kuberay",
                "app.kubernetes.io/created-by": "kuberay-operator",
            }
            annotations = {
                **(template.get("metadata") or {}).get("annotations", {}),
                "ray.io/ft-enabled": "false",
            }
            if integration == SCHEDULER_PLUGINS and GANG_LABEL in labels:
                pod_labels["scheduling.x-k8s.io/pod-group"] = name
            if integration == VOLCANO:
                for key in (VOLCANO_QUEUE_LABEL, RAY_PRIORITY_CLASS_LABEL):
                    if labels.get(key):
                        pod_labels[key] = labels[key]
                annotations["scheduling.k8s.io/group-name"] = f"ray-{name}-pg"
                annotations["volcano.sh/task-spec"] = group
            prefix = f"{name}-head-" if node_type == "head" else f"{name}-{group}-worker-"
            pod_spec = copy.deepcopy(template.get("spec") or {})
            pod_spec["schedulerName"] = RAY_SCHEDULER_NAMES[integration]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": prefix,
                        "namespace": meta["namespace"],
                        "labels": pod_labels,
                        "annotations": annotations,
                        "ownerReferences": [dict(owner)],
                    },
                    "spec": pod_spec,
                }
            )
    return pods


# -- Volcano Jobs -------------------------------------------------------------------------------------
# From volcano-sh/volcano pkg/controllers/job (job_controller_actions.go: createOrUpdatePodGroup,
# calcPGMinResources; job_controller_util.go: createJobPod) at ed72c7c8, for a Job with the
# defaults Volcano's admission webhook fills in (minAvailable = every replica, each task's
# minAvailable = its replicas, queue "default").
VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"


def volcano_job_crd() -> JSON:
    """A minimal ``jobs.batch.volcano.sh`` CRD: the names, and spec/status kept whole."""
    whole = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    names = {
        "kind": "Job",
        "listKind": "JobList",
        "plural": "jobs",
        "singular": "job",
        "shortNames": ["vcjob"],
    }
    return _crd(
        "batch.volcano.sh",
        "v1alpha1",
        names,
        {"type": "object", "properties": {"spec": whole, "status": whole}},
        subresources={"status": {}},
    )


def _job_owner(job: Mapping[str, Any]) -> JSON:
    meta = job["metadata"]
    return {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def volcano_job_pod_group(job: Mapping[str, Any]) -> JSON:
    """The PodGroup Volcano's job controller creates for ``job`` (its uid must be set):
    ``<job>-<uid>``, owned by it, ``minMember`` = ``minAvailable``, ``minTaskMember`` per task."""
    meta, spec = job["metadata"], job["spec"]
    tasks = spec["tasks"]
    total: dict[str, int] = {}
    for task in tasks:
        for name, value in _pod_resources(task["template"]).items():
            total[name] = total.get(name, 0) + value * int(task["replicas"])
    group_spec: JSON = {
        "minMember": int(spec.get("minAvailable") or sum(int(t["replicas"]) for t in tasks)),
        "minTaskMember": {t["name"]: int(t.get("minAvailable") or t["replicas"]) for t in tasks},
        "queue": spec.get("queue") or "default",
        "minResources": _quantities(total),
    }
    if spec.get("priorityClassName"):
        group_spec["priorityClassName"] = spec["priorityClassName"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": f"{meta['name']}-{meta['uid']}",
            "namespace": meta["namespace"],
            "annotations": dict(meta.get("annotations") or {}),
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [_job_owner(job)],
        },
        "spec": group_spec,
    }


def volcano_job_pods(job: Mapping[str, Any]) -> list[JSON]:
    """The pods Volcano's job controller creates for ``job`` once its PodGroup is admitted."""
    meta, spec = job["metadata"], job["spec"]
    name, queue = meta["name"], spec.get("queue") or "default"
    pods = []
    for task in spec["tasks"]:
        template = task["template"]
        for index in range(int(task["replicas"])):
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels.update(
                {
                    "volcano.sh/task-index": str(index),
                    "volcano.sh/job-name": name,
                    "volcano.sh/task-spec": task["name"],
                    "volcano.sh/job-namespace": meta["namespace"],
                    "volcano.sh/queue-name": queue,
                }
            )
            annotations = dict((template.get("metadata") or {}).get("annotations") or {})
            annotations.update(
                {
                    "volcano.sh/task-index": str(index),
                    "volcano.sh/task-spec": task["name"],
                    "scheduling.k8s.io/group-name": f"{name}-{meta['uid']}",
                    "volcano.sh/job-name": name,
                    "volcano.sh/queue-name": queue,
                    "volcano.sh/job-version": "0",
                    "volcano.sh/template-uid": f"{name}-{task['name']}",
                    "volcano.sh/job-retry-count": "0",
                }
            )
            pod_spec = copy.deepcopy(template.get("spec") or {})
            pod_spec.setdefault("schedulerName", spec.get("schedulerName") or "volcano")
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{task['name']}-{index}",
                        "namespace": meta["namespace"],
                        "labels": labels,
                        "annotations": annotations,
                        "ownerReferences": [_job_owner(job)],
                    },
                    "spec": pod_spec,
                }
            )
    return pods
