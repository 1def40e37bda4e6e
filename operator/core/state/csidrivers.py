"""CSIDrivers (``storage.k8s.io/v1``) as NodeVolumeLimits reads them.

Why: with VolumeLimitScaling (beta and on in kube-scheduler 1.37) a driver that sets
``spec.preventPodSchedulingIfMissing: true`` keeps pods using its volumes off nodes whose CSINode
does not list it (the driver is not installed there). Only the name and that flag are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CSIDriverInfo:
    name: str
    #: ``spec.preventPodSchedulingIfMissing`` (absent or anything but ``true``: False, as upstream)
    prevent_scheduling_if_missing: bool = False

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> CSIDriverInfo:
        meta = obj.get("metadata")
        spec = obj.get("spec")
        flag = spec.get("preventPodSchedulingIfMissing") if isinstance(spec, Mapping) else None
        return cls(
            name=str((meta.get("name") if isinstance(meta, Mapping) else None) or ""),
            prevent_scheduling_if_missing=flag is True,
        )
