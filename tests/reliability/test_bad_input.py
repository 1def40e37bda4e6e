"""Bad input on the real control plane: invalid profiles are refused or marked not Ready while
the others keep scheduling; absurd requests get a clear reason; events stay bounded per pod."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod
from tests.reliability.conftest import assert_invariants, operator, placements, profile, wait_ready

ADMISSION = "admission"

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, spec fields, expected outcome: "admission" or a Ready=False reason, words in the message)
    (
        "unknown-plugin",
        {"plugins": {"filter": [{"name": "Telepathy"}]}},
        "InvalidSpec",
        'unknown plugin "Telepathy"',
    ),
    (
        "weight-zero",
        {"plugins": {"score": [{"name": "GPUMemory", "weight": 0}]}},
        ADMISSION,
        "greater than or equal to 1",
    ),
    (
        "weight-text",
        {"plugins": {"score": [{"name": "GPUMemory", "weight": "x"}]}},
        ADMISSION,
        "must be of type integer",
    ),
    (
        "bad-args-type",
        {"pluginConfig": [{"name": "GPUMemory", "args": {"scorePerGb": "lots"}}]},
        "InvalidSpec",
        "scorePerGb",
    ),
    (
        "bad-args-field",
        {"pluginConfig": [{"name": "Coscheduling", "args": {"timeout": 5}}]},
        "InvalidSpec",
        "args.timeout",
    ),
    ("wrong-point", {"plugins": {"bind": [{"name": "GPUMemory"}]}}, "InvalidSpec", "does not implement bind"),
    (
        "two-queuesorts",
        {"plugins": {"queueSort": [{"name": "PrioritySort"}, {"name": "X"}]}},
        ADMISSION,
        "exactly one",
    ),
    (
        "very-large",
        {"plugins": {"filter": [{"name": f"Plugin{i}"} for i in range(200)]}},
        ADMISSION,
        "must have at most 64 items",
    ),
    (
        "huge-args",
        {"pluginConfig": [{"name": "GPUMemory", "args": {f"k{i}": "v" * 100 for i in range(2000)}}]},
        "InvalidSpec",
        "Extra inputs are not permitted",
    ),
]


async def test_invalid_profiles_while_others_keep_scheduling(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    custom: Any = client.CustomObjectsApi(api)
    good = f"good-{uuid.uuid4().hex[:4]}"
    await create(api, make_node("n", gpus=8))
    await create(api, profile(good))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        outcomes: dict[str, str] = {}
        for case_id, fields, expected, words in CASES:
            name = f"bad-{case_id}"
            body = profile(name)
            body["spec"] = {**DEFAULT_PROFILE_SPEC, "schedulerName": name, **fields}
            try:
                await create(api, body)
            except client.ApiException as exc:
                assert expected == ADMISSION, f"{case_id}: refused at admission: {exc.reason}"
                assert words in str(exc.reason), f"{case_id}: {exc.reason}"
                outcomes[case_id] = "refused at admission (422)"
                continue
            assert expected != ADMISSION, f"{case_id} was admitted"

            async def not_ready(name: str = name) -> dict[str, Any] | None:
                obj = await custom.get_cluster_custom_object(
                    "shoal.dev", "v1alpha1", "schedulingprofiles", name
                )
                conds = (obj.get("status") or {}).get("conditions") or []
                return conds[0] if conds and conds[0]["status"] == "False" else None

            cond = await wait_for(not_ready, 20, what=f"{case_id} Ready=False")
            assert cond["reason"] == expected, cond
            assert words in cond["message"], cond["message"]
            outcomes[case_id] = f"Ready=False {cond['reason']}"
        # a second profile claiming the good one's schedulerName is refused, the good one unharmed
        dup = profile(f"{good}-copy")
        dup["spec"]["schedulerName"] = good
        await create(api, dup)

        async def conflict() -> bool:
            obj = await custom.get_cluster_custom_object(
                "shoal.dev", "v1alpha1", "schedulingprofiles", f"{good}-copy"
            )
            conds = (obj.get("status") or {}).get("conditions") or []
            return bool(conds) and conds[0]["reason"] == "SchedulerNameConflict"

        await wait_for(conflict, 20, what="the duplicate refused")
        await create(api, make_pod("still-scheduled", namespace=namespace, gpus=1, scheduler_name=good))

        async def bound() -> bool:
            return bool((await placements(api, namespace)).get("still-scheduled"))

        await wait_for(bound, 20, what="the good profile kept scheduling")
        assert op.alive()
        print(outcomes)
    await assert_invariants(api)


@pytest.mark.parametrize(
    ("requests", "reason"),
    [
        pytest.param({"cpu": "100000"}, "Insufficient cpu", id="cpu"),
        pytest.param({"memory": "1Pi"}, "Insufficient memory", id="memory"),
        pytest.param({"gpus": 1000}, "Insufficient nvidia.com/gpu", id="gpus"),
        pytest.param({"gpu_memory_gb": 1e9}, "Insufficient GPU memory", id="gpu-memory"),
        pytest.param(
            {"extra_requests": {"example.com/qpu": "1"}},
            "Insufficient example.com/qpu",
            id="unknown-resource",
        ),
    ],
)
async def test_absurd_requests_get_a_clear_reason(
    clean: client.ApiClient,
    namespace: str,
    crds: ControlPlane,
    tmp_path: Path,
    requests: dict[str, Any],
    reason: str,
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    # the label alone says how much GPU memory there is (no GFD labels), so one reason explains it
    nodes = [make_node(f"n{i}", gpus=8, gpu_memory_free_gb=80, gfd_labels=False) for i in range(3)]
    await create_many(api, nodes)
    await create(api, profile(sched))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create(api, make_pod("absurd", namespace=namespace, scheduler_name=sched, **requests))
        events: Any = client.EventsV1Api(api)

        async def failed() -> list[dict[str, Any]]:
            return [
                e
                for e in await list_all(events.list_namespaced_event, namespace)
                if e["reason"] == "FailedScheduling"
            ]

        evs = await wait_for(failed, 20, what="FailedScheduling")
        # then DefaultPreemption's verdict, as kube-scheduler appends it (no pod to evict here)
        assert evs[0]["note"].startswith(f"0/3 nodes are available: 3 {reason}. preemption: 0/3 nodes")
        assert (await placements(api, namespace))["absurd"] is None
    await assert_invariants(api)


async def test_events_stay_bounded_per_pod(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, profile(sched))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create(api, make_pod("too-big", namespace=namespace, gpus=16, scheduler_name=sched))
        for i in range(40):  # every node added is a reason to retry the pod
            await create(api, make_node(f"small-{i}", gpus=1))
            await asyncio.sleep(0.15)
        await asyncio.sleep(2)
        events: Any = client.EventsV1Api(api)
        failed = [
            e
            for e in await list_all(events.list_namespaced_event, namespace)
            if e["reason"] == "FailedScheduling"
        ]
        # 40 relevant events in ~6 s: retries are rate-limited by the 1 s → 10 s backoff
        assert 1 <= len(failed) <= 8, len(failed)
        print(f"{len(failed)} FailedScheduling events for 40 node additions")
    await assert_invariants(api)
