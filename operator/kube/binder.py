"""Binder: posts a v1 Binding carrying the pod's UID (kube-scheduler's DefaultBinder).

Why the UID: a pod deleted and recreated under the same name between the cycle and the binding
must not be bound by mistake; the API server refuses a Binding whose UID does not match (409).
A 409 also means someone else bound the pod first: the scheduler forgets it and does not retry.

kubernetes-asyncio cannot deserialize the reply of ``pods/binding`` (it is a Status, not a
Binding: "Invalid value for `target`"), so the call is made with ``_preload_content=False`` and
the status code is read by hand.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from shoal.core.objects import PodInfo
from shoal.core.status import Status


async def post_binding(core: Any, namespace: str, name: str, uid: str, node: str) -> tuple[int, str]:
    """POST pods/binding; returns (HTTP status, message). Never raises for an HTTP error."""
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    resp = await core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
    try:
        if 200 <= resp.status < 300:
            return resp.status, ""
        text = await resp.text()
        try:
            message = str(json.loads(text).get("message", text))
        except ValueError:
            message = text
        return resp.status, message
    finally:
        resp.release()


class KubeBinder:
    """The Binder the Kubernetes operator gives DefaultBinder."""

    def __init__(self, core: client.CoreV1Api, *, timeout: float = 30.0, concurrency: int = 64) -> None:
        self.core = core
        self.timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)  # bounded in-flight POSTs, like a client QPS cap

    async def bind(self, pod: PodInfo, node: str) -> Status:
        try:
            async with self._slots:
                code, message = await asyncio.wait_for(
                    post_binding(self.core, pod.namespace, pod.name, pod.uid, node), self.timeout
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Status.error(f"binding {pod.key} to {node}: {type(exc).__name__}: {exc}")
        if code < 300:
            return Status()
        if code == 409:
            return Status.error(f"binding {pod.key} to {node}: {message}", requeue=False)
        if code == 404:
            # the pod is gone (it will arrive as DELETED) or the node vanished: retry decides
            return Status.error(f"binding {pod.key} to {node}: {message}")
        return Status.error(f"binding {pod.key} to {node}: HTTP {code}: {message}")
