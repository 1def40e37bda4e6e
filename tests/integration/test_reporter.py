"""KubeReporter on the real API server: what it writes late must not contradict what happened."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.core.state.objects import PodInfo
from shoal.kube.reporter import KubeReporter
from shoal.kube.wire import micro_time
from shoal.testing.cluster import create, list_all
from shoal.testing.objects import make_node, make_pod

pytestmark = pytest.mark.slow


async def test_writes_behind_a_bind_keep_their_order_and_do_not_unset_pod_scheduled(
    clean: client.ApiClient, namespace: str
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    await create(api, make_node("n1", cpu="8", memory="32Gi"))
    pod = PodInfo.from_dict(await create(api, make_pod("p", namespace=namespace, cpu="1")))
    reporter = KubeReporter(api, instance="test")

    # an attempt fails, the next one binds: both reports are queued before any worker writes
    reporter.unschedulable(pod, "0/1 nodes are available: 1 Insufficient cpu.", "gpu-scheduler")
    between = micro_time()
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    await core.create_namespaced_binding(namespace, binding, _preload_content=False)
    reporter.scheduled(pod, "n1", "gpu-scheduler")
    reporter.start()
    try:
        await reporter.flush()
    finally:
        await reporter.stop()

    # events carry the time of what they report: the failure before the success
    ev: Any = client.EventsV1Api(api)
    events = sorted(await list_all(ev.list_namespaced_event, namespace), key=lambda e: e["eventTime"])
    assert [e["reason"] for e in events] == ["FailedScheduling", "Scheduled"]
    assert events[0]["eventTime"] <= between <= events[1]["eventTime"]

    # the queued PodScheduled=False was dropped: the API server's True from the binding stands
    obj = (await list_all(core.list_namespaced_pod, namespace))[0]
    scheduled = [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]
