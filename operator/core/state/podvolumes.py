"""A pod's volumes as the volume plugins look at them: claims, ephemeral claims, in-tree disks.

Why in the core: a pod's volumes are part of the pod (PodInfo parses them once, and the cache counts
which placed pods use each claim); the storage objects they name and every check on them belong to
the volume plugins (``shoal.plugins.volumebinding`` and its neighbours).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JSON = Mapping[str, Any]


#: in-tree disk sources whose conflicts VolumeRestrictions checks
DISK_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


@dataclass(frozen=True, slots=True)
class Disk:
    """An in-tree disk as VolumeRestrictions compares them: the source, its identity, read-only."""

    source: str
    ident: tuple[str, ...]
    read_only: bool = False
    monitors: frozenset[str] = frozenset()  # rbd: the Ceph monitors (any overlap is the same cluster)

    def conflicts(self, other: Disk) -> bool:
        """``isVolumeConflict``: the same disk, and (but for EBS) not both read-only."""
        if self.source != other.source or self.ident != other.ident:
            return False
        if self.source == "awsElasticBlockStore":
            return True
        if self.source == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class PodVolume:
    name: str
    #: the claim's name: ``persistentVolumeClaim.claimName``, or ``<pod>-<volume>`` for ``ephemeral``
    claim: str | None = None
    ephemeral: bool = False
    disk: Disk | None = None
    #: an in-tree volume CSI migration covers: (in-tree plugin, CSI driver, volume handle)
    migrated: tuple[str, str, str] | None = None


def _disk(volume: JSON) -> Disk | None:
    for source in DISK_SOURCES:
        d = volume.get(source)
        if not isinstance(d, Mapping):
            continue
        ro = bool(d.get("readOnly"))
        if source == "gcePersistentDisk":
            return Disk(source, (str(d.get("pdName") or ""),), ro)
        if source == "awsElasticBlockStore":
            return Disk(source, (str(d.get("volumeID") or ""),), ro)
        if source == "iscsi":
            return Disk(source, (str(d.get("iqn") or ""),), ro)
        monitors = frozenset(str(m) for m in d.get("monitors") or ())
        return Disk(source, (str(d.get("pool") or "rbd"), str(d.get("image") or "")), ro, monitors)
    return None


def pod_volumes(pod_name: str, spec: JSON) -> tuple[PodVolume, ...]:
    """The volumes of a pod spec that the volume plugins look at (claims, ephemeral claims, disks)."""
    out = []
    for v in spec.get("volumes") or ():
        if not isinstance(v, Mapping):
            continue
        name = str(v.get("name") or "")
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, Mapping):
            out.append(PodVolume(name, claim=str(pvc.get("claimName") or "")))
        elif v.get("ephemeral") is not None:
            out.append(PodVolume(name, claim=f"{pod_name}-{name}", ephemeral=True))
        else:
            disk, migrated = _disk(v), migrated_source(v)
            if disk is not None or migrated is not None:
                out.append(PodVolume(name, disk=disk, migrated=migrated))
    return tuple(out)


#: in-tree source -> (in-tree plugin, CSI driver, the field naming the disk); the five whose
#: migration kube-scheduler's NodeVolumeLimits counts (``isCSIMigrationOn``)
MIGRATED_SOURCES = {
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", "pdName"),
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com", "volumeID"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com", "diskURI"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org", "volumeID"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com", "volumeID"),
}
#: in-tree provisioner -> CSI driver
MIGRATED_PROVISIONERS = {plugin: driver for plugin, driver, _ in MIGRATED_SOURCES.values()}


def migrated_source(source: JSON) -> tuple[str, str, str] | None:
    """(in-tree plugin, CSI driver, volume handle) of an in-tree volume or PV source CSI migration
    covers; the handle names the disk (EBS: without its ``aws://zone/`` prefix)."""
    for key, (plugin, driver, field_name) in MIGRATED_SOURCES.items():
        spec = source.get(key)
        if isinstance(spec, Mapping):
            handle = str(spec.get(field_name) or "")
            if key == "awsElasticBlockStore" and handle.startswith("aws://"):
                handle = handle.rsplit("/", 1)[-1]
            return plugin, driver, handle
    return None
