"""Never silently wrong: what a pod asks for that the profile does not evaluate makes it unschedulable.

Why: a scheduler that places a pod as if its ``podAntiAffinity`` or ``persistentVolumeClaim`` did not
exist is worse than one that refuses it; the user learns nothing until the workload misbehaves. Each
scheduling-relevant pod field shoal knows of is listed here with the plugin that evaluates it (``None``
while no shoal plugin does). A pod that uses a field whose plugin the profile does not run gets an
``UnschedulableAndUnresolvable`` status naming the field, before PreFilter; it is retried when the pod
changes (or the profile does), never on unrelated cluster events.

The fields are found once, when the pod is parsed (:func:`fields_used`), so the check in the cycle
is a lookup.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from shoal.core.status import Code, Status

#: the name diagnoses and queueing hints see for this check (no plugin registers events for it)
GUARD = "UnevaluatedFields"

#: pod field -> the plugin that evaluates it (or the plugins that all must run); ``None``: shoal has
#: no such plugin yet
EVALUATED_BY: dict[str, str | tuple[str, ...] | None] = {
    "spec.schedulingGates": "SchedulingGates",
    "spec.affinity.podAffinity": "InterPodAffinity",
    "spec.affinity.podAntiAffinity": "InterPodAffinity",
    "spec.topologySpreadConstraints": "PodTopologySpread",
    "spec.resourceClaims": None,  # kube-scheduler: DynamicResources
    "spec.resources": "NodeResourcesFit",  # pod-level resources
    "spec.schedulingGroup": None,  # Kubernetes' native Workload / PodGroup gangs
    # a claim: bound PVs' node affinity and binding (VolumeBinding), zones (VolumeZone),
    # ReadWriteOncePod (VolumeRestrictions), CSI attach limits (NodeVolumeLimits)
    "persistentVolumeClaim": ("VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"),
    # generic ephemeral volumes are claims too; upstream's VolumeZone and VolumeRestrictions skip them
    "ephemeral": ("VolumeBinding", "NodeVolumeLimits"),
}

#: in-tree disk volumes: VolumeRestrictions checks the conflicts of GCE PD, AWS EBS, RBD and iSCSI
#: disks; NodeVolumeLimits counts those CSI migration covers (GCE PD, AWS EBS, Azure Disk, Cinder)
_DISK_VOLUMES = ("gcePersistentDisk", "awsElasticBlockStore", "azureDisk", "rbd", "iscsi", "cinder")
EVALUATED_BY["gcePersistentDisk"] = EVALUATED_BY["awsElasticBlockStore"] = (
    "VolumeRestrictions",
    "NodeVolumeLimits",
)
EVALUATED_BY["rbd"] = EVALUATED_BY["iscsi"] = "VolumeRestrictions"
EVALUATED_BY["azureDisk"] = EVALUATED_BY["cinder"] = "NodeVolumeLimits"
EVALUATED_BY["metadata.annotations[shoal.dev/gpu-memory-gb]"] = "GPUMemory"
EVALUATED_BY["metadata.labels[scheduling.x-k8s.io/pod-group]"] = "Coscheduling"


def fields_used(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The paths of the fields in :data:`EVALUATED_BY` that this pod spec sets (non-empty)."""
    out: list[str] = []
    if spec.get("schedulingGates"):
        out.append("spec.schedulingGates")
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if _non_empty(affinity.get(kind)):
            out.append(f"spec.affinity.{kind}")
    for key in ("topologySpreadConstraints", "resourceClaims", "schedulingGroup"):
        if spec.get(key):
            out.append(f"spec.{key}")
    resources = spec.get("resources") or {}
    if resources.get("requests") or resources.get("limits"):
        out.append("spec.resources")
    for i, volume in enumerate(spec.get("volumes") or ()):
        if not isinstance(volume, Mapping):
            continue
        for source in ("persistentVolumeClaim", "ephemeral", *_DISK_VOLUMES):
            if volume.get(source) is not None:
                out.append(f"spec.volumes[{i}].{source}")
    return tuple(out)


def _non_empty(term: Any) -> bool:
    if not isinstance(term, Mapping):
        return bool(term)
    return any(bool(v) for v in term.values())


def evaluator(path: str) -> tuple[str, ...] | None:
    """The plugins that evaluate the field at ``path`` (``spec.volumes[3].ephemeral`` → by source)."""
    key = path.rsplit(".", 1)[-1] if path.startswith("spec.volumes[") else path
    plugins = EVALUATED_BY.get(key)
    return (plugins,) if isinstance(plugins, str) else plugins


def check(fields: Collection[str], plugins: Collection[str]) -> Status | None:
    """``None`` when the profile (its plugin names) evaluates every field; else why not, naming it."""
    unknown: list[str] = []
    left_out: dict[str, list[str]] = {}
    for path in fields:
        needed = evaluator(path)
        if needed is None:
            unknown.append(path)
        elif missing := [p for p in needed if p not in plugins]:
            left_out.setdefault(", ".join(missing), []).append(path)
    reasons = []
    if unknown:
        reasons.append(f"pod uses {', '.join(unknown)}, which shoal does not evaluate yet")
    for plugin, paths in left_out.items():
        reasons.append(
            f"pod uses {', '.join(paths)}, which this profile does not evaluate (it leaves out {plugin})"
        )
    if not reasons:
        return None
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("; ".join(reasons),), GUARD)
