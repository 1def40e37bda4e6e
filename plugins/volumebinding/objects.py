"""Typed views of the storage objects the volume plugins read: PersistentVolumes,
PersistentVolumeClaims, StorageClasses, CSINodes and CSIDrivers.

Why: VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits look claims, volumes and
classes up for every pod that has one; parsing them once, when the watch delivers them, keeps the
cycle to lookups. Only the fields those plugins read are kept. A malformed field never raises out
of here: it is recorded in ``problems`` and the object is kept with the field left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.core.state.nodeselectors import SelectorTerm, parse_term
from shoal.core.state.podvolumes import MIGRATED_SOURCES, migrated_source
from shoal.core.state.quantity import QuantityError, to_int
from shoal.core.state.selectors import LabelSelector, SelectorError, parse_selector

JSON = Mapping[str, Any]

BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = "Immediate", "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


def not_found(resource: str, name: str) -> str:
    """The API's NotFound message as kube-scheduler's listers word it (``persistentvolumeclaim
    "data" not found``; ``resource`` is singular, with its group: ``storageclass.storage.k8s.io``)."""
    return f'{resource} "{name}" not found'


def _labels(meta: JSON, key: str = "labels") -> dict[str, str]:
    return {str(k): str(v) for k, v in (meta.get(key) or {}).items()}


#: the largest amount an int64 holds, as a Quantity's Value() caps it (scores use int64 arrays)
_INT64_MAX = 2**63 - 1


def _storage(obj: Any, problems: dict[str, str], what: str) -> int | None:
    """``storage`` of a resource list, in bytes (None when absent or unparsable; capped at int64)."""
    value = obj.get("storage") if isinstance(obj, Mapping) else None
    if value is None:
        return None
    try:
        return max(0, min(to_int("storage", value), _INT64_MAX))
    except QuantityError as exc:
        problems[what] = str(exc)
        return None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else None


def _terms(items: Any) -> tuple[SelectorTerm, ...]:
    return tuple(parse_term(t) for t in items or () if isinstance(t, Mapping))


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _claim_ref(ref: JSON) -> ClaimRef:
    return ClaimRef(str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or ""))


@dataclass(slots=True)
class PVInfo:
    """A PersistentVolume: its class, size, access modes, node affinity, claim and CSI source."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    storage_class: str = ""
    capacity: int | None = None
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    #: ``spec.volumeAttributesClassName`` (GA in 1.34): a claim gets only a PV of its own ("" alike)
    attributes_class: str = ""
    #: ``spec.nodeAffinity.required.nodeSelectorTerms``; None: no node affinity
    node_affinity: tuple[SelectorTerm, ...] | None = None
    claim_ref: ClaimRef | None = None
    phase: str = ""
    #: (driver, volumeHandle) of a CSI volume
    csi: tuple[str, str] | None = None
    #: an in-tree source CSI migration covers: (in-tree plugin, CSI driver, volume handle)
    migrated: tuple[str, str, str] | None = None
    #: the in-tree source's volume ID as written (an EBS one may be ``aws://<zone>/vol-…``)
    in_tree_id: str = ""
    deleting: bool = False
    resource_version: str = ""
    problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, obj: JSON) -> PVInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        problems: dict[str, str] = {}
        annotations = _labels(meta, "annotations")
        required = (spec.get("nodeAffinity") or {}).get("required")
        ref = spec.get("claimRef")
        csi = spec.get("csi")
        return cls(
            name=str(meta.get("name") or ""),
            labels=_labels(meta),
            annotations=annotations,
            storage_class=annotations.get(BETA_STORAGE_CLASS, str(spec.get("storageClassName") or "")),
            capacity=_storage(spec.get("capacity"), problems, "spec.capacity.storage"),
            access_modes=tuple(str(m) for m in spec.get("accessModes") or ()),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            attributes_class=str(spec.get("volumeAttributesClassName") or ""),
            node_affinity=_terms(required.get("nodeSelectorTerms"))
            if isinstance(required, Mapping)
            else None,
            claim_ref=(
                ClaimRef(
                    str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")
                )
                if isinstance(ref, Mapping)
                else None
            ),
            phase=str((obj.get("status") or {}).get("phase") or ""),
            csi=(str(csi.get("driver") or ""), str(csi.get("volumeHandle") or ""))
            if isinstance(csi, Mapping)
            else None,
            migrated=migrated_source(spec),
            in_tree_id=next(
                (
                    str(spec[key].get(id_field) or "")
                    for key, (_, _, id_field) in MIGRATED_SOURCES.items()
                    if isinstance(spec.get(key), Mapping)
                ),
                "",
            ),
            deleting=bool(meta.get("deletionTimestamp")),
            resource_version=str(meta.get("resourceVersion") or ""),
            problems=problems,
        )

    def node_affinity_matches(self, node: str, labels: Mapping[str, str]) -> bool:
        """``CheckNodeAffinity``: no affinity, or one of the required terms matches the node."""
        if self.node_affinity is None:
            return True
        return any(t.matches(node, labels) for t in self.node_affinity)


@dataclass(slots=True)
class PVCInfo:
    """A PersistentVolumeClaim: its class, the volume it is bound to, what it asks for."""

    namespace: str
    name: str
    uid: str = ""
    #: ``GetPersistentVolumeClaimClass``: the beta annotation, else ``spec.storageClassName``, else ""
    storage_class: str = ""
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    #: ``spec.volumeAttributesClassName``: the VolumeAttributesClass a PV must name to be matched
    attributes_class: str = ""
    request: int = 0
    selector: LabelSelector | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    phase: str = ""
    #: uid of the controlling owner (a generic ephemeral volume's pod)
    controller_uid: str = ""
    deleting: bool = False
    resource_version: str = ""
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return bool(self.volume_name)

    @classmethod
    def from_dict(cls, obj: JSON) -> PVCInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        problems: dict[str, str] = {}
        annotations = _labels(meta, "annotations")
        try:
            selector = parse_selector(spec.get("selector"))
        except SelectorError as exc:
            problems["spec.selector"] = str(exc)
            selector = None
        owner = next(
            (o for o in meta.get("ownerReferences") or () if isinstance(o, Mapping) and o.get("controller")),
            {},
        )
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            storage_class=annotations.get(BETA_STORAGE_CLASS, str(spec.get("storageClassName") or "")),
            volume_name=str(spec.get("volumeName") or ""),
            access_modes=tuple(str(m) for m in spec.get("accessModes") or ()),
            volume_mode=str(spec.get("volumeMode") or "Filesystem"),
            attributes_class=str(spec.get("volumeAttributesClassName") or ""),
            request=_storage(_get(spec.get("resources"), "requests"), problems, "spec.resources") or 0,
            selector=selector,
            annotations=annotations,
            phase=str((obj.get("status") or {}).get("phase") or ""),
            controller_uid=str(owner.get("uid") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            resource_version=str(meta.get("resourceVersion") or ""),
            problems=problems,
        )


@dataclass(slots=True)
class StorageClassInfo:
    name: str
    provisioner: str = ""
    #: ``volumeBindingMode`` (the API defaults it to Immediate; None only in hand-made objects)
    binding_mode: str | None = IMMEDIATE
    #: ``allowedTopologies`` as node selector terms (matchLabelExpressions: key In values)
    allowed_topologies: tuple[SelectorTerm, ...] = ()

    @classmethod
    def from_dict(cls, obj: JSON) -> StorageClassInfo:
        meta = obj.get("metadata") or {}
        mode = obj.get("volumeBindingMode")
        terms = tuple(
            parse_term(
                {
                    "matchExpressions": [
                        {"key": e.get("key"), "operator": "In", "values": e.get("values")}
                        for e in t.get("matchLabelExpressions") or ()
                        if isinstance(e, Mapping)
                    ]
                }
            )
            for t in obj.get("allowedTopologies") or ()
            if isinstance(t, Mapping)
        )
        return cls(
            name=str(meta.get("name") or ""),
            provisioner=str(obj.get("provisioner") or ""),
            binding_mode=str(mode) if mode is not None else None,
            allowed_topologies=terms,
        )


@dataclass(frozen=True, slots=True)
class CSIDriverOnNode:
    name: str
    node_id: str = ""
    #: ``allocatable.count``: how many of the driver's volumes the node may attach (None: no limit)
    count: int | None = None
    topology_keys: tuple[str, ...] = ()


@dataclass(slots=True)
class CSINodeInfo:
    """A CSINode: the CSI drivers on a node (named as the node) and their attach limits."""

    name: str
    drivers: dict[str, CSIDriverOnNode] = field(default_factory=dict)
    migrated_plugins: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, obj: JSON) -> CSINodeInfo:
        meta = obj.get("metadata") or {}
        drivers: dict[str, CSIDriverOnNode] = {}
        for d in (obj.get("spec") or {}).get("drivers") or ():
            if not isinstance(d, Mapping):
                continue
            count = (d.get("allocatable") or {}).get("count")
            name = str(d.get("name") or "")
            drivers[name] = CSIDriverOnNode(
                name,
                str(d.get("nodeID") or ""),
                int(count) if isinstance(count, int) else None,
                tuple(str(k) for k in d.get("topologyKeys") or ()),
            )
        migrated = str(_labels(meta, "annotations").get(MIGRATED_PLUGINS, ""))
        return cls(
            name=str(meta.get("name") or ""),
            drivers=drivers,
            migrated_plugins=frozenset(p.strip() for p in migrated.split(",") if p.strip()),
        )


#: a CSIDriver (``storage.k8s.io/v1``) as NodeVolumeLimits reads it: with VolumeLimitScaling (beta
#: and on in kube-scheduler 1.37) a driver that sets ``spec.preventPodSchedulingIfMissing: true``
#: keeps pods using its volumes off nodes whose CSINode does not list it
@dataclass(frozen=True, slots=True)
class CSIDriverInfo:
    name: str
    #: ``spec.preventPodSchedulingIfMissing`` (absent or anything but ``true``: False, as upstream)
    prevent_scheduling_if_missing: bool = False
    #: ``spec.storageCapacity``: the driver publishes CSIStorageCapacity, which VolumeBinding checks
    storage_capacity: bool = False

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> CSIDriverInfo:
        meta = obj.get("metadata")
        spec = obj.get("spec")
        flag = spec.get("preventPodSchedulingIfMissing") if isinstance(spec, Mapping) else None
        capacity = spec.get("storageCapacity") if isinstance(spec, Mapping) else None
        return cls(
            name=str((meta.get("name") if isinstance(meta, Mapping) else None) or ""),
            prevent_scheduling_if_missing=flag is True,
            storage_capacity=capacity is True,
        )


@dataclass(frozen=True, slots=True)
class CSIStorageCapacityInfo:
    """A CSIStorageCapacity (storage.k8s.io/v1): how much a StorageClass can provision for the nodes
    its ``nodeTopology`` selects (None: none; an empty selector: every node)."""

    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector | None
    #: bytes (rounded up); None when absent
    capacity: int | None = None
    maximum_volume_size: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def limit(self) -> int | None:
        """The largest volume it can provision: ``maximumVolumeSize`` whenever set, else ``capacity``."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity

    def reaches(self, labels: Mapping[str, str]) -> bool:
        return self.node_topology is not None and self.node_topology.matches(labels)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> CSIStorageCapacityInfo:
        found = obj.get("metadata")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        try:  # a selector the API server let through but that does not parse reaches no node
            topology = parse_selector(obj.get("nodeTopology"))
        except SelectorError:
            topology = None
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            storage_class=str(obj.get("storageClassName") or ""),
            node_topology=topology,
            capacity=_bytes(obj.get("capacity")),
            maximum_volume_size=_bytes(obj.get("maximumVolumeSize")),
        )


def _bytes(value: Any) -> int | None:
    """A quantity in bytes, rounded up (None when absent or malformed: no limit to compare)."""
    if value is None:
        return None
    try:
        return max(0, min(to_int("storage", value), _INT64_MAX))
    except QuantityError:
        return None


StorageObject = PVInfo | PVCInfo | StorageClassInfo | CSINodeInfo | CSIDriverInfo | CSIStorageCapacityInfo
#: API kind -> the typed object (dumps for ``shoal simulate``)
STORAGE_DECODERS: dict[str, Callable[[JSON], StorageObject]] = {
    "PersistentVolume": PVInfo.from_dict,
    "PersistentVolumeClaim": PVCInfo.from_dict,
    "StorageClass": StorageClassInfo.from_dict,
    "CSINode": CSINodeInfo.from_dict,
    "CSIDriver": CSIDriverInfo.from_dict,
    "CSIStorageCapacity": CSIStorageCapacityInfo.from_dict,
}


def decode_storage(obj: JSON) -> StorageObject:
    """A storage object from an API dict; ValueError naming the object when it is malformed."""
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind} without metadata.name")
    if kind == "PersistentVolumeClaim" and meta is not None:
        name = f"{meta.get('namespace') or 'default'}/{name}"
    try:
        return STORAGE_DECODERS[kind](obj)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"{kind} {name}: malformed ({exc})") from None
