"""The operator on the real API server: binding, gangs, live profiles, statuses, metrics."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.core.framework.runtime import PLUGIN_METRICS_EVERY
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane, python_env
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_profile

pytestmark = pytest.mark.slow


def profile(name: str, scheduler: str | None = None, **spec: Any) -> dict[str, Any]:
    return make_profile(name, {**DEFAULT_PROFILE_SPEC, **spec}, scheduler_name=scheduler or name)


async def pods_by_name(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    core: Any = client.CoreV1Api(api)
    return {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, namespace)}


async def bound(api: client.ApiClient, namespace: str) -> dict[str, str | None]:
    return {n: p["spec"].get("nodeName") for n, p in (await pods_by_name(api, namespace)).items()}


async def events_for(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    ev: Any = client.EventsV1Api(api)
    return await list_all(ev.list_namespaced_event, namespace)


async def profile_ready(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    custom: Any = client.CustomObjectsApi(api)
    obj = await custom.get_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles", name)
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), None)


async def wait_profile(api: client.ApiClient, name: str, status: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        cond = await profile_ready(api, name)
        return cond if cond and cond["status"] == status and cond.get("observedGeneration") else None

    result: dict[str, Any] = await wait_for(check, 20, what=f"profile {name} Ready={status}")
    return result


async def test_binds_own_pods_counts_and_leaves_others(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node("full", cpu="4", gpus=8), make_node("free", cpu="4", gpus=8)])
    # another scheduler's pods fill "full" (bound directly, as kubelet-owned or default-scheduler pods)
    others = [
        make_pod(
            f"other-{i}",
            namespace=namespace,
            cpu="1",
            gpus=2,
            scheduler_name="default-scheduler",
            node_name="full",
        )
        for i in range(4)
    ]
    await create_many(api, others)
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    mine = [
        make_pod(f"mine-{i}", namespace=namespace, cpu="1", gpus=1, scheduler_name=sched) for i in range(4)
    ]
    untouched = make_pod("not-mine", namespace=namespace, scheduler_name="some-other-scheduler")
    await create_many(api, [*mine, untouched])

    async def all_bound() -> bool:
        b = await bound(api, namespace)
        return all(b[f"mine-{i}"] for i in range(4))

    await wait_for(all_bound, 30, what="own pods bound")
    placements = await bound(api, namespace)
    assert {placements[f"mine-{i}"] for i in range(4)} == {"free"}  # "full" is full: not over-committed
    assert placements["not-mine"] is None

    async def four_scheduled() -> list[dict[str, Any]]:
        # events are written behind the binds: wait for them rather than read them once
        evs = await events_for(api, namespace)
        return evs if sum(e["reason"] == "Scheduled" for e in evs) >= 4 else []

    events = await wait_for(four_scheduled, 30, what="4 Scheduled events")
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert len(scheduled) == 4
    assert scheduled[0]["note"].startswith(f"Successfully assigned {namespace}/mine-")
    assert scheduled[0]["reportingController"] == sched
    assert not any(e["regarding"]["name"] == "not-mine" for e in events)


async def test_gangs_and_failed_scheduling(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(8)])
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    await create(api, make_pod_group("train", namespace=namespace, min_member=8))
    await create(api, make_pod_group("toobig", namespace=namespace, min_member=3))
    gang = [
        make_pod(f"train-{i}", namespace=namespace, gpus=8, scheduler_name=sched, pod_group="train")
        for i in range(8)
    ]
    await create_many(api, gang)

    async def gang_bound() -> bool:
        b = await bound(api, namespace)
        return all(b.get(f"train-{i}") for i in range(8))

    await wait_for(gang_bound, 30, what="8-pod gang bound")
    assert len({n for k, n in (await bound(api, namespace)).items() if k.startswith("train-")}) == 8
    # the cluster is now full: a 3-pod gang cannot fit and must bind nothing
    big = [
        make_pod(f"toobig-{i}", namespace=namespace, gpus=8, scheduler_name=sched, pod_group="toobig")
        for i in range(3)
    ]
    await create_many(api, big)

    async def failed_events() -> list[dict[str, Any]]:
        evs = [e for e in await events_for(api, namespace) if e["reason"] == "FailedScheduling"]
        return evs if {e["regarding"]["name"] for e in evs} >= {f"toobig-{i}" for i in range(3)} else []

    evs = await wait_for(failed_events, 30, what="FailedScheduling for the gang")
    assert all(n is None for k, n in (await bound(api, namespace)).items() if k.startswith("toobig-"))
    assert "0/8 nodes are available: 8 Insufficient nvidia.com/gpu." in evs[0]["note"]
    assert "pod group" in evs[0]["note"]

    async def unschedulable_condition() -> dict[str, Any] | None:
        # patched by its own write, which may land after the events
        pod = (await pods_by_name(api, namespace))["toobig-0"]
        conds = pod["status"].get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    cond = await wait_for(unschedulable_condition, 30, what="PodScheduled=False on toobig-0")
    assert cond["reason"] == "Unschedulable"

    async def group_status() -> dict[str, Any] | None:
        custom: Any = client.CustomObjectsApi(api)
        obj = await custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "train"
        )
        status = obj.get("status") or {}
        return status if status.get("phase") == "Scheduling" and status.get("scheduleStartTime") else None

    status = await wait_for(group_status, 20, what="PodGroup status")
    assert "scheduled" not in status  # bound, not running (no kubelet): Scheduling, as upstream


async def test_profile_edits_apply_live_and_bad_ones_are_reported(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    custom: Any = client.CustomObjectsApi(api)
    sched = f"s-{uuid.uuid4().hex[:6]}"
    # "busy" has GPUs in use but little GPU memory left; "idle" the opposite
    await create_many(
        api,
        [
            make_node("busy", gpus=8, gpu_memory_free_gb=10, gfd_labels=False),
            make_node("idle", gpus=8, gpu_memory_free_gb=100, gfd_labels=False),
        ],
    )
    await create(api, make_pod("seed", namespace=namespace, gpus=4, scheduler_name="x", node_name="busy"))
    packing: dict[str, Any] = {
        "plugins": {"score": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "GPUMemory", "weight": 1}]}
    }
    await create(api, profile(sched, **packing))
    await wait_profile(api, sched, "True")
    await create(api, make_pod("a", namespace=namespace, gpus=1, gpu_memory_gb=2, scheduler_name=sched))
    await wait_for(lambda: _bound_one(api, namespace, "a"), 20, what="a bound")
    assert (await bound(api, namespace))["a"] == "busy"  # packing GPUs outweighs GPU memory
    # edit the weights only, no restart: GPU memory now dominates
    memory_first = {"score": [{"name": "NodeResourcesFit", "weight": 1}, {"name": "GPUMemory", "weight": 10}]}
    await custom.patch_cluster_custom_object(
        "shoal.dev",
        "v1alpha1",
        "schedulingprofiles",
        sched,
        {"spec": {"plugins": memory_first}},
        _content_type="application/merge-patch+json",
    )

    async def generation_applied() -> bool:
        obj = await custom.get_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles", sched)
        return bool((obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"])

    await wait_for(generation_applied, 20, what="edit observed")
    await create(api, make_pod("b", namespace=namespace, gpus=1, gpu_memory_gb=2, scheduler_name=sched))
    await wait_for(lambda: _bound_one(api, namespace, "b"), 20, what="b bound")
    assert (await bound(api, namespace))["b"] == "idle"
    # a bad edit (unknown plugin passes the schema) keeps the last good profile
    await custom.patch_cluster_custom_object(
        "shoal.dev",
        "v1alpha1",
        "schedulingprofiles",
        sched,
        {"spec": {"plugins": {"filter": [{"name": "NoSuchPlugin"}]}}},
        _content_type="application/merge-patch+json",
    )
    cond = await wait_profile(api, sched, "False")
    assert cond["reason"] == "InvalidSpec"
    assert 'unknown plugin "NoSuchPlugin"' in cond["message"]
    assert "still scheduling with generation 2" in cond["message"]
    await create(api, make_pod("c", namespace=namespace, gpus=1, scheduler_name=sched))
    await wait_for(lambda: _bound_one(api, namespace, "c"), 20, what="c bound with the last good profile")
    # a second profile claiming the same schedulerName is refused, the first keeps scheduling
    await create(api, profile(f"{sched}-dup", scheduler=sched))
    dup = await wait_profile(api, f"{sched}-dup", "False")
    assert dup["reason"] == "SchedulerNameConflict"
    await create(api, make_pod("d", namespace=namespace, gpus=1, scheduler_name=sched))
    await wait_for(lambda: _bound_one(api, namespace, "d"), 20, what="d bound")


async def _bound_one(api: client.ApiClient, namespace: str, name: str) -> bool:
    return bool((await bound(api, namespace)).get(name))


async def test_no_annotations_or_finalizers_on_pods_and_nodes(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("n", gpus=8))
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    await create_many(api, [make_pod(f"p{i}", namespace=namespace, scheduler_name=sched) for i in range(3)])
    await create(api, make_pod("never", namespace=namespace, gpus=64, scheduler_name=sched))

    async def settled() -> bool:
        b = await bound(api, namespace)
        return all(b[f"p{i}"] for i in range(3))

    await wait_for(settled, 30, what="pods bound")
    await asyncio.sleep(1)
    core: Any = client.CoreV1Api(api)
    for obj in [*await list_all(core.list_namespaced_pod, namespace), *await list_all(core.list_node)]:
        meta = obj["metadata"]
        assert not [
            a
            for a in (meta.get("annotations") or {})
            if "kopf" in a or ("shoal.dev/" in a and a != "shoal.dev/gpu-memory-gb")
        ]
        assert not meta.get("finalizers")


def sample_sum(text: str, name: str, **labels: str) -> float | None:
    """Sum of the samples of ``name`` whose labels include ``labels``; None when there is none."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total, seen = total + float(value), True
    return total if seen else None


async def test_metrics_endpoint_serves_kube_scheduler_series(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    # earlier tests in this module scheduled a gang (Permit gates) and an unfit gang; plugin
    # timings are sampled in one cycle of PLUGIN_METRICS_EVERY per profile, so this test's own
    # profile schedules enough pods for a sampled one, and the series is waited for
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("m", gpus=8))
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    count = 2 * PLUGIN_METRICS_EVERY
    await create_many(
        api, [make_pod(f"m{i}", namespace=namespace, scheduler_name=sched) for i in range(count)]
    )

    def get(path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}{path}", timeout=5) as resp:
            return int(resp.status), str(resp.read().decode())

    async def sampled() -> str | None:
        _, text = await asyncio.to_thread(get, "/metrics")
        value = sample_sum(
            text, "scheduler_plugin_execution_duration_seconds_count", plugin="NodeResourcesFit"
        )
        return text if value else None

    text = await wait_for(sampled, 30, what="a sampled cycle's plugin timings")
    for name, labels in (
        ("scheduler_schedule_attempts_total", {"result": "scheduled"}),
        ("scheduler_schedule_attempts_total", {"result": "unschedulable"}),
        ("scheduler_scheduling_attempt_duration_seconds_count", {"result": "scheduled"}),
        ("scheduler_framework_extension_point_duration_seconds_count", {"extension_point": "Filter"}),
        ("scheduler_framework_extension_point_duration_seconds_count", {"extension_point": "Bind"}),
        ("scheduler_permit_wait_duration_seconds_count", {"result": "allowed"}),
        ("scheduler_plugin_execution_duration_seconds_count", {"plugin": "NodeResourcesFit"}),
        ("shoal_leader", {}),
    ):
        value = sample_sum(text, name, **labels)
        assert value is not None and value > 0, (name, labels, value)
    for queue in ("active", "backoff", "unschedulable", "gated"):
        assert sample_sum(text, "scheduler_pending_pods", queue=queue) is not None, queue
    for path in ("/healthz", "/livez", "/readyz"):
        status, _ = await asyncio.to_thread(get, path)
        assert status == 200, path


async def test_explain_cli(
    clean: client.ApiClient, namespace: str, control_plane: ControlPlane, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    await create_many(api, [make_node("small", gpus=1), make_node("tainted", gpus=8, taints=[taint])])
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    await create(api, make_pod("big", namespace=namespace, gpus=4, scheduler_name=sched))

    def explain() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "shoal.cli", "explain", f"{namespace}/big"]
        argv += ["--kubeconfig", str(control_plane.kubeconfig)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=python_env())

    out = await asyncio.to_thread(explain)
    assert out.returncode == 0, out.stderr
    assert (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) had untolerated taint(s)." in out.stdout
    )
    assert "rejected by TaintToleration" in out.stdout
    assert "rejected by NodeResourcesFit" in out.stdout
    # the profile turns invalid: explain says the running scheduler keeps its last valid generation
    custom: Any = client.CustomObjectsApi(api)
    await custom.patch_cluster_custom_object(
        "shoal.dev",
        "v1alpha1",
        "schedulingprofiles",
        sched,
        {"spec": {"plugins": {"filter": [{"name": "Nope"}]}}},
        _content_type="application/merge-patch+json",
    )
    await wait_profile(api, sched, "False")
    out = await asyncio.to_thread(explain)
    assert out.returncode == 1
    assert f"SchedulingProfile {sched} is invalid now" in out.stdout and "last valid generation" in out.stdout
