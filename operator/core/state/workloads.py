"""Kubernetes' native gang API (``scheduling.k8s.io/v1beta1``, KEP-4671) in shoal's one gang model.

Why a module of its own: scheduler-plugins' PodGroup and the native one describe the same thing
(a group of pods placed all together or not at all) in different words. Both become a
:class:`~shoal.core.state.objects.PodGroupInfo`, so the cache, the queue, Coscheduling and the gang
cycle have one code path; what differs is read here:

========================================  ==============================================
native (1.37)                             ``PodGroupInfo``
========================================  ==============================================
``spec.schedulingPolicy.gang.minCount``   ``min_member``, ``gang=True``
``spec.schedulingPolicy.basic``           ``min_member=1``, ``gang=False``: not a gang
``spec.schedulingConstraints.topology``   ``topology_required`` (its one key)
``spec.workloadRef``                      ``workload`` (``workload/template``, for messages)
``spec.priority``                         ``priority`` (every member must have it)
``spec.parentCompositePodGroupName``      ``parent``: placed with its CompositePodGroup (1.38)
pod ``spec.schedulingGroup.podGroupName`` ``PodInfo.pod_group`` (``pod_group_api`` native)
========================================  ==============================================

and the status shoal writes is kube-scheduler's ``PodGroupInitiallyScheduled`` condition
(:func:`initially_scheduled`), not scheduler-plugins' phase and counts; and, for a gang once
placed, whether it still is: ``PodGroupSatisfied`` (:func:`gang_satisfied`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.core.state.grouplinks import VOLCANO_GROUP_API
from shoal.core.state.objects import NATIVE_GROUP_API, PodGroupInfo, parse_time
from shoal.core.state.podclaims import pod_claims
from shoal.core.state.volcano import volcano_pod_group

#: kube-scheduler 1.37's condition on a native PodGroup, its reasons (``k8s.io/api/scheduling/v1beta1``)
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
#: 1.38's reason for a group its runtime validation refuses (a member of another priority, ...)
REASON_POD_GROUP_ERROR = "PodGroupError"
#: whether a placed gang still has ``minCount`` members: the condition KEP-6413 proposes for 1.39
#: (provisional; ``PodGroupInitiallyScheduled`` is final, so it cannot say), its reasons shoal's
SATISFIED = "PodGroupSatisfied"
REASON_MEMBERS_SCHEDULED = "MinCountScheduled"
REASON_BELOW_MIN_COUNT = "BelowMinCount"


def gang_count(spec: Mapping[str, Any], field: str) -> int | None:
    """``spec.schedulingPolicy.gang.<field>`` when it makes a gang (an int >= 1), else None (basic
    or malformed: the API server validates one policy and a count >= 1)."""
    policy = spec.get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    count = gang.get(field) if isinstance(gang, Mapping) else None
    return count if isinstance(count, int) and count >= 1 else None


def topology_key(spec: Mapping[str, Any]) -> str | None:
    """``spec.schedulingConstraints.topology[0].key`` (the API allows one key today)."""
    constraints = spec.get("schedulingConstraints") or {}
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    keys = [str(t.get("key")) for t in topology or () if isinstance(t, Mapping) and t.get("key")]
    return keys[0] if keys else None


def native_pod_group(obj: Mapping[str, Any]) -> PodGroupInfo:
    """A ``scheduling.k8s.io`` PodGroup as shoal's model. Never raises: a malformed policy is
    read as ``basic`` (the API server validates exactly one policy and ``minCount >= 1``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    min_count = gang_count(spec, "minCount")
    ref = spec.get("workloadRef") or {}
    workload = (
        f"{ref.get('workloadName', '')}/{ref.get('templateName', '')}" if isinstance(ref, Mapping) else ""
    )
    return PodGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        min_member=min_count or 1,
        created=parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
        # the API allows one key today ("may change in the future"): the first one is required
        topology_required=topology_key(spec),
        api=NATIVE_GROUP_API,
        gang=min_count is not None,
        workload=workload if ref else "",
        resource_claims=pod_claims(spec, obj.get("status") or {}),
        priority=int(spec["priority"]) if isinstance(spec.get("priority"), int) else 0,
        # 1.38 (gate CompositePodGroup): placed all-or-nothing with its siblings, inside its
        # parent's topology domain (shoal.core.state.hierarchy, the gang cycle's tree)
        parent=str(spec["parentCompositePodGroupName"]) if spec.get("parentCompositePodGroupName") else None,
    )


def find_condition(conditions: Sequence[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == type_), None)


def initially_scheduled(
    group: PodGroupInfo,
    scheduled: int,
    message: str,
    current: Sequence[Mapping[str, Any]],
    now: str,
    *,
    error: bool = False,
    error_reason: str = "",
) -> dict[str, Any] | None:
    """The ``PodGroupInitiallyScheduled`` condition to write, or None when there is nothing to say.

    As kube-scheduler 1.37 (``schedule_one_podgroup.go``, ``updatePodGroupCondition``): True
    (reason ``Scheduled``) once ``minCount`` members (one, for ``basic``) were placed; False with
    reason ``Unschedulable`` and the scheduling failure's ``message`` while they cannot be
    (``SchedulerError`` when the failure was an ``error``: a plugin's or a binding's; ``error_reason``
    instead, 1.38's ``PodGroupError`` for a group its validation refused); a True
    condition is final (never turned back to False). ``lastTransitionTime`` changes only with the
    status; ``observedGeneration`` is the group's. ``scheduled`` counts members bound (or that ran).
    """
    existing = find_condition(current, INITIALLY_SCHEDULED)
    if existing is not None and existing.get("status") == "True":
        return None
    if scheduled >= group.min_member:
        status, reason, message = "True", REASON_SCHEDULED, ""
    elif message:
        status, reason = "False", (error_reason or REASON_SCHEDULER_ERROR) if error else REASON_UNSCHEDULABLE
    else:
        return None  # not attempted yet (or waiting for members): kube-scheduler says nothing either
    since = now
    if existing is not None and existing.get("status") == status:
        since = str(existing.get("lastTransitionTime") or now)
    condition = {
        "type": INITIALLY_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message[:32768],  # the API's limit for a condition's message
        "observedGeneration": group.generation,
        "lastTransitionTime": since,
    }
    if existing is not None and all(existing.get(k) == v for k, v in condition.items()):
        return None
    return condition


def gang_satisfied(
    group: PodGroupInfo,
    scheduled: int,
    succeeded: int,
    current: Sequence[Mapping[str, Any]],
    now: str,
) -> dict[str, Any] | None:
    """The ``PodGroupSatisfied`` condition to write, or None when there is nothing to say.

    Only for a gang, and only once ``PodGroupInitiallyScheduled`` is True (before, that condition
    says everything): True while at least ``minCount`` members are scheduled (``scheduled``: bound
    and not terminated) or ran to completion (``succeeded``: finished work does not break a gang);
    False (``BelowMinCount``) when fewer, as when a member failed, was evicted or deleted and no
    replacement is bound yet; True again once one is. ``lastTransitionTime`` changes only with the
    status. Trainer, JobSet or KubeRay controllers read it instead of counting member phases."""
    initially = find_condition(current, INITIALLY_SCHEDULED)
    if not group.gang or initially is None or initially.get("status") != "True":
        return None
    have = scheduled + succeeded
    ok = have >= group.min_member
    done = f", {succeeded} succeeded" if succeeded else ""
    condition = {
        "type": SATISFIED,
        "status": "True" if ok else "False",
        "reason": REASON_MEMBERS_SCHEDULED if ok else REASON_BELOW_MIN_COUNT,
        "message": f"{scheduled} members scheduled{done}; minCount {group.min_member}",
        "observedGeneration": group.generation,
        "lastTransitionTime": now,
    }
    existing = find_condition(current, SATISFIED)
    if existing is not None and existing.get("status") == condition["status"]:
        condition["lastTransitionTime"] = str(existing.get("lastTransitionTime") or now)
        if all(existing.get(k) == v for k, v in condition.items()):
            return None
    return condition


def decode_pod_group(obj: Mapping[str, Any]) -> PodGroupInfo:
    """A PodGroup of any of the three APIs, told apart by ``apiVersion`` (snapshots, simulations,
    checks)."""
    api_version = str(obj.get("apiVersion") or "")
    if api_version.startswith(f"{NATIVE_GROUP_API}/"):
        return native_pod_group(obj)
    if api_version.startswith(f"{VOLCANO_GROUP_API}/"):
        return volcano_pod_group(obj)
    return PodGroupInfo.from_dict(obj)
