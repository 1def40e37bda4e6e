"""Wire formats in one place: API paths, field selectors, time formats, object keys.

Why one module: the operator, ``shoal explain``, the status writers and the test helpers must
agree to the character on these (a field selector that differs between the watch and the re-list
check would make the check forget live pods), and the next watched kind should find them here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

PROFILE_GROUP, PROFILE_VERSION, PROFILE_KIND, PROFILE_PLURAL = (
    "shoal.dev",
    "v1alpha1",
    "SchedulingProfile",
    "schedulingprofiles",
)
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_KIND, PODGROUP_PLURAL = (
    "scheduling.x-k8s.io",
    "v1alpha1",
    "PodGroup",
    "podgroups",
)

#: pods the scheduler accounts for: a pod that finishes leaves this selection (arrives as DELETED)
LIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def phase_selector(phase: str) -> str:
    """The field selector of the pods in one phase (``status.phase=Succeeded``)."""
    return f"status.phase={phase}"


@dataclass(frozen=True)
class Resource:
    """An API resource (``""`` is the core group), and the paths of its objects."""

    group: str
    version: str
    plural: str
    namespaced: bool = False

    @property
    def api(self) -> str:
        return f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"

    def path(self, name: str = "", *, namespace: str = "", sub: str = "") -> str:
        """The collection (every namespace when ``namespace`` is empty), an object or its subresource."""
        where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
        out = f"{self.api}{where}/{self.plural}"
        if name:
            out += f"/{quote(name, safe='')}"
        if sub:
            out += f"/{sub}"
        return out


PODS = Resource("", "v1", "pods", namespaced=True)
NODES = Resource("", "v1", "nodes")
NAMESPACES = Resource("", "v1", "namespaces")
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", namespaced=True)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses")
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes")
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments")
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers")
CSI_STORAGE_CAPACITIES = Resource("storage.k8s.io", "v1", "csistoragecapacities", namespaced=True)
PROFILES = Resource(PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL)
PODGROUPS = Resource(PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL, namespaced=True)
#: Kubernetes' native PodGroups (1.37 beta; served with the GenericWorkload gate and the version on)
NATIVE_PODGROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", namespaced=True)
#: their parents (1.38 beta; served with the CompositePodGroup gate): gangs of gangs
COMPOSITE_PODGROUPS = Resource("scheduling.k8s.io", "v1beta1", "compositepodgroups", namespaced=True)
#: Volcano's PodGroups (a CRD, where Volcano was installed); no status subresource: status is
#: written by patching the object itself, as vc-scheduler updates it
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", namespaced=True)
#: Volcano's Jobs: read once per PodGroup they own, for their schedulerName (their pods come later)
VOLCANO_JOBS = Resource("batch.volcano.sh", "v1alpha1", "jobs", namespaced=True)
#: Dynamic Resource Allocation (GA since 1.34): what the DynamicResources plugin reads and writes
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses")
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices")
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules")
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", namespaced=True)
EVENTS = Resource("events.k8s.io", "v1", "events", namespaced=True)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", namespaced=True)
#: what selects a pod for default topology spreading (PodTopologySpread: core/state/spreadselectors.py)
SERVICES = Resource("", "v1", "services", namespaced=True)
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", namespaced=True)
REPLICA_SETS = Resource("apps", "v1", "replicasets", namespaced=True)
STATEFUL_SETS = Resource("apps", "v1", "statefulsets", namespaced=True)


# -- object keys ----------------------------------------------------------------------------------
def object_key(namespace: str, name: str) -> str:
    """``namespace/name``: how pods and PodGroups are keyed (``PodInfo.key``, ``PodGroupInfo.key``)."""
    return f"{namespace}/{name}"


def split_key(key: str) -> tuple[str, str]:
    """(namespace, name) of an ``object_key``."""
    namespace, _, name = key.partition("/")
    return namespace, name


def key_of(obj: Mapping[str, Any]) -> str:
    """The key of a namespaced object as the API gives it (namespace ``default`` when absent)."""
    meta = obj.get("metadata") or {}
    return object_key(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def namespaced_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object (a claim's key in the cache)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def pod_uid(obj: Mapping[str, Any]) -> str:
    """A pod's identity in the cache: its uid (``PodInfo.uid``, its key when the uid is absent)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}")


# -- times ----------------------------------------------------------------------------------------
def micro_time(when: float | None = None) -> str:
    """A MicroTime with exactly six fractional digits, as the API server requires (events, Leases)."""
    stamp = datetime.fromtimestamp(time.time() if when is None else when, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(when: float | None = None) -> str:
    """A metav1.Time (whole seconds): conditions' ``lastTransitionTime``, ``scheduleStartTime``."""
    stamp = datetime.fromtimestamp(time.time() if when is None else when, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
