"""Volcano's PodGroup (``scheduling.volcano.sh/v1beta1``) in shoal's one gang model.

Why a module of its own: teams moving from Volcano keep the PodGroups their controllers write
(Volcano's job and PodGroup controllers, KubeRay's Volcano integration) and the annotation
``scheduling.k8s.io/group-name`` on every member pod. shoal reads them as gangs, as it reads
scheduler-plugins' and the native PodGroups (keys ``ns/name@scheduling.volcano.sh``):

================================  ================================================================
Volcano                           shoal
================================  ================================================================
``spec.minMember``                ``min_member`` (0, which Volcano allows, is read as 1)
``spec.minResources``             ``min_resources``: checked at PreFilter, as scheduler-plugins'
``spec.priorityClassName``        not read: Volcano orders PodGroups by it; shoal orders pods by
                                  their own priority (its controllers give the pods the same class)
``spec.queue``                    ``default`` (or absent) only; another queue is refused, named
``spec.minTaskMember``            ``task_quorums``: evaluated where shoal's one quorum implies them
                                  (any ``minMember`` members hold each task's minimum; members name
                                  their task by the annotation ``volcano.sh/task-spec``), which is
                                  what Volcano's job controller writes by default; else refused,
                                  named (:func:`short_of_task_quorums`)
``spec.networkTopology``          refused, named (HyperNode tiers; shoal's topology is node labels)
``spec.subGroupPolicy``           refused, named (quorums per subgroup)
``status``                        phase and counts, as vc-scheduler writes them
                                  (:func:`volcano_phase`)
================================  ================================================================

A field refused is never silently dropped: every member stays pending with a message naming it.
``spec.minTaskMember`` is not refused when the one quorum implies it (:func:`short_of_task_quorums`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal.core.state.grouplinks import VOLCANO_GROUP_API
from shoal.core.state.objects import PodGroupInfo, parse_time
from shoal.core.state.quantity import QuantityError, to_int

#: the annotation (and label) Volcano's job controller puts on a pod: the name of its task
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
#: the queue every Volcano installation has, and the CRD's default for ``spec.queue``
DEFAULT_QUEUE = "default"
#: Volcano's PodGroup phases (``PodGroupPhase``); shoal writes all but Unknown
PENDING, INQUEUE, RUNNING, UNKNOWN, COMPLETED = "Pending", "Inqueue", "Running", "Unknown", "Completed"


def unevaluated_fields(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields of a Volcano PodGroup ``spec`` that change placement and that shoal does not
    evaluate, as ``path=value`` or ``path`` (empty values count as absent)."""
    out: list[str] = []
    queue = spec.get("queue")
    if queue and queue != DEFAULT_QUEUE:
        out.append(f"spec.queue={queue}")
    for field in ("networkTopology", "subGroupPolicy"):
        if spec.get(field):
            out.append(f"spec.{field}")
    return tuple(out)


def volcano_pod_group(obj: Mapping[str, Any]) -> PodGroupInfo:
    """A ``scheduling.volcano.sh`` PodGroup as shoal's model. Never raises: a malformed
    ``minMember`` is read as 1 and a malformed ``minResources`` entry is skipped (the CRD's schema
    refuses both at admission)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    min_member = spec.get("minMember")
    min_resources: dict[str, int] = {}
    for name, value in (spec.get("minResources") or {}).items():
        try:
            min_resources[str(name)] = to_int(str(name), value)
        except QuantityError:
            continue
    return PodGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        min_member=max(min_member, 1) if isinstance(min_member, int) else 1,
        min_resources=min_resources,
        created=parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        api=VOLCANO_GROUP_API,
        unevaluated=unevaluated_fields(spec),
        task_quorums={
            str(task): int(n)
            for task, n in (spec.get("minTaskMember") or {}).items()
            if isinstance(n, int) and n > 0
        },
    )


def short_of_task_quorums(group: PodGroupInfo, task_counts: Mapping[str, int]) -> tuple[str, bool]:
    """Why ``minTaskMember`` is not implied by the group's one quorum ("" when it is), and whether
    that may pass (a task has fewer pods than its minimum: more may come).

    shoal places at least ``minMember`` of the group's ``total`` members, any of them. Each task
    ``t`` then gets at least ``count[t] - (total - minMember)`` members, so its minimum holds
    whatever fits when ``count[t] - minTaskMember[t] >= total - minMember``: always so for what
    Volcano's job controller writes by default (``minAvailable`` = every replica, each task's
    minimum = its replicas). Otherwise the group is refused, naming the field: shoal would not
    know to prefer one task's pods over another's.
    """
    total = sum(task_counts.values())
    slack = max(total - group.min_member, 0)
    for task, need in sorted(group.task_quorums.items()):
        have = task_counts.get(task, 0)
        if have < need:
            why = f"pod group {group.key}: task {task} has {have} of the {need} pods spec.minTaskMember asks"
            return why, True
        if have - need < slack:
            why = (
                f"pod group {group.key} uses spec.minTaskMember ({task}: {need} of its {have} pods), "
                f"which its minMember {group.min_member} of {total} members does not imply "
                "and shoal does not evaluate"
            )
            return why, False
    return "", False


def volcano_phase(min_member: int, scheduled: int, completed: int, *, refused: bool = False) -> str:
    """The phase vc-scheduler gives a PodGroup (its session's ``getPodGroupPhase``), for a group
    shoal schedules.

    ``scheduled`` counts members bound, running or finished; ``completed`` those finished
    (Succeeded or Failed). Once ``minMember`` are scheduled: Completed when every scheduled member
    finished, else Running. Below it, the group is admitted: Inqueue (vc-scheduler's ``enqueue``
    action; shoal has no queues, so every group it may schedule is admitted at once, which is what
    Volcano's job controller waits for before it creates the pods) — unless a field shoal does not
    evaluate refuses it (``refused``): then it stays Pending, as a group Volcano cannot admit.
    Unknown (some members running, the rest unschedulable) is never written, so a group that loses
    members goes back to Inqueue rather than Unknown.
    """
    if scheduled >= min_member and scheduled > 0:
        return COMPLETED if scheduled == completed else RUNNING
    return PENDING if refused else INQUEUE
