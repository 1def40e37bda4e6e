"""Kubernetes' native Workload API in shoal's one gang model (core/state/workloads.py), without a server:
parsing, keys that never collide with scheduler-plugins' PodGroups, basic vs gang, the missing
PodGroup gate, and the PodGroupInitiallyScheduled condition."""

from __future__ import annotations

from typing import Any

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state import fidelity
from shoal.core.state.objects import (
    NATIVE_GROUP_API,
    PLUGINS_GROUP_API,
    NodeSpec,
    PodGroupInfo,
    PodInfo,
    pod_group_key,
)
from shoal.core.state.workloads import (
    INITIALLY_SCHEDULED,
    SATISFIED,
    decode_pod_group,
    gang_satisfied,
    initially_scheduled,
    native_pod_group,
)
from shoal.kube.informer import LISTED
from shoal.kube.kinds import KIND_NATIVE_PODGROUPS, KIND_PODGROUPS
from shoal.kube.wire import MERGE_PATCH, STRATEGIC_MERGE_PATCH
from shoal.operator_app.app import ShoalOperator
from shoal.operator_app.settings import RunSettings
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import (
    make_native_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)
from tests.unit.helpers import refusal
from tests.unit.test_operator_lifecycle import RecordingWriter, SlowBinder


def sim(objects: list[dict[str, Any]]) -> Simulation:
    return Simulation(InMemoryCluster(objects), [], initial_backoff=0.01, max_backoff=0.05)


def bound(s: Simulation, prefix: str) -> int:
    return sum(1 for k, v in s.placements().items() if k.startswith(f"default/{prefix}") and v)


def native_gang(name: str, members: int, min_count: int | None, gpus: int = 8) -> list[dict[str, Any]]:
    return [make_native_pod_group(name, min_count=min_count)] + [
        make_pod(f"{name}-n{i}", gpus=gpus, scheduling_group=name) for i in range(members)
    ]


# -- parsing and keys -------------------------------------------------------------------------------
def test_a_native_gang_maps_to_the_one_model() -> None:
    obj = make_native_pod_group(
        "train",
        namespace="ml",
        min_count=4,
        workload=("job", "workers"),
        topology_key="topology.kubernetes.io/zone",
    )
    obj["metadata"].update(uid="u1", generation=3, creationTimestamp="2026-01-01T00:00:00Z")
    group = decode_pod_group(obj)
    assert (group.min_member, group.gang, group.api) == (4, True, NATIVE_GROUP_API)
    assert group.topology_required == "topology.kubernetes.io/zone"
    assert group.topology_levels == ("topology.kubernetes.io/zone",)
    assert (group.workload, group.uid, group.generation) == ("job/workers", "u1", 3)
    assert group.key == "ml/train@scheduling.k8s.io"
    assert group.min_field == "minCount"


def test_basic_and_malformed_policies_are_not_gangs() -> None:
    basic = native_pod_group(make_native_pod_group("b", min_count=None))
    assert (basic.gang, basic.min_member, basic.topology_required, basic.workload) == (False, 1, None, "")
    policies: list[object] = [{}, {"gang": {}}, {"gang": {"minCount": 0}}, {"gang": "x"}, "nonsense"]
    for policy in policies:
        obj = make_native_pod_group("m", min_count=2)
        obj["spec"]["schedulingPolicy"] = policy
        assert not native_pod_group(obj).gang


def test_scheduler_plugins_podgroups_keep_their_keys() -> None:
    group = decode_pod_group(make_pod_group("train", namespace="ml", min_member=2))
    assert (group.api, group.key, group.min_field, group.gang) == (
        PLUGINS_GROUP_API,
        "ml/train",
        "minMember",
        True,
    )
    # '@' is in no object name: no scheduler-plugins PodGroup can have a native one's key
    assert pod_group_key("ml", "train") != pod_group_key("ml", "train", NATIVE_GROUP_API)


def test_pods_link_by_scheduling_group_and_it_wins_over_the_label() -> None:
    native = PodInfo.from_dict(make_pod("a", namespace="ml", scheduling_group="train"))
    assert (native.pod_group, native.pod_group_api, native.group_key) == (
        "train",
        NATIVE_GROUP_API,
        "ml/train@scheduling.k8s.io",
    )
    assert fidelity.FieldUse("spec.schedulingGroup", fidelity.SCHEDULING_GROUP) in native.fields_used
    labelled = PodInfo.from_dict(make_pod("b", namespace="ml", pod_group="train"))
    assert (labelled.pod_group_api, labelled.group_key) == (PLUGINS_GROUP_API, "ml/train")
    both = PodInfo.from_dict(make_pod("c", namespace="ml", pod_group="other", scheduling_group="train"))
    assert both.group_key == "ml/train@scheduling.k8s.io"  # kube-scheduler reads only the field
    links = {fidelity.SCHEDULING_GROUP, fidelity.POD_GROUP_LABEL_FIELD, fidelity.VOLCANO_GROUP_FIELD}
    assert [u.path for u in both.fields_used if u.field in links] == ["spec.schedulingGroup"]
    # a profile without Coscheduling refuses a native member instead of placing it alone
    status = refusal(native.fields_used, at={"filter": {"NodeResourcesFit"}})
    assert status is not None and "spec.schedulingGroup" in status.message
    assert refusal(native.fields_used, at={"permit": {"Coscheduling"}}) is None


# -- scheduling ---------------------------------------------------------------------------------------
async def test_a_native_and_a_plugins_gang_of_one_name_are_two_gangs() -> None:
    nodes = [make_node(f"n{i}", gpus=8) for i in range(4)]
    # one member of each "train": merged, they would make a quorum of 2
    objs = [*nodes, *native_gang("train", 1, 2), make_pod_group("train", min_member=2)]
    s = sim([*objs, make_pod("train-p0", gpus=8, pod_group="train")])
    await s.run()
    assert s.scheduler.queue.counts()["gated"] == 2 and not any(s.placements().values())
    s.submit(make_pod("train-n1", gpus=8, scheduling_group="train"))
    s.submit(make_pod("train-p1", gpus=8, pod_group="train"))
    await s.run()
    assert bound(s, "train-n") == 2 and bound(s, "train-p") == 2
    assert set(s.scheduler.cache.pod_groups) == {"default/train", "default/train@scheduling.k8s.io"}


async def test_a_native_gang_is_all_or_nothing_and_says_mincount() -> None:
    s = sim([*[make_node(f"n{i}", gpus=8) for i in range(2)], *native_gang("big", 3, 3)])
    outcomes = await s.run()
    assert bound(s, "big") == 0
    msg = next(o.message for o in outcomes.values() if o.pod.startswith("default/big"))
    assert "pod group default/big@scheduling.k8s.io: only 2 of the 3 pending member(s)" in msg
    assert "(minCount 3)" in msg


async def test_members_below_the_quorum_wait_named_with_their_workload_template() -> None:
    group = make_native_pod_group("job-workers", min_count=3, workload=("job", "workers"))
    s = sim([make_node("n0", gpus=8), group, make_pod("w-0", gpus=1, scheduling_group="job-workers")])
    outcomes = await s.run()
    (outcome,) = outcomes.values()
    assert (
        "pod group default/job-workers@scheduling.k8s.io (Workload job, template workers) "
        "has 1 of the 3 pods it needs (minCount)"
    ) in outcome.message


async def test_a_basic_group_places_each_pod_alone() -> None:
    s = sim([make_node("n0", gpus=8), *native_gang("svc", 3, None)])
    await s.run()
    assert bound(s, "svc") == 1  # no quorum: what fits is placed, the rest waits alone


async def test_a_pod_naming_a_missing_native_group_waits_until_it_exists() -> None:
    s = sim([make_node("n0", gpus=8), make_pod("orphan", gpus=1, scheduling_group="later")])
    await s.run()
    assert s.scheduler.queue.counts()["gated"] == 1 and not any(s.placements().values())
    explanation = s.scheduler.explain(PodInfo.from_dict(next(iter(s.cluster.pods.values()))))
    assert "PodGroup default/later@scheduling.k8s.io not found" in explanation.message
    s.submit(make_native_pod_group("later", min_count=None))
    await s.run()
    assert bound(s, "orphan") == 1


# -- the PodGroupInitiallyScheduled condition ---------------------------------------------------------
def group(min_count: int | None = 2, generation: int = 1) -> PodGroupInfo:
    obj = make_native_pod_group("g", min_count=min_count)
    obj["metadata"]["generation"] = generation
    return native_pod_group(obj)


def test_the_condition_as_kube_scheduler_writes_it() -> None:
    now, later = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
    assert initially_scheduled(group(), 0, "", [], now) is None  # not tried yet: nothing to say
    failed = initially_scheduled(group(), 1, "0/4 nodes are available", [], now)
    assert failed == {
        "type": INITIALLY_SCHEDULED,
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available",
        "observedGeneration": 1,
        "lastTransitionTime": now,
    }
    assert initially_scheduled(group(), 1, "0/4 nodes are available", [failed], later) is None  # unchanged
    again = initially_scheduled(group(), 1, "0/5 nodes are available", [failed], later)
    assert again is not None and again["lastTransitionTime"] == now  # same status: same transition time
    done = initially_scheduled(group(), 2, "", [failed], later)
    assert done is not None and (done["status"], done["reason"], done["lastTransitionTime"]) == (
        "True",
        "Scheduled",
        later,
    )
    assert initially_scheduled(group(), 0, "evicted", [done], later) is None  # True is final
    assert initially_scheduled(group(None), 1, "", [], now) is not None  # basic: one member placed
    broken = initially_scheduled(group(), 0, "plugin X failed", [], now, error=True)
    assert broken is not None and (broken["status"], broken["reason"]) == ("False", "SchedulerError")
    refused = initially_scheduled(
        group(), 0, "odd priority", [], now, error=True, error_reason="PodGroupError"
    )
    assert refused is not None and refused["reason"] == "PodGroupError"  # 1.38's validation


def test_a_placed_gang_says_whether_it_still_has_mincount_members() -> None:
    now, later, latest = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"
    placed = initially_scheduled(group(), 2, "", [], now)
    assert placed is not None
    assert gang_satisfied(group(), 1, 0, [], now) is None  # not placed yet: the other condition says
    whole = gang_satisfied(group(), 2, 0, [placed], now)
    assert whole is not None and (whole["status"], whole["reason"], whole["message"]) == (
        "True",
        "MinCountScheduled",
        "2 members scheduled; minCount 2",
    )
    assert gang_satisfied(group(), 2, 0, [placed, whole], later) is None  # unchanged: nothing to write
    broken = gang_satisfied(group(), 1, 0, [placed, whole], later)
    assert broken is not None and (broken["status"], broken["reason"], broken["lastTransitionTime"]) == (
        "False",
        "BelowMinCount",
        later,
    )
    # a member replaced: whole again; one that ran to completion does not break the gang
    again = gang_satisfied(group(), 2, 0, [placed, broken], latest)
    assert again is not None and (again["status"], again["lastTransitionTime"]) == ("True", latest)
    done = gang_satisfied(group(), 1, 1, [placed, again], latest)
    assert (
        done is not None and done["status"] == "True" and done["message"].endswith("1 succeeded; minCount 2")
    )
    assert (
        gang_satisfied(group(None), 0, 0, [initially_scheduled(group(None), 1, "", [], now) or {}], now)
        is None
    )


async def test_the_status_loop_patches_native_conditions_and_leaves_plugins_status_alone() -> None:
    op = ShoalOperator(RunSettings())
    writer = RecordingWriter()
    scheduler = Scheduler(load_registry(third_party=False), SlowBinder(0), defaults=DEFAULT_PLUGINS)
    op.compose(scheduler, writer)
    assert op.podgroups is not None
    native = make_native_pod_group("train", min_count=1)
    native["status"] = {"conditions": [{"type": "example.com/Audited", "status": "True"}]}
    await op.informer.deliver(KIND_NATIVE_PODGROUPS, LISTED, native)
    await op.informer.deliver(KIND_PODGROUPS, LISTED, make_pod_group("train", min_member=1))
    scheduler.set_profile(DEFAULT_PROFILE_SPEC)  # shoal schedules gpu-scheduler's pods
    # kube-scheduler's gang: its own scheduler writes its condition, shoal does not
    await op.informer.deliver(KIND_NATIVE_PODGROUPS, LISTED, make_native_pod_group("theirs", min_count=1))
    scheduler.on_node(NodeSpec.from_dict(make_node("n0")))
    for obj in (
        make_pod("a", node_name="n0", scheduling_group="train"),
        make_pod("b", node_name="n0", pod_group="train"),
        make_pod("c", node_name="n0", scheduling_group="theirs", scheduler_name="default-scheduler"),
    ):
        scheduler.on_pod(PodInfo.from_dict(obj))
    await op.podgroups.write_all()
    assert not [path for path, _, _ in writer.written if "/theirs/" in path]
    by_path = {
        path: (status, patch) for (path, status, _), patch in zip(writer.written, writer.patches, strict=True)
    }
    status, patch = by_path["/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/train/status"]
    assert patch == STRATEGIC_MERGE_PATCH  # merged by type: the foreign condition stays
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        (INITIALLY_SCHEDULED, "True"),
        (SATISFIED, "True"),  # placed, and still whole
    ]
    status, patch = by_path["/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/train/status"]
    assert patch in (MERGE_PATCH, "") and status["phase"] == "Scheduling"  # bound, none running
    writer.written.clear()
    writer.patches.clear()
    await op.podgroups.write_all()  # nothing changed: nothing written
    assert writer.written == []
    # its one member goes: the gang is below minCount, and says so (the other condition stays True)
    scheduler.on_pod(PodInfo.from_dict(make_pod("a", node_name="n0", scheduling_group="train")), deleted=True)
    await op.podgroups.write_all()
    native_writes = [status for path, status, _ in writer.written if "scheduling.k8s.io/" in path]
    assert [(c["type"], c["status"], c["reason"]) for s in native_writes for c in s["conditions"]] == [
        (SATISFIED, "False", "BelowMinCount")
    ]


# -- a native gang's members have its priority ----------------------------------------------------
def test_a_native_group_reads_its_priority_and_other_apis_have_none() -> None:
    group = make_native_pod_group("g", min_count=2)
    group["spec"]["priority"] = 1000
    assert native_pod_group(group).priority == 1000
    assert native_pod_group(make_native_pod_group("h", min_count=2)).priority == 0  # no class: 0
    assert PodGroupInfo.from_dict(make_pod_group("p", min_member=2)).priority is None


async def test_members_whose_priority_is_not_their_groups_are_refused_naming_both() -> None:
    """kube-scheduler 1.37 and 1.38 refuse such a group in its pod-group cycle ("all pods in a
    single pod group should have the same priority as the pod group's priority")."""
    group = make_native_pod_group("mixed", min_count=2)
    group["spec"]["priority"] = 100
    pods = [
        # two members of the group's priority make the quorum; the third still fails the group
        make_pod(f"mixed-{i}", gpus=1, scheduling_group="mixed", priority=p)
        for i, p in enumerate((100, 5, 100))
    ]
    same = make_native_pod_group("same", min_count=2)
    same["spec"]["priority"] = 100
    peers = [make_pod(f"same-{i}", gpus=1, scheduling_group="same", priority=100) for i in range(2)]
    s = sim([make_node("n0", gpus=8), group, *pods, same, *peers])
    outcomes = await s.run()
    assert bound(s, "mixed") == 0 and bound(s, "same") == 2
    for name in ("mixed-0", "mixed-1", "mixed-2"):
        message = next(o.message for o in outcomes.values() if o.pod == f"default/{name}")
        assert "has priority 100 (spec.priority, from its priorityClassName)" in message
        assert "pod mixed-1 has 5 (spec.priority)" in message
    # the status writer says PodGroupError for it on a 1.38 API server (the validation's refusal)
    assert s.scheduler.gangs.refused_groups == {"default/mixed@scheduling.k8s.io"}


async def test_the_simulator_admits_a_native_groups_priority_class_as_the_api_server_does() -> None:
    """A hand-written PodGroup naming a class gets its value, as its members do: the gang binds."""
    group = make_native_pod_group("hi", min_count=2)
    group["spec"]["priorityClassName"] = "high"
    members = [make_pod(f"hi-{i}", gpus=1, scheduling_group="hi", priority_class="high") for i in range(2)]
    s = sim([make_node("n0", gpus=8), make_priority_class("high", 1000), group, *members])
    await s.run()
    assert bound(s, "hi") == 2


async def test_a_deleted_gang_leaves_nothing_behind_even_when_its_members_go_after_it() -> None:
    """The soak's leak: a native gang's owner (and finished members) stayed after the group was
    deleted, and a member's event after the group's DELETED brought them back."""
    op = ShoalOperator(RunSettings())
    scheduler = Scheduler(load_registry(third_party=False), SlowBinder(0), defaults=DEFAULT_PLUGINS)
    op.compose(scheduler, RecordingWriter())
    assert op.podgroups is not None
    group = make_native_pod_group("job", min_count=1)
    member = make_pod("job-0", node_name="n0", scheduling_group="job")
    member["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "job", "uid": "j", "apiVersion": "batch/v1"}
    ]
    await op.informer.deliver(KIND_NATIVE_PODGROUPS, LISTED, group)
    op.podgroups.note_member(PodInfo.from_dict(member), member)
    assert op.podgroups._owner
    await op.informer.deliver(KIND_NATIVE_PODGROUPS, "DELETED", group)
    done = {**member, "status": {"phase": "Succeeded"}}
    op.podgroups.note_member(PodInfo.from_dict(done), done)  # the member's late event
    assert not op.podgroups._owner and not op.podgroups._terminal
    await op.informer.deliver(KIND_NATIVE_PODGROUPS, LISTED, group)  # created again: noted again
    op.podgroups.note_member(PodInfo.from_dict(member), member)
    assert op.podgroups._owner
