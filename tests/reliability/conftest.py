"""Reliability scenarios on the real control plane: shared fixtures and helpers."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, list_all
from shoal.testing.controlplane import ControlPlane
from shoal.testing.invariants import check_invariants
from shoal.testing.objects import make_profile
from tests.integration.conftest import api, clean, crds, namespace, wait_ready

__all__ = [
    "api",
    "assert_invariants",
    "clean",
    "crds",
    "namespace",
    "operator",
    "profile",
    "record",
    "wait_ready",
]

ROOT = Path(__file__).resolve().parents[2]
# The plugin modules' own folder goes on PYTHONPATH (never the repository root, where operator/
# would shadow the standard library's operator module).
#: the fault plugins on the operator's path, after whatever path the tests run with
FAULT_ENV = {
    "SHOAL_PLUGINS": "fault_plugins,hold_permit",
    "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH"), str(ROOT / "tests" / "reliability")) if p
    ),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability" in str(item.fspath):
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.slow)


def profile(name: str, **spec: Any) -> dict[str, Any]:
    return make_profile(name, {**DEFAULT_PROFILE_SPEC, **spec}, scheduler_name=name)


def slow_bind(name: str, seconds: float, spread: bool = False) -> dict[str, Any]:
    config = [
        *DEFAULT_PROFILE_SPEC["pluginConfig"],
        {"name": "SlowBind", "args": {"seconds": seconds, "spread": spread}},
    ]
    return profile(name, plugins={"preBind": [{"name": "SlowBind"}]}, pluginConfig=config)


def operator(cp: ControlPlane, log: Path, **kwargs: Any) -> OperatorProcess:
    kwargs.setdefault("lease_name", f"rel-{uuid.uuid4().hex[:6]}")
    env = {**FAULT_ENV, **kwargs.pop("env", {})}
    return OperatorProcess(cp.kubeconfig, log, env=env, **kwargs)


async def placements(kube: client.ApiClient, ns: str) -> dict[str, str | None]:
    core: Any = client.CoreV1Api(kube)
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName") for p in await list_all(core.list_namespaced_pod, ns)
    }


async def assert_invariants(kube: client.ApiClient) -> None:
    problems = await check_invariants(kube)
    assert not problems, "\n".join(problems)


def record(name: str, **figures: Any) -> None:
    """Keep measured figures of a scenario for docs/reliability.md (printed and appended to a file)."""
    out = ROOT / "tests" / "reliability" / ".results.jsonl"
    line = json.dumps({"scenario": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **figures})
    print(line)
    with out.open("a") as f:
        f.write(line + "\n")
