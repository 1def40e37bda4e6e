"""Pods held before the queue say why where users look (issue 16 part 6): an event and a
``PodScheduled=False`` condition on the real API server, once, not one per re-evaluation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.integration.test_operator import bound, events_for, pods_by_name, profile, wait_profile

pytestmark = pytest.mark.slow


def about(events: list[dict[str, Any]], pod: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in events if e["regarding"]["name"] == pod and e["reason"] == reason]


async def test_a_gang_below_quorum_and_a_missing_pod_group_are_reported_once(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"n{i}", gpus=8) for i in range(4)])
    await create(api, profile(sched))
    await wait_profile(api, sched, "True")
    await create(api, make_pod_group("g", namespace=namespace, min_member=4))

    def member(i: int) -> dict[str, Any]:
        return make_pod(f"g-{i}", namespace=namespace, gpus=1, scheduler_name=sched, pod_group="g")

    await create(api, member(0))
    await create(api, make_pod("orphan", namespace=namespace, scheduler_name=sched, pod_group="nowhere"))

    async def reported(pod: str, reason: str) -> list[dict[str, Any]]:
        return about(await events_for(api, namespace), pod, reason)

    first = (await wait_for(lambda: reported("g-0", "WaitingForGang"), 40, what="WaitingForGang on g-0"))[0]
    assert first["type"] == "Normal" and first["reportingController"] == sched
    assert first["note"] == f"pod group {namespace}/g has 1 of the 4 pods it needs (minMember)"
    missing = await wait_for(lambda: reported("orphan", "PodGroupMissing"), 40, what="PodGroupMissing")
    assert missing[0]["type"] == "Warning"
    assert missing[0]["note"] == f"PodGroup {namespace}/nowhere not found"

    async def not_ready(pod: str) -> dict[str, Any] | None:
        obj = (await pods_by_name(api, namespace))[pod]
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    cond = await wait_for(lambda: not_ready("g-0"), 20, what="PodScheduled=False on g-0")
    assert cond["reason"] == "NotReadyForScheduling" and "has 1 of the 4 pods" in cond["message"]

    # two more members, still short of the quorum: g-0 is re-evaluated (its message would now say
    # 3 of 4) but says nothing new; the newcomers each say it once
    await create_many(api, [member(1), member(2)])
    for pod in ("g-1", "g-2"):

        async def newcomer(pod: str = pod) -> list[dict[str, Any]]:
            return await reported(pod, "WaitingForGang")

        await wait_for(newcomer, 40, what=f"WaitingForGang on {pod}")
    events = await events_for(api, namespace)
    for pod in ("g-0", "g-1", "g-2"):
        mine = about(events, pod, "WaitingForGang")
        assert len(mine) == 1 and mine[0].get("series") is None, (pod, mine)
    assert len(about(events, "orphan", "PodGroupMissing")) == 1
    assert (await bound(api, namespace))["g-0"] is None

    # the quorum: the whole gang binds
    await create(api, member(3))

    async def gang_bound() -> bool:
        b = await bound(api, namespace)
        return all(b[f"g-{i}"] for i in range(4))

    await wait_for(gang_bound, 30, what="the gang bound once its quorum exists")
