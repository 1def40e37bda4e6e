"""Realistic Node, Pod and PodGroup manifests for tests, the demo, simulation and benchmarks.

Why: with no kubelet, a Node is only what its manifest says. These builders give nodes what a
kubelet and NVIDIA's GPU Feature Discovery would report (capacity, allocatable, a Ready condition,
``nvidia.com/gpu``, GFD labels, zone and rack), so every consumer creates the same shapes.
Everything returns plain dicts, usable with kubernetes-asyncio, YAML dumps and the in-memory cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSON = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_LABEL = "gpu-memory-free-gb"
GPU_MEMORY_ANNOTATION = "shoal.dev/gpu-memory-gb"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.shoal.dev/rack"
#: what a 1.37 kubelet with default feature gates declares (``status.declaredFeatures``, sorted):
#: the features of k8s.io/component-helpers' registry whose gates are on by default
KUBELET_1_37_DECLARED_FEATURES = (
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
)


def make_node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int = 110,
    gpus: int = 0,
    gpu_memory_free_gb: float | str | None = None,
    gpu_memory_mib: int | None = None,
    gpu_product: str = "NVIDIA-A100-SXM4-80GB",
    gfd_labels: bool = True,
    zone: str | None = None,
    rack: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    extra_resources: Mapping[str, str] | None = None,
    declared_features: Sequence[str] = (),
) -> JSON:
    """A Node as a kubelet (and GFD, when ``gpus`` > 0) would register it; ``declared_features``
    go to ``status.declaredFeatures`` sorted, as the kubelet writes them (none: the field is left
    out, as a kubelet before 1.36 leaves it: its gate was off by default)."""
    node_labels: dict[str, str] = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if zone is not None:
        node_labels[ZONE_LABEL] = zone
    if rack is not None:
        node_labels[RACK_LABEL] = rack
    resources: dict[str, str] = {
        "cpu": cpu,
        "memory": memory,
        "pods": str(pods),
        "ephemeral-storage": "500Gi",
    }
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
        if gfd_labels:
            per_gpu = gpu_memory_mib if gpu_memory_mib is not None else 81920
            node_labels["nvidia.com/gpu.count"] = str(gpus)
            node_labels["nvidia.com/gpu.memory"] = str(per_gpu)
            node_labels["nvidia.com/gpu.product"] = gpu_product
    if gpu_memory_free_gb is not None:
        node_labels[GPU_MEMORY_LABEL] = str(gpu_memory_free_gb)
    if extra_resources:
        resources.update(extra_resources)
    if labels:
        node_labels.update(labels)
    spec: JSON = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "simulated node",
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.37.2", "operatingSystem": "linux", "architecture": "amd64"},
            **({"declaredFeatures": sorted(set(declared_features))} if declared_features else {}),
        },
    }


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    gpus: int = 0,
    gpu_memory_gb: float | str | None = None,
    scheduler_name: str = "gpu-scheduler",
    priority: int | None = None,
    priority_class: str | None = None,
    pod_group: str | None = None,
    scheduling_group: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    affinity: JSON | None = None,
    host_ports: Sequence[int] = (),
    extra_requests: Mapping[str, str] | None = None,
    image: str = "registry.k8s.io/pause:3.10",
) -> JSON:
    """A pending Pod with one container (or bound, when ``node_name`` is given). ``pod_group``
    joins a scheduler-plugins PodGroup (the label), ``scheduling_group`` a native one
    (``spec.schedulingGroup.podGroupName``)."""
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
        limits[GPU_RESOURCE] = str(gpus)  # extended resources need limit == request
    if extra_requests:
        requests.update(extra_requests)
        limits.update({k: v for k, v in extra_requests.items() if "/" in k})
    pod_labels = dict(labels or {})
    if pod_group is not None:
        pod_labels[POD_GROUP_LABEL] = pod_group
    pod_annotations = dict(annotations or {})
    if gpu_memory_gb is not None:
        pod_annotations[GPU_MEMORY_ANNOTATION] = str(gpu_memory_gb)
    container: JSON = {"name": "main", "image": image, "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    spec: JSON = {"schedulerName": scheduler_name, "containers": [container]}
    if priority is not None:  # what admission resolves; on a real API server use priority_class
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if node_name is not None:
        spec["nodeName"] = node_name
    if scheduling_group is not None:
        spec["schedulingGroup"] = {"podGroupName": scheduling_group}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = affinity
    metadata: JSON = {"name": name, "namespace": namespace}
    if pod_labels:
        metadata["labels"] = pod_labels
    if pod_annotations:
        metadata["annotations"] = pod_annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def make_pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_member: int,
    schedule_timeout_seconds: int | None = None,
    min_resources: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> JSON:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1)."""
    spec: JSON = {"minMember": min_member}
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    if min_resources:
        spec["minResources"] = dict(min_resources)
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "spec": spec,
    }


NATIVE_SCHEDULING_API = "scheduling.k8s.io/v1beta1"


def native_policy(min_count: int | None) -> JSON:
    """``schedulingPolicy``: ``gang`` with ``minCount``, or ``basic`` when ``min_count`` is None."""
    return {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}


def make_workload(
    name: str,
    *,
    namespace: str = "default",
    templates: Mapping[str, int | None],
    topology_key: str | None = None,
) -> JSON:
    """A native Workload (scheduling.k8s.io/v1beta1): template name -> gang minCount (None: basic)."""
    constraints = {"topology": [{"key": topology_key}]} if topology_key else None
    return {
        "apiVersion": NATIVE_SCHEDULING_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podGroupTemplates": [
                {"name": t, "schedulingPolicy": native_policy(n), "schedulingConstraints": constraints}
                for t, n in templates.items()
            ]
        },
    }


def make_native_pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_count: int | None,
    workload: tuple[str, str] | None = None,
    topology_key: str | None = None,
    parent: str | None = None,
) -> JSON:
    """A native PodGroup (scheduling.k8s.io/v1beta1), as a workload controller creates one from
    ``workload`` = (Workload name, template name): ``gang.minCount``, or ``basic`` when None;
    ``parent``: the CompositePodGroup it belongs to (1.38)."""
    spec: JSON = {"schedulingPolicy": native_policy(min_count)}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if workload is not None:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {
        "apiVersion": NATIVE_SCHEDULING_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def make_composite_pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_groups: int | None,
    workload: tuple[str, str] | None = None,
    topology_key: str | None = None,
    parent: str | None = None,
) -> JSON:
    """A CompositePodGroup (1.38, scheduling.k8s.io/v1beta1), as JobSet or LWS would create one
    from a Workload's ``compositePodGroupTemplates``: ``gang.minGroupCount``, or ``basic`` when None."""
    policy: JSON = {"basic": {}} if min_groups is None else {"gang": {"minGroupCount": min_groups}}
    spec: JSON = {"schedulingPolicy": policy}
    if workload is not None:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {
        "apiVersion": NATIVE_SCHEDULING_API,
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


VOLCANO_SCHEDULING_API = "scheduling.volcano.sh/v1beta1"
#: the annotation Volcano's controllers put on member pods (its value: the PodGroup's name)
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def make_volcano_pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_member: int,
    min_resources: Mapping[str, str] | None = None,
    queue: str | None = None,
    priority_class: str | None = None,
    owner: Mapping[str, Any] | None = None,
    extra_spec: Mapping[str, Any] | None = None,
) -> JSON:
    """A Volcano PodGroup (scheduling.volcano.sh/v1beta1) as Volcano's controllers create one:
    ``minMember``, ``minResources`` (the members' requests), ``queue``, ``priorityClassName``,
    an owner reference to what it groups, and ``status.phase: Pending``."""
    spec: JSON = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = dict(min_resources)
    if queue is not None:
        spec["queue"] = queue
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    spec.update(extra_spec or {})
    metadata: JSON = {"name": name, "namespace": namespace}
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": VOLCANO_SCHEDULING_API,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def make_profile(name: str, spec: Mapping[str, Any], *, scheduler_name: str | None = None) -> JSON:
    """A SchedulingProfile object named ``name`` (schedulerName: ``scheduler_name`` or the spec's)."""
    body = dict(spec)
    if scheduler_name is not None:
        body["schedulerName"] = scheduler_name
    return {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name},
        "spec": body,
    }


def make_priority_class(name: str, value: int, *, description: str = "") -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description or f"priority {value}",
    }


def gpu_fleet(
    count: int,
    *,
    prefix: str = "gpu-node",
    gpus: int = 8,
    zones: Sequence[str] = ("zone-a", "zone-b", "zone-c"),
    racks_per_zone: int = 4,
    gpu_memory_free_gb: float | None = None,
) -> list[JSON]:
    """``count`` identical GPU nodes spread over zones and racks."""
    nodes = []
    for i in range(count):
        zone = zones[i % len(zones)]
        rack = f"{zone}-rack-{(i // len(zones)) % racks_per_zone}"
        nodes.append(
            make_node(
                f"{prefix}-{i:04d}",
                gpus=gpus,
                zone=zone,
                rack=rack,
                gpu_memory_free_gb=gpu_memory_free_gb,
            )
        )
    return nodes
