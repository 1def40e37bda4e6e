"""``shoal explain`` on the real API server: -n, --context, -o json, one line for a missing pod or
namespace, and only the profile the pod uses (issue 16 parts 6 and 7)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from shoal.testing.cluster import create, create_many
from shoal.testing.controlplane import ControlPlane, python_env
from shoal.testing.objects import make_node, make_pod
from tests.integration.test_operator import profile

pytestmark = pytest.mark.slow


async def explain(control_plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "shoal.cli",
        "explain",
        *args,
        "--kubeconfig",
        str(control_plane.kubeconfig),
    ]
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, env=python_env()
    )


async def test_explain_flags_documents_and_one_line_errors(
    clean: client.ApiClient, namespace: str, control_plane: ControlPlane
) -> None:
    api = clean
    sched, other = f"s-{uuid.uuid4().hex[:6]}", f"o-{uuid.uuid4().hex[:6]}"
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    await create_many(api, [make_node("small", gpus=1), make_node("tainted", gpus=8, taints=[taint])])
    await create(api, profile(sched))
    # another scheduler's profile is invalid: none of this pod's business
    await create(api, profile(other, plugins={"filter": [{"name": "Nope"}]}))
    await create(api, make_pod("big", namespace=namespace, gpus=4, scheduler_name=sched))

    out = await explain(control_plane, "big", "-n", namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert (doc["pod"], doc["profile"], doc["schedulerName"], doc["node"]) == (
        f"{namespace}/big",
        sched,
        sched,
        None,
    )
    assert doc["message"] == (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."
    )
    assert {n["name"]: n["plugin"] for n in doc["nodes"]} == {
        "small": "NodeResourcesFit",
        "tainted": "TaintToleration",
    }
    assert all(n["result"] == "rejected" for n in doc["nodes"])

    # text names only the pod's profile; yaml is the same document; --context picks the context
    context = yaml.safe_load(control_plane.kubeconfig.read_text())["current-context"]
    text = await explain(control_plane, f"{namespace}/big", "--context", context)
    assert text.returncode == 0 and "rejected by TaintToleration" in text.stdout
    assert other not in text.stdout and "invalid" not in text.stdout
    as_yaml = await explain(control_plane, f"{namespace}/big", "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == doc

    for args, line in (
        ((f"{namespace}/ghost",), f"shoal: error: pod {namespace}/ghost not found"),
        (("ghost", "-n", "no-such-ns"), "shoal: error: namespace 'no-such-ns' not found"),
        ((f"{namespace}/big", "--context", "nope"), "has no context 'nope'"),
    ):
        failed = await explain(control_plane, *args)
        assert failed.returncode == 1 and failed.stdout == "", args
        assert len(failed.stderr.splitlines()) == 1 and "Traceback" not in failed.stderr, failed.stderr
        assert line in failed.stderr, failed.stderr
