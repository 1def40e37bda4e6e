"""A profile converted from scheduler-plugins' own chart configuration works on the real API
server: the CRD admits it, the operator marks it Ready, and a pod naming
``scheduler-plugins-scheduler`` (as KubeRay's do) is bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from shoal.migrate import convert, load_config
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry
from shoal.testing.cluster import OperatorProcess, create, wait_for
from shoal.testing.objects import make_node, make_pod

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).resolve().parents[1] / "data" / "scheduler-plugins" / "as-a-second-scheduler.yaml"


async def test_converted_scheduler_plugins_profile_schedules(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    api = clean
    result = convert(load_config(CONFIG.read_text(), CONFIG.name), load_registry(), DEFAULT_PLUGINS)
    (profile,) = yaml.safe_load_all(result.yaml())
    name = profile["metadata"]["name"]
    await create(api, make_node("n1", cpu="4", gpus=8))
    await create(api, profile)
    custom: Any = client.CustomObjectsApi(api)

    async def ready() -> dict[str, Any] | None:
        obj = await custom.get_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles", name)
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Ready" and c["status"] == "True"), None)

    await wait_for(ready, 20, what=f"converted profile {name} Ready")
    await create(api, make_pod("ray-worker", namespace=namespace, cpu="1", scheduler_name=name))
    core: Any = client.CoreV1Api(api)

    async def bound() -> str | None:
        node: str | None = (await core.read_namespaced_pod("ray-worker", namespace)).spec.node_name
        return node

    assert await wait_for(bound, 30, what="pod bound by the converted profile") == "n1"
