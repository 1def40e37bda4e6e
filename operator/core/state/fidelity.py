"""Never silently wrong: what a pod asks for that the profile does not evaluate makes it unschedulable.

Why: a scheduler that places a pod as if its ``podAntiAffinity`` or ``persistentVolumeClaim`` did not
exist is worse than one that refuses it; the user learns nothing until the workload misbehaves. Each
placement request a pod can make is found when the pod is parsed (:func:`fields_used`), as a
:class:`FieldUse`: the field's path, the plugin that evaluates it (``None`` while no shoal plugin
does) and the extension point that plugin must run at for the field to count (a required term is
evaluated by Filter, a preferred one by Score, scheduling gates by PreEnqueue). A pod that uses a
field whose plugin the profile does not run *at that point* gets an ``UnschedulableAndUnresolvable``
status naming the field, before PreFilter; it is retried when the pod changes (or the profile
does), never on unrelated cluster events.

A field several plugins evaluate (a claim) is one use per plugin. Not covered, on purpose:
resource requests (every pod has them; a profile without NodeResourcesFit at Filter is a choice
about the whole cluster, not about one pod's fields) and tolerations (they permit, they do not ask).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.core.state.declaredfeatures import inferred_features
from shoal.core.state.status import Code, Status

#: the name diagnoses and queueing hints see for this check (no plugin registers events for it)
GUARD = "UnevaluatedFields"

FILTER, SCORE, PRE_ENQUEUE = "filter", "score", "preEnqueue"
DRA_POINTS = (FILTER, "reserve", "preBind")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

#: volume source -> the plugins that must all run at Filter for it: a claim's binding and bound
#: PVs' node affinity (VolumeBinding), zones (VolumeZone), ReadWriteOncePod (VolumeRestrictions),
#: CSI attach limits (NodeVolumeLimits); generic ephemeral volumes are claims too (upstream's
#: VolumeZone and VolumeRestrictions skip them); in-tree disks: VolumeRestrictions checks GCE PD,
#: AWS EBS, RBD and iSCSI conflicts, NodeVolumeLimits counts what CSI migration covers
VOLUME_PLUGINS: dict[str, tuple[str, ...]] = {
    "persistentVolumeClaim": ("VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"),
    "ephemeral": ("VolumeBinding", "NodeVolumeLimits"),
    "gcePersistentDisk": ("VolumeRestrictions", "NodeVolumeLimits"),
    "awsElasticBlockStore": ("VolumeRestrictions", "NodeVolumeLimits"),
    "rbd": ("VolumeRestrictions",),
    "iscsi": ("VolumeRestrictions",),
    "azureDisk": ("NodeVolumeLimits",),
    "cinder": ("NodeVolumeLimits",),
}


@dataclass(frozen=True, slots=True)
class FieldUse:
    """A pod field that asks for something, and who must evaluate it, where."""

    path: str
    plugin: str | None  # None: no shoal plugin evaluates it (yet, unless ``why`` says otherwise)
    point: str | None = FILTER  # None: anywhere in the profile
    why: str = ""  # for ``plugin=None``: why shoal leaves it to someone else


#: Kueue's Topology Aware Scheduling asks for a domain per pod set with these pod annotations; Kueue
#: itself picks the domain and lifts its ``kueue.x-k8s.io/topology`` gate with a nodeSelector on it
KUEUE_TOPOLOGY_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
)
KUEUE_ASSIGNS = (
    "Kueue assigns the topology domain and ungates the pod with a nodeSelector on it; this pod has none"
)


def fields_used(
    spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None
) -> tuple[FieldUse, ...]:
    """Every placement request this pod spec (and its annotations) makes (non-empty fields only)."""
    out: list[FieldUse] = list(_kueue_topology(spec, annotations or {}))
    if spec.get("schedulingGates"):
        out.append(FieldUse("spec.schedulingGates", "SchedulingGates", PRE_ENQUEUE))
    if spec.get("nodeSelector"):
        out.append(FieldUse("spec.nodeSelector", "NodeAffinity"))
    affinity = spec.get("affinity") or {}
    kinds = (
        ("nodeAffinity", "NodeAffinity"),
        ("podAffinity", "InterPodAffinity"),
        ("podAntiAffinity", "InterPodAffinity"),
    )
    for kind, plugin in kinds:
        terms = affinity.get(kind) or {}
        if isinstance(terms, Mapping) and terms.get(REQUIRED):
            out.append(FieldUse(f"spec.affinity.{kind}.{REQUIRED}", plugin, FILTER))
        if isinstance(terms, Mapping) and terms.get(PREFERRED):
            out.append(FieldUse(f"spec.affinity.{kind}.{PREFERRED}", plugin, SCORE))
    for i, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        hard = isinstance(c, Mapping) and c.get("whenUnsatisfiable") == "DoNotSchedule"
        out.append(
            FieldUse(f"spec.topologySpreadConstraints[{i}]", "PodTopologySpread", FILTER if hard else SCORE)
        )
    if _host_ports(spec):
        out.append(FieldUse("spec.containers[*].ports[*].hostPort", "NodePorts"))
    if spec.get("resourceClaims"):  # allocated at Reserve, written at PreBind: all three needed
        out += [FieldUse("spec.resourceClaims", "DynamicResources", point) for point in DRA_POINTS]
    if spec.get("schedulingGroup"):  # the native PodGroup (Coscheduling, as the pod-group label)
        out.append(FieldUse("spec.schedulingGroup", "Coscheduling", None))
    for i, volume in enumerate(spec.get("volumes") or ()):
        if not isinstance(volume, Mapping):
            continue
        for source, plugins in VOLUME_PLUGINS.items():
            if volume.get(source) is not None:
                out += [FieldUse(f"spec.volumes[{i}].{source}", plugin) for plugin in plugins]
    # a feature the pod needs its node to declare (restart rules, user namespaces on the host network, ...)
    out += [FieldUse(path, "NodeDeclaredFeatures") for path in inferred_features(spec).values()]
    return tuple(out)


def _kueue_topology(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> tuple[FieldUse, ...]:
    """Kueue's topology request, unless Kueue has answered it: shoal does not choose a domain for
    it (Kueue does, and a second choice could differ); a pod Kueue ungated carries the domain's
    node labels in ``spec.nodeSelector``, which NodeAffinity evaluates. A pod with the annotation
    and no nodeSelector was not placed by Kueue's TAS: refused, naming the annotation."""
    if spec.get("nodeSelector"):
        return ()
    return tuple(
        FieldUse(f"metadata.annotations[{key}]", None, why=KUEUE_ASSIGNS)
        for key in KUEUE_TOPOLOGY_ANNOTATIONS
        if annotations.get(key)
    )


def _host_ports(spec: Mapping[str, Any]) -> bool:
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    return any(
        isinstance(p, Mapping) and (p.get("hostPort") or 0) > 0
        for c in containers
        if isinstance(c, Mapping)
        for p in c.get("ports") or ()
    )


def check(fields: Collection[FieldUse], at: Mapping[str, Collection[str]]) -> Status | None:
    """``None`` when the profile (``at``: extension point -> plugin names) evaluates every field;
    else why not, naming each field."""
    unknown: list[str] = []
    elsewhere: dict[str, list[str]] = {}
    left_out: dict[str, list[str]] = {}
    anywhere = {name for names in at.values() for name in names}
    for use in fields:
        if use.plugin is None and use.why:
            elsewhere.setdefault(use.why, []).append(use.path)
        elif use.plugin is None:
            unknown.append(use.path)
        elif use.plugin not in (anywhere if use.point is None else at.get(use.point, ())):
            where = use.plugin if use.point is None else f"{use.plugin} at {use.point}"
            left_out.setdefault(where, []).append(use.path)
    reasons = []
    if unknown:
        reasons.append(f"pod uses {', '.join(unknown)}, which shoal does not evaluate yet")
    for why, paths in elsewhere.items():
        reasons.append(f"pod uses {', '.join(paths)}, which shoal does not evaluate ({why})")
    for where, paths in left_out.items():
        reasons.append(
            f"pod uses {', '.join(paths)}, which this profile does not evaluate (it leaves out {where})"
        )
    if not reasons:
        return None
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("; ".join(reasons),), GUARD)
