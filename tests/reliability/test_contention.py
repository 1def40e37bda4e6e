"""Contention on the real control plane: competing gangs, small pods behind a big gang,
a gang that can never fit."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from shoal.testing.cluster import create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_pod_group
from tests.reliability.conftest import assert_invariants, operator, placements, profile, wait_ready


def gang(name: str, namespace: str, sched: str, members: int, gpus: int = 8) -> list[dict[str, Any]]:
    return [make_pod_group(name, namespace=namespace, min_member=members)] + [
        make_pod(f"{name}-{i}", namespace=namespace, gpus=gpus, scheduler_name=sched, pod_group=name)
        for i in range(members)
    ]


def count(p: dict[str, str | None], prefix: str) -> int:
    return sum(1 for k, v in p.items() if k.startswith(prefix) and v)


async def test_two_gangs_of_60_percent_finish_one_after_the_other(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(10)])
    await create(api, profile(sched))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create_many(api, gang("alpha", namespace, sched, 6) + gang("beta", namespace, sched, 6))

        async def one_done() -> str | None:
            p = await placements(api, namespace)
            done = [g for g in ("alpha", "beta") if count(p, f"{g}-") == 6]
            return done[0] if done else None

        first = await wait_for(one_done, 30, what="one gang complete")
        second = "beta" if first == "alpha" else "alpha"
        await asyncio.sleep(2)
        p = await placements(api, namespace)
        assert count(p, f"{second}-") == 0  # the other holds nothing while waiting
        await assert_invariants(api)
        core: Any = client.CoreV1Api(api)
        for i in range(6):  # the first job finishes
            await core.delete_namespaced_pod(f"{first}-{i}", namespace, grace_period_seconds=0)

        async def second_done() -> bool:
            return count(await placements(api, namespace), f"{second}-") == 6

        await wait_for(second_done, 60, what="the second gang after the first finished")
    await assert_invariants(api)


async def test_small_pods_flow_while_a_big_gang_cannot_fit_and_it_holds_nothing(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [make_node(f"g{i}", gpus=8) for i in range(4)])
    await create(api, profile(sched))
    op = operator(crds, tmp_path / "op.log")
    with op:
        wait_ready(op)
        await create_many(api, gang("never", namespace, sched, 5))  # needs 5 whole nodes of 4
        for wave in range(4):  # a stream of small pods while the gang keeps failing
            await create_many(
                api,
                [
                    make_pod(f"small-{wave}-{i}", namespace=namespace, gpus=1, scheduler_name=sched)
                    for i in range(7)
                ],
            )
            await asyncio.sleep(0.5)

        async def smalls_done() -> bool:
            return count(await placements(api, namespace), "small-") == 28

        await wait_for(smalls_done, 60, what="every small pod placed")
        p = await placements(api, namespace)
        assert count(p, "never-") == 0
        # 28 of 32 GPUs are used by small pods: the gang reserved nothing
        await assert_invariants(api)
