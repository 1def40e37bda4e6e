"""The storage objects every volume plugin reads, and VolumeBinding's assumptions (kube-scheduler's
PV/PVC assume cache), shared by every profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.plugins.volumebinding.objects import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    PVCInfo,
    PVInfo,
    StorageClassInfo,
)


@dataclass
class VolumeStore:
    """PVs, classes, CSINodes and CSIDrivers by name, claims by ``namespace/name``."""

    #: the objects it takes (core/framework/interfaces.py: Store)
    kinds: ClassVar[tuple[type, ...]] = (
        PVInfo,
        PVCInfo,
        StorageClassInfo,
        CSINodeInfo,
        CSIDriverInfo,
        CSIStorageCapacityInfo,
    )

    pvs: dict[str, PVInfo] = field(default_factory=dict)
    pvcs: dict[str, PVCInfo] = field(default_factory=dict)
    classes: dict[str, StorageClassInfo] = field(default_factory=dict)
    csi_nodes: dict[str, CSINodeInfo] = field(default_factory=dict)
    #: VolumeBinding's assumptions, from Reserve until the binding is written and seen (or
    #: Unreserve): PV name -> the claim (``namespace/name``) it is being bound to; claim -> the node
    #: it is being provisioned for
    assumed_pvs: dict[str, str] = field(default_factory=dict)
    assumed_claims: dict[str, str] = field(default_factory=dict)
    #: CSIDrivers by name (NodeVolumeLimits: ``preventPodSchedulingIfMissing``; VolumeBinding:
    #: ``storageCapacity``)
    csi_drivers: dict[str, CSIDriverInfo] = field(default_factory=dict)
    #: CSIStorageCapacity objects by ``namespace/name`` (VolumeBinding's capacity check)
    capacities: dict[str, CSIStorageCapacityInfo] = field(default_factory=dict)

    def apply(self, obj: Any, deleted: bool = False) -> ClusterEvent | None:
        """Record (or forget, when ``deleted``) one object; the cluster event the change is."""
        if isinstance(obj, PVCInfo):
            _put(self.pvcs, obj.key, obj, deleted)
        elif isinstance(obj, PVInfo):
            _put(self.pvs, obj.name, obj, deleted)
        elif isinstance(obj, StorageClassInfo):
            _put(self.classes, obj.name, obj, deleted)
        elif isinstance(obj, CSIDriverInfo):
            _put(self.csi_drivers, obj.name, obj, deleted)
        elif isinstance(obj, CSIStorageCapacityInfo):
            _put(self.capacities, obj.key, obj, deleted)
        else:
            _put(self.csi_nodes, obj.name, obj, deleted)
        return ClusterEvent(EventKind.STORAGE_CHANGE, obj)

    def claim(self, namespace: str, name: str) -> PVCInfo | None:
        return self.pvcs.get(f"{namespace}/{name}")


def _put(where: dict[str, Any], key: str, obj: object, deleted: bool) -> None:
    if deleted:
        where.pop(key, None)
    else:
        where[key] = obj
