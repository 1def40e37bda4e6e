"""Builders of DRA objects as a driver, the resourceclaim controller and kube-scheduler write them."""

from __future__ import annotations

from typing import Any

GPU = "gpu.nvidia.com"
GPU_CLASS_SELECTOR = f'device.driver == "{GPU}"'


def device_class(name: str = GPU, expression: str = GPU_CLASS_SELECTOR) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu(
    node: str, i: int, product: str = "NVIDIA A100", memory: str = "80Gi", root: str = ""
) -> dict[str, Any]:
    return {
        "name": f"gpu-{i}",
        "attributes": {
            "productName": {"string": product},
            "uuid": {"string": f"GPU-{node}-{i}"},
            "resource.kubernetes.io/pcieRoot": {"string": root or f"pci000{i // 4}"},
        },
        "capacity": {"memory": {"value": memory}},
    }


def node_slice(node: str, n: int = 8, driver: str = GPU, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu(node, i, **kw) for i in range(n)],
        },
    }


def claim(
    name: str,
    namespace: str = "default",
    count: int = 1,
    selectors: tuple[str, ...] = (),
    device_class_name: str = GPU,
    mode: str = "ExactCount",
    **extra: Any,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}], **extra}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"devices": devices},
    }


def allocated(
    obj: dict[str, Any], node: str, devices: list[str], pool: str = "", reserved: tuple[str, ...] = ()
) -> dict[str, Any]:
    out = dict(obj)
    results = [{"request": "gpu", "driver": GPU, "pool": pool or node, "device": d} for d in devices]
    selector = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }
    out["status"] = {
        "allocation": {"devices": {"results": results}, "nodeSelector": selector},
        "reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in reserved],
    }
    return out


def claim_pod(
    name: str, claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "gpu-scheduler",
            "containers": [
                {"name": "c", "image": "x", "resources": {"claims": [{"name": c["name"]} for c in claims]}}
            ],
            "resourceClaims": claims,
            **spec,
        },
        "status": {"resourceClaimStatuses": statuses or []},
    }
