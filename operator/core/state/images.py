"""Container image names as the kubelet reports them on nodes and as pods ask for them (ImageLocality)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JSON = Mapping[str, Any]


def node_images(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for image in items or ():
        if not isinstance(image, Mapping):
            continue
        size = image.get("sizeBytes")
        for name in image.get("names") or ():
            out.setdefault(str(name), int(size) if isinstance(size, int) else 0)
    return out


def normalized_image(name: str) -> str:
    """As kube-scheduler: a reference without a tag (after the last ``/``) gets ``:latest``."""
    return name if name.rfind(":") > name.rfind("/") else f"{name}:latest"


def pod_images(spec: JSON) -> tuple[str, ...]:
    """Images a pod pulls (init containers, containers, image volumes), normalised, in that order."""
    names = [
        str(c.get("image") or "") for key in ("initContainers", "containers") for c in spec.get(key) or ()
    ]
    names += [
        str((v.get("image") or {}).get("reference") or "")
        for v in spec.get("volumes") or ()
        if v.get("image")
    ]
    return tuple(normalized_image(n) for n in names)
