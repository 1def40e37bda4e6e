"""The kinds shoal watches, declared once for the operator, ``shoal explain`` and the benchmarks.

Order matters where a list of kinds is primed: profiles first (a pod is only queued when its
schedulerName has one), then CompositePodGroups and PodGroups (of the three APIs), namespaces,
nodes, the storage kinds and the DRA kinds (a pod's claims must be known before it is tried),
the selectors of default topology spreading (before the pods they spread), and pods last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shoal.core.state.disruption import PDBInfo
from shoal.core.state.hierarchy import CompositeGroupInfo, composite_pod_group
from shoal.core.state.objects import NodeSpec, PodGroupInfo, PodInfo, parse_time
from shoal.core.state.spreadselectors import (
    REPLICA_SET,
    REPLICATION_CONTROLLER,
    SERVICE,
    STATEFUL_SET,
    SelectorOwner,
)
from shoal.core.state.volcano import volcano_pod_group
from shoal.core.state.workloads import native_pod_group
from shoal.kube.informer import Kind
from shoal.kube.wire import (
    COMPOSITE_PODGROUPS,
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    LIVE_PODS_SELECTOR,
    NAMESPACES,
    NATIVE_PODGROUPS,
    NODES,
    PDBS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODGROUPS,
    PODS,
    PROFILES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    VOLCANO_PODGROUPS,
    VOLUME_ATTACHMENTS,
    name_of,
    namespaced_key,
    pod_uid,
)
from shoal.plugins.dynamicresources.objects import (
    DeviceClassInfo,
    DeviceTaintRuleInfo,
    ResourceClaimInfo,
    ResourceSliceInfo,
)
from shoal.plugins.nodevolumelimits.attachments import VolumeAttachmentInfo
from shoal.plugins.volumebinding.objects import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    PVCInfo,
    PVInfo,
    StorageClassInfo,
)


@dataclass
class ProfileObject:
    """A SchedulingProfile as the operator keeps it: who claims which schedulerName, since when."""

    name: str
    created: float
    generation: int
    scheduler_name: str
    spec: dict[str, Any]
    status: dict[str, Any]
    #: more schedulerNames it claims (``spec.aliases``), each owned like ``scheduler_name``
    aliases: tuple[str, ...] = ()

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """Every schedulerName it claims, its own first."""
        return (self.scheduler_name, *(a for a in self.aliases if a != self.scheduler_name))

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ProfileObject:
        meta = obj.get("metadata") or {}
        spec = dict(obj.get("spec") or {})
        return cls(
            name=str(meta.get("name") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            generation=int(meta.get("generation") or 0),
            scheduler_name=str(spec.get("schedulerName") or ""),
            spec=spec,
            status=dict(obj.get("status") or {}),
            aliases=tuple(str(a) for a in spec.get("aliases") or () if isinstance(a, str) and a),
        )


KIND_PROFILES: Kind[ProfileObject] = Kind(PROFILES, ProfileObject.from_dict, optional=True)
KIND_PODGROUPS: Kind[PodGroupInfo] = Kind(PODGROUPS, PodGroupInfo.from_dict, optional=True)
#: Kubernetes' native PodGroups: optional, a cluster before 1.37 (or with the gates off) has none
KIND_NATIVE_PODGROUPS: Kind[PodGroupInfo] = Kind(
    NATIVE_PODGROUPS, native_pod_group, optional=True, alias="podgroups.scheduling.k8s.io"
)
#: Volcano's PodGroups: optional, only where Volcano's CRD is installed
KIND_VOLCANO_PODGROUPS: Kind[PodGroupInfo] = Kind(
    VOLCANO_PODGROUPS, volcano_pod_group, optional=True, alias="podgroups.scheduling.volcano.sh"
)
#: their parents (1.38): optional, served only with the CompositePodGroup gate
KIND_COMPOSITE_PODGROUPS: Kind[CompositeGroupInfo] = Kind(
    COMPOSITE_PODGROUPS, composite_pod_group, optional=True
)
#: the three gang APIs, in priming order
POD_GROUP_KINDS: tuple[Kind[PodGroupInfo], ...] = (
    KIND_PODGROUPS,
    KIND_NATIVE_PODGROUPS,
    KIND_VOLCANO_PODGROUPS,
)
KIND_NODES: Kind[NodeSpec] = Kind(NODES, NodeSpec.from_dict, identity=name_of)


@dataclass
class NamespaceInfo:
    """A namespace's labels: pod affinity terms select namespaces by label."""

    name: str
    labels: dict[str, str]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NamespaceInfo:
        meta = obj.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        return cls(str(meta.get("name") or ""), labels)


KIND_NAMESPACES: Kind[NamespaceInfo] = Kind(NAMESPACES, NamespaceInfo.from_dict, identity=name_of)
# the storage kinds the volume plugins read (only the fields they read are kept:
# plugins/volumebinding/objects.py)
KIND_PVS: Kind[PVInfo] = Kind(PERSISTENT_VOLUMES, PVInfo.from_dict, identity=name_of)
KIND_PVCS: Kind[PVCInfo] = Kind(PERSISTENT_VOLUME_CLAIMS, PVCInfo.from_dict, identity=namespaced_key)
KIND_STORAGE_CLASSES: Kind[StorageClassInfo] = Kind(
    STORAGE_CLASSES, StorageClassInfo.from_dict, identity=name_of
)
KIND_CSI_NODES: Kind[CSINodeInfo] = Kind(CSI_NODES, CSINodeInfo.from_dict, identity=name_of)
KIND_VOLUME_ATTACHMENTS: Kind[VolumeAttachmentInfo] = Kind(
    VOLUME_ATTACHMENTS, VolumeAttachmentInfo.from_dict, identity=name_of
)
KIND_CSI_DRIVERS: Kind[CSIDriverInfo] = Kind(CSI_DRIVERS, CSIDriverInfo.from_dict, identity=name_of)
KIND_CSI_STORAGE_CAPACITIES: Kind[CSIStorageCapacityInfo] = Kind(
    CSI_STORAGE_CAPACITIES, CSIStorageCapacityInfo.from_dict, identity=namespaced_key
)
#: every storage kind, in priming order
STORAGE_KINDS: tuple[Kind[Any], ...] = (
    KIND_STORAGE_CLASSES,
    KIND_CSI_NODES,
    KIND_PVS,
    KIND_PVCS,
    KIND_VOLUME_ATTACHMENTS,
    KIND_CSI_DRIVERS,
    KIND_CSI_STORAGE_CAPACITIES,
)
# the DRA kinds the DynamicResources plugin reads (plugins/dynamicresources/objects.py); optional: a
# cluster before 1.34 (or with resource.k8s.io/v1 off) serves none, and then no pod can use claims
KIND_DEVICE_CLASSES: Kind[DeviceClassInfo] = Kind(
    DEVICE_CLASSES, DeviceClassInfo.from_dict, identity=name_of, optional=True
)
KIND_RESOURCE_SLICES: Kind[ResourceSliceInfo] = Kind(
    RESOURCE_SLICES, ResourceSliceInfo.from_dict, identity=name_of, optional=True
)
KIND_RESOURCE_CLAIMS: Kind[ResourceClaimInfo] = Kind(
    RESOURCE_CLAIMS, ResourceClaimInfo.from_dict, identity=namespaced_key, optional=True
)
#: DeviceTaintRules (resource.k8s.io/v1, GA in 1.37): taints added to the devices they select
KIND_DEVICE_TAINT_RULES: Kind[DeviceTaintRuleInfo] = Kind(
    DEVICE_TAINT_RULES, DeviceTaintRuleInfo.from_dict, identity=name_of, optional=True
)
#: every DRA kind, in priming order (classes, slices and the rules tainting their devices before
#: the claims that use them)
DRA_KINDS: tuple[Kind[Any], ...] = (
    KIND_DEVICE_CLASSES,
    KIND_RESOURCE_SLICES,
    KIND_DEVICE_TAINT_RULES,
    KIND_RESOURCE_CLAIMS,
)
#: what plugin packages' stores take (``Scheduler.on_object``): storage, then DRA
STORE_KINDS: tuple[Kind[Any], ...] = (*STORAGE_KINDS, *DRA_KINDS)
#: PodDisruptionBudgets (DefaultPreemption honours them where it can)
KIND_PDBS: Kind[PDBInfo] = Kind(PDBS, PDBInfo.from_dict, identity=namespaced_key)


def _selector_owner(kind: str) -> Kind[SelectorOwner]:
    def decode(obj: Mapping[str, Any]) -> SelectorOwner:
        return SelectorOwner.decode(kind, obj)

    resource = {
        SERVICE: SERVICES,
        REPLICATION_CONTROLLER: REPLICATION_CONTROLLERS,
        REPLICA_SET: REPLICA_SETS,
        STATEFUL_SET: STATEFUL_SETS,
    }[kind]
    return Kind(resource, decode, identity=namespaced_key)


#: Services, ReplicationControllers, ReplicaSets and StatefulSets: their selectors make the selector
#: of a pod's default topology spread constraints (PodTopologySpread); primed before the pods
#: (by the ``SelectorOwner.kind`` each decodes to)
SPREAD_SELECTOR_KINDS: dict[str, Kind[SelectorOwner]] = {
    k: _selector_owner(k) for k in (SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET)
}
#: non-terminated pods only: a pod that finishes arrives as DELETED, which frees its resources
KIND_PODS: Kind[PodInfo] = Kind(PODS, PodInfo.from_dict, identity=pod_uid, field_selector=LIVE_PODS_SELECTOR)
