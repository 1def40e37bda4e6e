"""Binder: posts a v1 Binding carrying the pod's UID (kube-scheduler's DefaultBinder).

Why the UID: a pod deleted and recreated under the same name between the cycle and the binding
must not be bound by mistake; the API server refuses a Binding whose UID does not match (409).
A 409 also means someone else bound the pod first: the scheduler forgets it and does not retry —
unless the API server says the pod still has ``spec.schedulingGates`` (also a 409): that pod is
retried with backoff.

kubernetes-asyncio cannot deserialize the reply of ``pods/binding`` (it is a Status, not a
Binding: "Invalid value for `target`"); the call goes through :mod:`shoal.kube.rest`, which
returns the status code and the raw reply.
"""

from __future__ import annotations

import asyncio

import aiohttp
from kubernetes_asyncio import client

from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.kube.rest import RawClient, message_of

#: what the API server says when it refuses to bind a gated pod (409, like a lost race)
GATED_CONFLICT = "non-empty .spec.schedulingGates"


async def post_binding(raw: RawClient, namespace: str, name: str, uid: str, node: str) -> tuple[int, str]:
    """POST pods/binding; returns (HTTP status, message). Never raises for an HTTP error."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    code, reply = await raw.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)
    return code, "" if code < 300 else message_of(reply)


class KubeBinder:
    """The Binder the Kubernetes operator gives DefaultBinder."""

    def __init__(self, api: client.ApiClient, *, timeout: float = 30.0, concurrency: int = 64) -> None:
        self.raw = RawClient(api)
        self.timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)  # bounded in-flight POSTs, like a client QPS cap

    async def bind(self, pod: PodInfo, node: str) -> Status:
        try:
            async with self._slots:
                code, message = await asyncio.wait_for(
                    post_binding(self.raw, pod.namespace, pod.name, pod.uid, node), self.timeout
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Status.error(f"binding {pod.key} to {node}: {type(exc).__name__}: {exc}")
        if code < 300:
            return Status()
        if code == 409 and GATED_CONFLICT in message:
            # Not "someone else bound it": the pod still has scheduling gates (a profile without
            # SchedulingGates cannot get here, shoal refuses such pods first). Retry with backoff.
            return Status.error(f"binding {pod.key} to {node}: {message}")
        if code == 409:
            return Status.error(f"binding {pod.key} to {node}: {message}", requeue=False)
        if code == 404:
            # the pod is gone (it will arrive as DELETED) or the node vanished: retry decides
            return Status.error(f"binding {pod.key} to {node}: {message}")
        return Status.error(f"binding {pod.key} to {node}: HTTP {code}: {message}")
