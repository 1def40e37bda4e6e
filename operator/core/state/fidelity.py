"""Never silently wrong: what a pod asks for that the profile does not evaluate makes it unschedulable.

Why: a scheduler that places a pod as if its ``podAntiAffinity`` or ``persistentVolumeClaim`` did not
exist is worse than one that refuses it; the user learns nothing until the workload misbehaves. Each
placement request a pod can make is found when the pod is parsed (:func:`fields_used`), as a
:class:`FieldUse`: the path as the pod spells it (``spec.volumes[1].persistentVolumeClaim``) and the
*field* it is an instance of (``spec.volumes[*].persistentVolumeClaim``). Which plugins evaluate a
field, and at which extension point each must run for it to count (a required term at Filter, a
preferred one at Score, scheduling gates at PreEnqueue), is not known here: each plugin declares it
in its registry entry (:class:`shoal.core.framework.contract.Evaluates`), and the framework hands
:func:`check` the table of them. A pod that uses a field some declaring plugin of which the profile
does not run *at that point* gets an ``UnschedulableAndUnresolvable`` status naming the field, before
PreFilter; so does a field no plugin declares. It is retried when the pod changes (or the profile
does), never on unrelated cluster events.

Not covered, on purpose: resource requests (every pod has them; a profile without a resource Filter
is a choice about the whole cluster, not about one pod's fields) and tolerations (they permit, they
do not ask).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.core.state.declaredfeatures import inferred_features
from shoal.core.state.grouplinks import POD_GROUP_LABEL, VOLCANO_GROUP_ANNOTATION
from shoal.core.state.status import Code, Status

#: the name diagnoses and queueing hints see for this check (no plugin registers events for it)
GUARD = "UnevaluatedFields"

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

# -- the fields (what plugins declare they evaluate) ----------------------------------------------
SCHEDULING_GATES = "spec.schedulingGates"
NODE_SELECTOR = "spec.nodeSelector"
NODE_AFFINITY_REQUIRED = f"spec.affinity.nodeAffinity.{REQUIRED}"
NODE_AFFINITY_PREFERRED = f"spec.affinity.nodeAffinity.{PREFERRED}"
POD_AFFINITY_REQUIRED = f"spec.affinity.podAffinity.{REQUIRED}"
POD_AFFINITY_PREFERRED = f"spec.affinity.podAffinity.{PREFERRED}"
POD_ANTI_AFFINITY_REQUIRED = f"spec.affinity.podAntiAffinity.{REQUIRED}"
POD_ANTI_AFFINITY_PREFERRED = f"spec.affinity.podAntiAffinity.{PREFERRED}"
SPREAD_HARD = "spec.topologySpreadConstraints[whenUnsatisfiable=DoNotSchedule]"
SPREAD_SOFT = "spec.topologySpreadConstraints[whenUnsatisfiable=ScheduleAnyway]"
HOST_PORTS = "spec.containers[*].ports[*].hostPort"
RESOURCE_CLAIMS = "spec.resourceClaims"
#: a gang link: the native ``spec.schedulingGroup``, scheduler-plugins' label, Volcano's annotation
SCHEDULING_GROUP = "spec.schedulingGroup"
POD_GROUP_LABEL_FIELD = f"metadata.labels[{POD_GROUP_LABEL}]"
VOLCANO_GROUP_FIELD = f"metadata.annotations[{VOLCANO_GROUP_ANNOTATION}]"
#: a feature the pod needs its node to declare (restart rules, user namespaces on the host network, ...)
NODE_FEATURE = "spec (a feature its node must declare)"
#: the PodGroup's topology constraint (a field of the gang, not of the pod: the gang cycle checks it)
GANG_TOPOLOGY = "PodGroup topology constraint"

#: volume sources that ask something of the node a pod lands on (a claim's binding and bound PVs'
#: node affinity, zones, ReadWriteOncePod, in-tree disk conflicts, CSI attach limits); generic
#: ephemeral volumes are claims too; other sources (emptyDir, configMap, ...) ask nothing
VOLUME_SOURCES = (
    "persistentVolumeClaim",
    "ephemeral",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "rbd",
    "iscsi",
    "azureDisk",
    "cinder",
)


def volume(source: str) -> str:
    """The field of a volume source (one of :data:`VOLUME_SOURCES`)."""
    return f"spec.volumes[*].{source}"


def annotation(key: str) -> str:
    return f"metadata.annotations[{key}]"


@dataclass(frozen=True, slots=True)
class FieldUse:
    """A pod field that asks for something: where the pod spells it, and which field it is."""

    path: str
    field: str
    #: when no plugin evaluates the field on purpose: why (shoal leaves it to someone else)
    why: str = ""


#: field -> every plugin that evaluates it, with the extension point it must run at (None: anywhere
#: in the profile); built by the framework from the plugins' declarations
Evaluators = Mapping[str, Sequence[tuple[str, str | None]]]


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
        out.append(FieldUse(SCHEDULING_GATES, SCHEDULING_GATES))
    if spec.get("nodeSelector"):
        out.append(FieldUse(NODE_SELECTOR, NODE_SELECTOR))
    affinity = spec.get("affinity") or {}
    for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        for when in (REQUIRED, PREFERRED):
            if isinstance(terms, Mapping) and terms.get(when):
                path = f"spec.affinity.{kind}.{when}"
                out.append(FieldUse(path, path))
    for i, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        hard = isinstance(c, Mapping) and c.get("whenUnsatisfiable") == "DoNotSchedule"
        out.append(FieldUse(f"spec.topologySpreadConstraints[{i}]", SPREAD_HARD if hard else SPREAD_SOFT))
    if _host_ports(spec):
        out.append(FieldUse(HOST_PORTS, HOST_PORTS))
    if spec.get("resourceClaims"):
        out.append(FieldUse(RESOURCE_CLAIMS, RESOURCE_CLAIMS))
    if spec.get("schedulingGroup"):
        out.append(FieldUse(SCHEDULING_GROUP, SCHEDULING_GROUP))
    for i, vol in enumerate(spec.get("volumes") or ()):
        if not isinstance(vol, Mapping):
            continue
        out += [
            FieldUse(f"spec.volumes[{i}].{source}", volume(source))
            for source in VOLUME_SOURCES
            if vol.get(source) is not None
        ]
    out += [FieldUse(path, NODE_FEATURE) for path in inferred_features(spec).values()]
    return tuple(out)


def _kueue_topology(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> tuple[FieldUse, ...]:
    """Kueue's topology request, unless Kueue has answered it: shoal does not choose a domain for
    it (Kueue does, and a second choice could differ); a pod Kueue ungated carries the domain's
    node labels in ``spec.nodeSelector``, which NodeAffinity evaluates. A pod with the annotation
    and no nodeSelector was not placed by Kueue's TAS: refused, naming the annotation."""
    if spec.get("nodeSelector"):
        return ()
    return tuple(
        FieldUse(annotation(key), annotation(key), why=KUEUE_ASSIGNS)
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


def check(
    fields: Collection[FieldUse], at: Mapping[str, Collection[str]], evaluators: Evaluators
) -> Status | None:
    """``None`` when the profile (``at``: extension point -> plugin names) runs every plugin that
    evaluates each field, where it must; else why not, naming each field."""
    unknown: list[str] = []
    elsewhere: dict[str, list[str]] = {}
    left_out: dict[str, list[str]] = {}
    anywhere = {name for names in at.values() for name in names}
    for use in fields:
        needs = evaluators.get(use.field, ())
        if not needs:
            if use.why:
                elsewhere.setdefault(use.why, []).append(use.path)
            else:
                unknown.append(use.path)
            continue
        for plugin, point in needs:
            if plugin not in (anywhere if point is None else at.get(point, ())):
                where = plugin if point is None else f"{plugin} at {point}"
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
