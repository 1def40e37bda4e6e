"""Kubernetes' native Workload API (scheduling.k8s.io/v1beta1) on the real API server, with shoal.

The control plane serves it (GenericWorkload, TopologyAwareWorkloadScheduling, the v1beta1
version on). A native PodGroup gang and a scheduler-plugins PodGroup gang of the same name in one
namespace are two gangs, both placed all together or not at all; a pod naming a native PodGroup
that does not exist waits, as kube-scheduler's GangScheduling makes it wait; shoal writes the
native PodGroup's ``PodGroupInitiallyScheduled`` condition and leaves other conditions alone.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane, python_env
from shoal.testing.kubescheduler import KubeSchedulerProcess
from shoal.testing.objects import (
    make_native_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
    make_profile,
    make_workload,
)

pytestmark = pytest.mark.slow

NATIVE = ("scheduling.k8s.io", "v1beta1")


async def native(api: client.ApiClient, namespace: str, plural: str, name: str) -> dict[str, Any]:
    custom: Any = client.CustomObjectsApi(api)
    obj: dict[str, Any] = await custom.get_namespaced_custom_object(*NATIVE, namespace, plural, name)
    return obj


def condition(group: dict[str, Any], type_: str = "PodGroupInitiallyScheduled") -> dict[str, Any] | None:
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


async def bound(api: client.ApiClient, namespace: str) -> dict[str, str | None]:
    core: Any = client.CoreV1Api(api)
    pods = await list_all(core.list_namespaced_pod, namespace)
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}


async def test_the_control_plane_serves_workloads_and_podgroups(
    api: client.ApiClient, namespace: str
) -> None:
    """The gates are on: the objects are stored with their policy and topology constraint (a
    field behind an off gate would be dropped), and the status subresource takes conditions."""
    await create(
        api, make_workload("job", namespace=namespace, templates={"workers": 4}, topology_key="rack")
    )
    await create(
        api,
        make_native_pod_group(
            "job-workers", namespace=namespace, min_count=4, workload=("job", "workers"), topology_key="rack"
        ),
    )
    workload = await native(api, namespace, "workloads", "job")
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert workload["spec"]["podGroupTemplates"][0]["schedulingConstraints"] == {
        "topology": [{"key": "rack"}]
    }
    group = await native(api, namespace, "podgroups", "job-workers")
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": "rack"}]}
    assert group["spec"]["workloadRef"] == {"workloadName": "job", "templateName": "workers"}
    pod = await create(api, make_pod("w-0", namespace=namespace, scheduling_group="job-workers"))
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "job-workers"}


def gated(op: OperatorProcess) -> int:
    """``scheduler_pending_pods{queue="gated"}``: pods held at PreEnqueue, never tried."""
    with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith('scheduler_pending_pods{queue="gated"}'):
                return int(float(line.split()[-1]))
    return 0


async def wait_gated(op: OperatorProcess, n: int, what: str) -> None:
    try:
        await wait_for(lambda: gated(op) == n, 20, what=f"{n} gated: {what}")
    except TimeoutError:
        print(op.tail(80))
        raise


async def wait_bound(
    api: client.ApiClient, namespace: str, names: list[str], what: str
) -> dict[str, str | None]:
    async def all_bound() -> dict[str, str | None] | None:
        b = await bound(api, namespace)
        return b if all(b.get(n) for n in names) else None

    return await wait_for(all_bound, 30, what=what)


async def test_native_and_plugins_gangs_of_one_name_coexist(
    clean: client.ApiClient, namespace: str, control_plane: ControlPlane, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(4)])
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    # two PodGroups named "train": a native one (minCount 2) and a scheduler-plugins one (minMember 2)
    await create(api, make_workload("train", namespace=namespace, templates={"workers": 2}))
    await create(
        api, make_native_pod_group("train", namespace=namespace, min_count=2, workload=("train", "workers"))
    )
    await create(api, make_pod_group("train", namespace=namespace, min_member=2))

    def member(name: str, *, native: bool) -> dict[str, Any]:
        group = "train"
        return make_pod(
            name,
            namespace=namespace,
            gpus=8,
            scheduler_name=sched,
            scheduling_group=group if native else None,
            pod_group=None if native else group,
        )

    # one member of each first: neither gang has its quorum, so nothing may bind (no key collision:
    # merged into one "train" gang the two would make a quorum of 2)
    await create_many(api, [member("native-0", native=True), member("plugins-0", native=False)])
    await wait_gated(operator, 2, "one member of each train, below its quorum")
    assert not any((await bound(api, namespace)).values())
    await create_many(api, [member("native-1", native=True), member("plugins-1", native=False)])
    placed = await wait_bound(
        api, namespace, ["native-0", "native-1", "plugins-0", "plugins-1"], "both gangs bound"
    )
    assert len(set(placed.values())) == 4  # 8 GPUs each: one node per member

    async def scheduled() -> dict[str, Any] | None:
        cond = condition(await native(api, namespace, "podgroups", "train"))
        return cond if cond and cond["status"] == "True" else None

    cond = await wait_for(scheduled, 20, what="PodGroupInitiallyScheduled=True on the native train")
    assert cond["reason"] == "Scheduled" and cond["lastTransitionTime"]
    # scheduler-plugins' status is still written as before, on its own PodGroup
    custom: Any = client.CustomObjectsApi(api)

    async def plugins_scheduled() -> dict[str, Any] | None:
        obj = await custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "train"
        )
        status = obj.get("status") or {}
        return status if status.get("phase") == "Scheduling" and status.get("scheduleStartTime") else None

    assert "scheduled" not in await wait_for(plugins_scheduled, 20, what="scheduler-plugins train Scheduling")
    await _full_gang_waits_with_its_condition(api, namespace, sched)
    await _missing_native_group_waits(api, namespace, sched, control_plane, operator)


async def _full_gang_waits_with_its_condition(api: client.ApiClient, namespace: str, sched: str) -> None:
    """The cluster is full: a native gang of 2 binds nothing, its condition says why, and a
    condition another controller wrote on the same PodGroup stays."""
    await create(api, make_native_pod_group("big", namespace=namespace, min_count=2))
    custom: Any = client.CustomObjectsApi(api)
    foreign = {
        "type": "example.com/Audited",
        "status": "True",
        "reason": "Checked",
        "message": "written by someone else",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await custom.patch_namespaced_custom_object_status(
        *NATIVE,
        namespace,
        "podgroups",
        "big",
        {"status": {"conditions": [foreign]}},
        _content_type="application/merge-patch+json",
    )
    await create_many(
        api,
        [
            make_pod(f"big-{i}", namespace=namespace, gpus=8, scheduler_name=sched, scheduling_group="big")
            for i in range(2)
        ],
    )

    async def unschedulable() -> dict[str, Any] | None:
        cond = condition(await native(api, namespace, "podgroups", "big"))
        return cond if cond and cond["status"] == "False" else None

    cond = await wait_for(unschedulable, 30, what="PodGroupInitiallyScheduled=False on big")
    assert cond["reason"] == "Unschedulable"
    assert "0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in cond["message"]
    assert f"pod group {namespace}/big@scheduling.k8s.io" in cond["message"]
    assert "minCount 2" in cond["message"]
    assert condition(await native(api, namespace, "podgroups", "big"), "example.com/Audited") == foreign
    b = await bound(api, namespace)
    assert b["big-0"] is None and b["big-1"] is None
    core: Any = client.CoreV1Api(api)
    for i in range(2):
        await core.delete_namespaced_pod(f"big-{i}", namespace, grace_period_seconds=0)


async def _missing_native_group_waits(
    api: client.ApiClient, namespace: str, sched: str, control_plane: ControlPlane, op: OperatorProcess
) -> None:
    """A pod naming a native PodGroup that does not exist waits (gated, never tried, though a node
    is free) with a message naming it, and is placed once the PodGroup appears."""
    core: Any = client.CoreV1Api(api)
    await core.delete_namespaced_pod("native-0", namespace, grace_period_seconds=0)  # frees a node
    await create(
        api, make_pod("orphan", namespace=namespace, gpus=8, scheduler_name=sched, scheduling_group="later")
    )
    await wait_gated(op, 1, "orphan, its PodGroup missing")
    assert (await bound(api, namespace))["orphan"] is None

    def explain() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "shoal.cli", "explain", f"{namespace}/orphan"]
        argv += ["--kubeconfig", str(control_plane.kubeconfig)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=python_env())

    out = await asyncio.to_thread(explain)
    assert f"PodGroup {namespace}/later@scheduling.k8s.io not found" in out.stdout, out.stdout + out.stderr
    await create(api, make_native_pod_group("later", namespace=namespace, min_count=None))  # basic
    await wait_bound(api, namespace, ["orphan"], "orphan bound once its (basic) PodGroup exists")
    await wait_gated(op, 0, "nothing left gated")


async def run_native_gangs(
    api: client.ApiClient, namespace: str, scheduler: str, priority_class: str
) -> dict[str, Any]:
    """On 3 nodes of 8 GPUs: gang ``fits`` (2 × 8 GPUs) binds, then gang ``toobig`` (2 × 8 GPUs,
    room for one) binds nothing, and gang ``mixed`` (``priority_class``, one member of another
    priority) binds nothing either: refused with an error. Returns each group's bound members and
    condition."""
    for name in ("fits", "toobig"):
        await create(api, make_native_pod_group(name, namespace=namespace, min_count=2))
    mixed = make_native_pod_group("mixed", namespace=namespace, min_count=2)
    mixed["spec"]["priorityClassName"] = priority_class
    await create(api, mixed)

    def members(group: str) -> list[dict[str, Any]]:
        return [
            make_pod(
                f"{group}-{i}", namespace=namespace, gpus=8, scheduler_name=scheduler, scheduling_group=group
            )
            for i in range(2)
        ]

    await create_many(api, members("fits"))
    await wait_bound(api, namespace, ["fits-0", "fits-1"], f"{scheduler}: gang fits bound")
    await create_many(api, members("toobig"))
    await create_many(
        api,
        [
            make_pod(
                f"mixed-{i}",
                namespace=namespace,
                gpus=1,
                scheduler_name=scheduler,
                scheduling_group="mixed",
                priority_class=klass,
            )
            for i, klass in enumerate((priority_class, None))
        ],
    )
    groups = ("fits", "toobig", "mixed")

    async def conditions() -> dict[str, dict[str, Any]] | None:
        found = {g: condition(await native(api, namespace, "podgroups", g)) for g in groups}
        out = {g: c for g, c in found.items() if c}
        settled = len(out) == len(groups) and all(out[g]["status"] == "False" for g in ("toobig", "mixed"))
        return out if settled else None

    conds = await wait_for(conditions, 60, what=f"{scheduler}: the native PodGroups' conditions")
    placed = await bound(api, namespace)
    return {
        g: (
            sum(1 for n, node in placed.items() if n.startswith(g) and node),
            conds[g]["status"],
            conds[g]["reason"],
        )
        for g in groups
    } | {"messages": {g: conds[g]["message"] for g in conds}}


async def test_native_gangs_as_kube_scheduler_schedules_them(
    clean: client.ApiClient, crds: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    """kube-scheduler 1.37 with the gates on (its GangScheduling plugin) and shoal, on the same
    native gangs: the same members bound, the same PodGroupInitiallyScheduled status and reason."""
    api = clean
    core: Any = client.CoreV1Api(api)
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(3)])
    spaces = [f"native-kube-{uuid.uuid4().hex[:6]}", f"native-shoal-{uuid.uuid4().hex[:6]}"]
    for ns in spaces:
        await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    klass = f"gang-{uuid.uuid4().hex[:6]}"
    await create(api, make_priority_class(klass, 777))
    with KubeSchedulerProcess(crds.kubeconfig, tmp_path / "kube-scheduler"):
        kube = await run_native_gangs(api, spaces[0], "default-scheduler", klass)
    await core.delete_collection_namespaced_pod(spaces[0], grace_period_seconds=0)
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    ours = await run_native_gangs(api, spaces[1], sched, klass)
    print("kube-scheduler:", kube["messages"], "\nshoal:", ours["messages"])
    assert kube["fits"] == ours["fits"] == (2, "True", "Scheduled")
    assert kube["toobig"] == ours["toobig"] == (0, "False", "Unschedulable")
    # a member whose priority is not its PodGroup's: an error for both, retried; 1.38 names it
    # PodGroupError (its runtime validation), and so does shoal on a 1.38 API server
    newer = Binaries.locate().kube_version >= "v1.38"
    reason = "PodGroupError" if newer else "SchedulerError"
    assert kube["mixed"] == ours["mixed"] == (0, "False", reason)
    # 1.37: "...the same priority as the pod group's priority"; 1.38: "...as the root pod group's"
    assert "pod group's priority, got" in kube["messages"]["mixed"]
    assert "every pod of a pod group must have the group's priority" in ours["messages"]["mixed"]
    for ns in spaces:
        await core.delete_namespace(ns)


async def test_a_placed_gang_says_when_it_falls_below_min_count_and_when_it_is_whole_again(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """PodGroupSatisfied (KEP-6413's proposed condition): True once the gang is placed; a member
    deleted makes it False (BelowMinCount) with a Warning event on the PodGroup; a replacement
    bound makes it True again. PodGroupInitiallyScheduled stays True throughout (it is final)."""
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"h{i}", gpus=8) for i in range(3)])
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    await create(api, make_native_pod_group("pair", namespace=namespace, min_count=2))

    def member(name: str) -> dict[str, Any]:
        return make_pod(name, namespace=namespace, gpus=8, scheduler_name=sched, scheduling_group="pair")

    await create_many(api, [member("a"), member("b")])
    await wait_bound(api, namespace, ["a", "b"], "the pair bound")

    async def satisfied(status: str) -> dict[str, Any] | None:
        cond = condition(await native(api, namespace, "podgroups", "pair"), "PodGroupSatisfied")
        return cond if cond and cond["status"] == status else None

    whole = await wait_for(lambda: satisfied("True"), 20, what="PodGroupSatisfied=True")
    assert whole["reason"] == "MinCountScheduled"
    core: Any = client.CoreV1Api(api)
    await core.delete_namespaced_pod("b", namespace, grace_period_seconds=0)
    broken = await wait_for(lambda: satisfied("False"), 20, what="PodGroupSatisfied=False")
    assert broken["reason"] == "BelowMinCount" and "1 members scheduled" in broken["message"]
    initially = condition(await native(api, namespace, "podgroups", "pair"))
    assert initially is not None and initially["status"] == "True"  # final: it stays

    async def warned() -> list[dict[str, Any]]:
        events: Any = client.EventsV1Api(api)
        listed = await events.list_namespaced_event(namespace)
        return [
            e
            for e in listed.to_dict()["items"]
            if (e.get("regarding") or {}).get("kind") == "PodGroup" and e.get("reason") == "BelowMinCount"
        ]

    event = (await wait_for(warned, 20, what="a Warning event on the PodGroup"))[0]
    assert event["type"] == "Warning" and event["regarding"]["name"] == "pair"
    await create(api, member("c"))
    await wait_bound(api, namespace, ["a", "c"], "the replacement bound")
    again = await wait_for(lambda: satisfied("True"), 20, what="PodGroupSatisfied=True again")
    assert again["lastTransitionTime"] >= broken["lastTransitionTime"]
