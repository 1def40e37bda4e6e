"""A profile's aliases on the real API server: a pod naming the alias (as KubeRay's pods name
``scheduler-plugins-scheduler``) is scheduled by that profile, and a conflict is reported."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow


async def ready(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    custom: Any = client.CustomObjectsApi(api)
    obj = await custom.get_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles", name)
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready" and c.get("observedGeneration")), None)


async def test_a_pod_naming_an_alias_is_scheduled_by_its_profile(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    suffix = uuid.uuid4().hex[:6]
    main, alias = f"gpu-{suffix}", f"scheduler-plugins-scheduler-{suffix}"
    await create_many(api, [make_node("n1", cpu="4", gpus=8)])
    await create(api, make_profile(main, {**DEFAULT_PROFILE_SPEC, "aliases": [alias]}, scheduler_name=main))

    async def valid() -> dict[str, Any] | None:
        cond = await ready(api, main)
        return cond if cond and cond["status"] == "True" else None

    cond = await wait_for(valid, 20, what=f"profile {main} Ready")
    assert cond["message"] == f"scheduling pods with schedulerName {main}, {alias}"
    await create(api, make_pod("ray-head", namespace=namespace, cpu="1", scheduler_name=alias))
    core: Any = client.CoreV1Api(api)

    async def bound() -> str | None:
        pod = await core.read_namespaced_pod("ray-head", namespace)
        node: str | None = pod.spec.node_name
        return node

    assert await wait_for(bound, 30, what="the alias's pod bound") == "n1"

    async def scheduled_event() -> dict[str, Any] | None:
        ev: Any = client.EventsV1Api(api)
        events = await list_all(ev.list_namespaced_event, namespace)
        return next((e for e in events if e["reason"] == "Scheduled"), None)

    event = await wait_for(scheduled_event, 30, what="Scheduled event")
    assert event["reportingController"] == alias  # as kube-scheduler: the pod's own schedulerName

    # a newer profile claiming the alias as its schedulerName owns nothing: refused
    late = f"late-{suffix}"
    await create(api, make_profile(late, dict(DEFAULT_PROFILE_SPEC), scheduler_name=alias))

    async def refused() -> dict[str, Any] | None:
        cond = await ready(api, late)
        return cond if cond and cond["reason"] == "SchedulerNameConflict" else None

    cond = await wait_for(refused, 20, what=f"profile {late} refused")
    assert f'"{main}"' in cond["message"]
    logged = await wait_for(
        lambda: f"SchedulerNameConflict: SchedulingProfile {late} " in operator.log.read_text() or None,
        10,
        what="the conflict logged",
    )
    assert logged
