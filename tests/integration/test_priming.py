"""Start-up on the real API server: the cache is primed by one listing per kind, and kopf's watch
goes on from it (``kopf_glue.continue_from_prime``) instead of listing every object again."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.kube.rest import RawClient
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_profile
from tests.integration.conftest import wait_ready

pytestmark = pytest.mark.slow

_LIST_PODS = re.compile(
    r'^apiserver_request_total\{(?=[^}]*resource="pods")(?=[^}]*scope="cluster")'
    r'(?=[^}]*subresource="")(?=[^}]*verb="LIST")[^}]*\} (\S+)$',
    re.M,
)


async def cluster_pod_lists(api: client.ApiClient) -> int:
    """How many cluster-wide LISTs of pods the API server has served (its own metric)."""
    code, text = await RawClient(api).request("GET", "/metrics", accept="text/plain")
    assert code == 200 and isinstance(text, str)
    return sum(int(float(n)) for n in _LIST_PODS.findall(text))


async def node_of(api: client.ApiClient, namespace: str, name: str) -> str | None:
    core: Any = client.CoreV1Api(api)
    resp = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    node = (await resp.json())["spec"].get("nodeName")
    return str(node) if node else None


async def test_the_watch_goes_on_from_the_priming_and_misses_nothing(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_node("n1", cpu="8", memory="32Gi"))
    await create(api, make_profile(sched, dict(DEFAULT_PROFILE_SPEC), scheduler_name=sched))
    await create(api, make_pod("before", namespace=namespace, cpu="1", scheduler_name=sched))
    lists = await cluster_pod_lists(api)

    op = OperatorProcess(
        crds.kubeconfig, tmp_path / "operator.log", identity="op-prime", lease_name=f"shoal-{sched}"
    )
    with op:
        wait_ready(op)
        # the pod known from the priming is scheduled; one created after start-up arrives by the
        # watch that went on from the priming's resourceVersion
        assert (
            await wait_for(lambda: node_of(api, namespace, "before"), 30, what="the primed pod bound") == "n1"
        )
        await create(api, make_pod("after", namespace=namespace, cpu="1", scheduler_name=sched))
        assert (
            await wait_for(lambda: node_of(api, namespace, "after"), 30, what="the watched pod bound") == "n1"
        )
        listed = await cluster_pod_lists(api) - lists

    # pods were listed cluster-wide three times: the priming, and the finished PodGroup members
    # (one listing per terminal phase). kopf's own listing and the re-list check that followed it
    # (two more listings of every pod, each replayed through kopf) are gone.
    assert listed == 3, op.tail()
