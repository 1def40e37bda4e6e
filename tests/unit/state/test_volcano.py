"""Volcano's PodGroup (scheduling.volcano.sh/v1beta1) read as a gang, without a server: parsing,
the pod annotation that links members, keys apart from the other two APIs, fields shoal refuses
by name, placement all or nothing, and the phase and counts the status loop writes."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.volcano import (
    COMPLETED,
    INQUEUE,
    PENDING,
    RUNNING,
    TASK_SPEC_ANNOTATION,
    short_of_task_quorums,
    volcano_phase,
    volcano_pod_group,
)
from shoal.core.state.workloads import decode_pod_group
from shoal.kube.informer import LISTED
from shoal.kube.kinds import KIND_VOLCANO_PODGROUPS
from shoal.kube.wire import MERGE_PATCH
from shoal.operator_app.app import ShoalOperator
from shoal.operator_app.settings import RunSettings
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import (
    VOLCANO_GROUP_ANNOTATION,
    make_node,
    make_pod,
    make_volcano_pod_group,
)
from tests.unit.test_operator_lifecycle import RecordingWriter, SlowBinder


def member(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, annotations={VOLCANO_GROUP_ANNOTATION: group}, **kw)


def volcano_gang(name: str, members: int, min_member: int, gpus: int = 8, **kw: Any) -> list[dict[str, Any]]:
    return [make_volcano_pod_group(name, min_member=min_member, **kw)] + [
        member(f"{name}-{i}", name, gpus=gpus) for i in range(members)
    ]


def test_a_volcano_podgroup_maps_to_the_one_model() -> None:
    obj = make_volcano_pod_group(
        "job-1", namespace="ml", min_member=3, min_resources={"cpu": "3", "nvidia.com/gpu": "24"}
    )
    obj["metadata"].update(uid="u1", generation=2)
    group = decode_pod_group(obj)
    assert (group.key, group.min_member, group.gang, group.uid) == (
        "ml/job-1@scheduling.volcano.sh",
        3,
        True,
        "u1",
    )
    assert group.min_resources == {"cpu": 3000, "nvidia.com/gpu": 24}
    assert group.min_field == "minMember" and group.unevaluated == ()
    # minMember 0 (allowed by Volcano's schema) or absent is a quorum of one; a bad quantity is skipped
    assert volcano_pod_group(make_volcano_pod_group("z", min_member=0)).min_member == 1
    bad = make_volcano_pod_group("b", min_member=2, min_resources={"cpu": "lots"})
    assert volcano_pod_group(bad).min_resources == {}


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"queue": "default"}, ()),
        ({"queue": ""}, ()),
        ({"priorityClassName": "high"}, ()),  # ordering only; members carry their own priority
        ({"queue": "research"}, ("spec.queue=research",)),
        ({"minTaskMember": {"ps": 1, "worker": 2}}, ()),  # a task quorum: see below
        ({"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}, ("spec.networkTopology",)),
        ({"subGroupPolicy": [{"name": "w", "subGroupSize": 2}]}, ("spec.subGroupPolicy",)),
        ({"queue": "q", "subGroupPolicy": [{"name": "a"}]}, ("spec.queue=q", "spec.subGroupPolicy")),
    ],
)
def test_fields_that_change_placement_and_are_not_evaluated_are_named(
    spec: dict[str, Any], named: tuple[str, ...]
) -> None:
    assert volcano_pod_group(make_volcano_pod_group("g", min_member=1, extra_spec=spec)).unevaluated == named


def job_pods(group: str, tasks: dict[str, int]) -> list[dict[str, Any]]:
    """Pods as Volcano's job controller names and annotates them (``<job>-<task>-<index>``)."""
    return [
        make_pod(
            f"{group}-{task}-{i}",
            gpus=8,
            annotations={VOLCANO_GROUP_ANNOTATION: group, TASK_SPEC_ANNOTATION: task},
        )
        for task, n in tasks.items()
        for i in range(n)
    ]


def with_tasks(name: str, min_member: int, quorums: dict[str, int]) -> dict[str, Any]:
    return make_volcano_pod_group(name, min_member=min_member, extra_spec={"minTaskMember": quorums})


@pytest.mark.parametrize(
    ("min_member", "quorums", "counts", "why", "may_pass"),
    [
        (3, {"ps": 1, "worker": 2}, {"ps": 1, "worker": 2}, "", False),  # the job controller's default
        (3, {"worker": 1}, {"ps": 1, "worker": 3}, "", False),  # any 3 of the 4 hold a worker
        (2, {"ps": 1, "worker": 1}, {"ps": 1, "worker": 2}, "minTaskMember (ps: 1 of its 1 pods)", False),
        (3, {"ps": 1, "worker": 2}, {"worker": 2}, "task ps has 0 of the 1 pods", True),  # not created yet
    ],
)
def test_task_quorums_are_evaluated_where_the_one_quorum_implies_them(
    min_member: int, quorums: dict[str, int], counts: dict[str, int], why: str, may_pass: bool
) -> None:
    group = volcano_pod_group(with_tasks("j", min_member, quorums))
    assert group.task_quorums == quorums
    got, passes = short_of_task_quorums(group, counts)
    assert (why in got if why else got == "") and passes == may_pass, got


async def test_a_volcano_job_with_task_quorums_is_placed_or_refused_by_name() -> None:
    nodes = [make_node(f"g{i}", gpus=8) for i in range(3)]
    implied = make_volcano_pod_group(
        "job", min_member=3, extra_spec={"minTaskMember": {"ps": 1, "worker": 2}}
    )
    s = sim([*nodes, implied, *job_pods("job", {"ps": 1, "worker": 2})])
    await s.run()
    assert all(s.placements().values())
    loose = make_volcano_pod_group(
        "loose", min_member=2, extra_spec={"minTaskMember": {"ps": 1, "worker": 2}}
    )
    s = sim([*nodes, loose, *job_pods("loose", {"ps": 1, "worker": 2})])
    outcomes = await s.run()
    assert not any(s.placements().values())
    assert all("uses spec.minTaskMember" in o.message for o in outcomes.values()), outcomes


def test_the_annotation_links_a_pod_and_the_other_links_win() -> None:
    pod = PodInfo.from_dict(member("w-0", "job-1", namespace="ml"))
    assert (pod.pod_group, pod.group_key) == ("job-1", "ml/job-1@scheduling.volcano.sh")
    assert [u.path for u in pod.fields_used] == [f"metadata.annotations[{VOLCANO_GROUP_ANNOTATION}]"]
    both = PodInfo.from_dict(member("w-1", "job-1", pod_group="train"))
    assert both.group_key == "default/train"  # scheduler-plugins' label first
    native = PodInfo.from_dict(member("w-2", "job-1", scheduling_group="train"))
    assert native.group_key == "default/train@scheduling.k8s.io"


def sim(objects: list[dict[str, Any]]) -> Simulation:
    return Simulation(InMemoryCluster(objects), [], initial_backoff=0.01, max_backoff=0.05)


async def test_a_volcano_gang_is_placed_all_together_or_not_at_all() -> None:
    nodes = [make_node(f"g{i}", gpus=8) for i in range(3)]
    fits = sim([*nodes, *volcano_gang("fits", 3, 3)])
    await fits.run()
    assert all(fits.placements().values()) and len(set(fits.placements().values())) == 3
    toobig = sim([*nodes, *volcano_gang("big", 4, 4)])
    outcomes = await toobig.run()
    assert not any(toobig.placements().values())
    assert any("only 3 of the 4 pending member(s)" in o.message for o in outcomes.values())


async def test_an_unevaluated_field_refuses_the_gang_naming_it() -> None:
    nodes = [make_node(f"g{i}", gpus=8) for i in range(3)]
    s = sim([*nodes, *volcano_gang("q", 2, 2, queue="research")])
    outcomes = await s.run()
    assert not any(s.placements().values())
    messages = [o.message for o in outcomes.values()]
    assert len(messages) == 2, messages
    for message in messages:
        assert "pod group default/q@scheduling.volcano.sh uses spec.queue=research" in message
        assert "which shoal does not evaluate" in message


@pytest.mark.parametrize(
    ("min_member", "scheduled", "completed", "refused", "phase"),
    [
        (3, 0, 0, False, INQUEUE),  # admitted at once: Volcano's job controller then creates pods
        (3, 2, 0, False, INQUEUE),
        (3, 3, 0, False, RUNNING),
        (3, 4, 1, False, RUNNING),
        (3, 3, 3, False, COMPLETED),
        (3, 0, 0, True, PENDING),  # a field shoal refuses: never admitted
        (1, 0, 0, False, INQUEUE),
    ],
)
def test_the_phase_follows_vc_scheduler(
    min_member: int, scheduled: int, completed: int, refused: bool, phase: str
) -> None:
    assert volcano_phase(min_member, scheduled, completed, refused=refused) == phase


async def test_the_status_loop_patches_the_object_of_groups_shoal_schedules() -> None:
    op = ShoalOperator(RunSettings())
    writer = RecordingWriter()
    scheduler = Scheduler(load_registry(third_party=False), SlowBinder(0), defaults=DEFAULT_PLUGINS)
    op.compose(scheduler, writer)
    assert op.podgroups is not None
    scheduler.set_profile(DEFAULT_PROFILE_SPEC)
    for name in ("ours", "theirs", "empty"):
        await op.informer.deliver(KIND_VOLCANO_PODGROUPS, LISTED, make_volcano_pod_group(name, min_member=2))
    scheduler.on_node(NodeSpec.from_dict(make_node("n0")))
    for obj in (
        member("a", "ours", node_name="n0"),
        member("b", "ours"),
        member("c", "theirs", scheduler_name="volcano"),
    ):
        scheduler.on_pod(PodInfo.from_dict(obj))
    await op.podgroups.write_all()
    assert [path for path, _, _ in writer.written] == [
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/ours"  # no /status subresource
    ]
    assert writer.written[0][1] == {"phase": INQUEUE, "running": 0, "succeeded": 0, "failed": 0}
    assert writer.patches[0] in (MERGE_PATCH, "")  # the default: a JSON merge patch
    writer.written.clear()
    await op.podgroups.write_all()  # nothing changed: nothing written
    assert writer.written == []
    scheduler.on_pod(PodInfo.from_dict(member("b", "ours", node_name="n0")))
    await op.podgroups.write_all()
    assert writer.written[0][1]["phase"] == RUNNING


class FakeRaw:
    """The API's answer to GET of a Volcano Job (counts the calls)."""

    def __init__(self, code: int, job: dict[str, Any]) -> None:
        self.code, self.job, self.calls = code, job, 0

    async def request(self, method: str, path: str, *_: Any, **__: Any) -> tuple[int, Any]:
        assert (method, path) == ("GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/train")
        self.calls += 1
        return self.code, self.job


@pytest.mark.parametrize(
    ("code", "scheduler", "admitted"),
    [(200, "gpu-scheduler", True), (200, "", False), (200, "volcano", False), (404, "", False)],
)
async def test_a_volcano_jobs_podgroup_is_admitted_when_the_job_names_shoal(
    code: int, scheduler: str, admitted: bool
) -> None:
    """Volcano's job controller creates the pods only once the PodGroup is Inqueue: before any pod
    exists, the owning Job's schedulerName (no name: Volcano's webhook makes it "volcano") says
    whether the group is shoal's to admit. The Job is read once."""
    op = ShoalOperator(RunSettings())
    writer = RecordingWriter()
    scheduler_ = Scheduler(load_registry(third_party=False), SlowBinder(0), defaults=DEFAULT_PLUGINS)
    op.compose(scheduler_, writer)
    assert op.podgroups is not None
    scheduler_.set_profile(DEFAULT_PROFILE_SPEC)
    raw = FakeRaw(code, {"spec": {"schedulerName": scheduler} if scheduler else {}})
    op.podgroups.raw = raw  # type: ignore[assignment]
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "train",
        "uid": "u",
        "controller": True,
    }
    group = make_volcano_pod_group("train-u", min_member=2, owner=owner)
    await op.informer.deliver(KIND_VOLCANO_PODGROUPS, LISTED, group)
    for _ in range(2):
        await op.podgroups.write_all()
    assert raw.calls == 1
    assert [s["phase"] for _, s, _ in writer.written] == ([INQUEUE] if admitted else [])
