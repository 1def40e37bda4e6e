"""Talking to the real control plane from tests, the demo and benchmarks.

CRDs applied and waited for, objects created by kind, an operator run as a real subprocess
(``python -m shoal.cli run``) that is always stopped by PID, and polling helpers.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, overload

from kubernetes_asyncio import client

from shoal.kube.crds import all_crds
from shoal.kube.listing import list_all
from shoal.kube.wire import PODGROUPS, PROFILES
from shoal.testing.controlplane import free_port, python_env, spawn, stop_process, tail

__all__ = ["OperatorProcess", "apply_crds", "create", "create_many", "list_all", "wait_for"]

T = TypeVar("T")


async def apply_crds(
    api: client.ApiClient, timeout: float = 30.0, crds: Sequence[Mapping[str, Any]] | None = None
) -> None:
    """Create (or replace) shoal's CRDs (or ``crds``: another project's, ``shoal.testing.thirdparty``)
    and wait until they are Established and served."""
    ext: Any = client.ApiextensionsV1Api(api)
    wanted = list(all_crds().values()) if crds is None else list(crds)
    for crd in wanted:
        name = crd["metadata"]["name"]
        try:
            current = await ext.read_custom_resource_definition(name)
            body = dict(crd)
            body["metadata"] = {**crd["metadata"], "resourceVersion": current.metadata.resource_version}
            await ext.replace_custom_resource_definition(name, body)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            await ext.create_custom_resource_definition(crd)

    async def established() -> bool:
        for crd in wanted:
            got = await ext.read_custom_resource_definition(crd["metadata"]["name"])
            conds = {c.type: c.status for c in (got.status.conditions or [])}
            if conds.get("Established") != "True":
                return False
        return True

    await wait_for(established, timeout, what="CRDs established")


#: Kubernetes' native Workload API kinds ``create`` knows (``scheduling.k8s.io``)
NATIVE_PLURALS = {"PodGroup": "podgroups", "Workload": "workloads", "CompositePodGroup": "compositepodgroups"}
#: other projects' kinds ``create`` knows, by (API group, kind) (shoal.testing.thirdparty)
FOREIGN_PLURALS = {
    ("scheduling.volcano.sh", "PodGroup"): "podgroups",
    ("batch.volcano.sh", "Job"): "jobs",
    ("ray.io", "RayCluster"): "rayclusters",
}


async def create(api: client.ApiClient, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Create one object by its kind; returns the created object as a dict."""
    kind = obj["kind"]
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    ns = (obj.get("metadata") or {}).get("namespace", "default")
    if kind == "Node":
        resp = await core.create_node(obj, _preload_content=False)
    elif kind == "Pod":
        resp = await core.create_namespaced_pod(ns, obj, _preload_content=False)
    elif kind == "Namespace":
        resp = await core.create_namespace(obj, _preload_content=False)
    elif kind == "PersistentVolume":
        resp = await core.create_persistent_volume(obj, _preload_content=False)
    elif kind == "PersistentVolumeClaim":
        resp = await core.create_namespaced_persistent_volume_claim(ns, obj, _preload_content=False)
    elif kind in ("StorageClass", "CSINode", "VolumeAttachment", "CSIDriver"):
        storage: Any = client.StorageV1Api(api)
        make_storage = {
            "StorageClass": storage.create_storage_class,
            "CSINode": storage.create_csi_node,
            "VolumeAttachment": storage.create_volume_attachment,
            "CSIDriver": storage.create_csi_driver,
        }[kind]
        resp = await make_storage(obj, _preload_content=False)
    elif kind == "CSIStorageCapacity":
        capacities: Any = client.StorageV1Api(api)
        resp = await capacities.create_namespaced_csi_storage_capacity(ns, obj, _preload_content=False)
    elif kind == "Service":
        resp = await core.create_namespaced_service(ns, obj, _preload_content=False)
    elif kind == "ReplicationController":
        resp = await core.create_namespaced_replication_controller(ns, obj, _preload_content=False)
    elif kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        apps: Any = client.AppsV1Api(api)
        make = {
            "Deployment": apps.create_namespaced_deployment,
            "ReplicaSet": apps.create_namespaced_replica_set,
            "StatefulSet": apps.create_namespaced_stateful_set,
        }[kind]
        resp = await make(ns, obj, _preload_content=False)
    elif kind == "PriorityClass":
        sched: Any = client.SchedulingV1Api(api)
        resp = await sched.create_priority_class(obj, _preload_content=False)
    elif kind in NATIVE_PLURALS and str(obj.get("apiVersion")).startswith("scheduling.k8s.io/"):
        group, version = str(obj["apiVersion"]).split("/")  # Kubernetes' native Workload API
        plural = NATIVE_PLURALS[kind]
        resp = await custom.create_namespaced_custom_object(
            group, version, ns, plural, obj, _preload_content=False
        )
    elif (str(obj.get("apiVersion")).split("/")[0], kind) in FOREIGN_PLURALS:
        group, version = str(obj["apiVersion"]).split("/")  # Volcano's PodGroup and Job, KubeRay's RayCluster
        plural = FOREIGN_PLURALS[group, kind]
        resp = await custom.create_namespaced_custom_object(
            group, version, ns, plural, obj, _preload_content=False
        )
    elif kind == "PodGroup":
        resp = await custom.create_namespaced_custom_object(
            PODGROUPS.group, PODGROUPS.version, ns, PODGROUPS.plural, obj, _preload_content=False
        )
    elif str(obj.get("apiVersion")).startswith("resource.k8s.io/"):  # DRA (resource.k8s.io/v1)
        group, version = str(obj["apiVersion"]).split("/")
        plural = {
            "DeviceClass": "deviceclasses",
            "ResourceSlice": "resourceslices",
            "DeviceTaintRule": "devicetaintrules",
            "ResourceClaim": "resourceclaims",
            "ResourceClaimTemplate": "resourceclaimtemplates",
        }[kind]
        if kind in ("DeviceClass", "ResourceSlice", "DeviceTaintRule"):
            resp = await custom.create_cluster_custom_object(
                group, version, plural, obj, _preload_content=False
            )
        else:
            resp = await custom.create_namespaced_custom_object(
                group, version, ns, plural, obj, _preload_content=False
            )
    elif kind == "SchedulingProfile":
        resp = await custom.create_cluster_custom_object(
            PROFILES.group, PROFILES.version, PROFILES.plural, obj, _preload_content=False
        )
    else:
        raise ValueError(f"unsupported kind {kind}")
    try:
        body: dict[str, Any] = await resp.json()
        if resp.status >= 300:
            raise client.ApiException(status=resp.status, reason=str(body.get("message", body)))
        return body
    finally:
        resp.release()


async def create_many(
    api: client.ApiClient, objs: Sequence[Mapping[str, Any]], concurrency: int = 32
) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(obj: Mapping[str, Any]) -> None:
        async with slots:
            await create(api, obj)

    await asyncio.gather(*(one(o) for o in objs))


@overload
async def wait_for(
    check: Callable[[], Awaitable[T | None]], timeout: float, *, interval: float = ..., what: str = ...
) -> T: ...


@overload
async def wait_for(
    check: Callable[[], T | None], timeout: float, *, interval: float = ..., what: str = ...
) -> T: ...


async def wait_for(
    check: Callable[[], Any],
    timeout: float,
    *,
    interval: float = 0.2,
    what: str = "condition",
) -> Any:
    """Poll ``check`` (a coroutine function or a plain one) until it returns something truthy;
    TimeoutError names ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        result = check()
        last = await result if inspect.isawaitable(result) else result
        if last:
            return last
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


async def node_of(api: client.ApiClient, namespace: str, pod: str) -> str | None:
    """The node a pod is bound to (None while pending): a ``wait_for`` check."""
    got = await client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    name: str | None = got.spec.node_name
    return name


async def failed_scheduling_note(api: client.ApiClient, namespace: str, pod: str) -> str | None:
    """The note of the first FailedScheduling event about a pod (None before there is one): a
    ``wait_for`` check."""
    events: Any = client.EventsV1Api(api)
    for e in await list_all(events.list_namespaced_event, namespace):
        if e.get("reason") == "FailedScheduling" and e["regarding"]["name"] == pod:
            return str(e.get("note") or "")
    return None


async def delete_all_nodes(api: client.ApiClient) -> None:
    core: Any = client.CoreV1Api(api)
    await core.delete_collection_node()


class OperatorProcess:
    """``shoal run`` as a subprocess. Stopped (SIGTERM by PID) on exit; its log kept for failures.

    The Lease lasts 15 s as in production (renew deadline 10 s): a shorter one makes a leader step
    down whenever a loaded machine stalls it for a few seconds, cancelling bindings mid-test.
    Handovers in tests come from a graceful stop, which releases the Lease at once.
    """

    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        *,
        identity: str = "shoal-test",
        lease_name: str = "shoal-test",
        lease_duration: float = 15.0,
        leader_elect: bool = True,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        #: the plain-HTTP port (``--insecure-metrics-port``): tests and benches read /metrics and the
        #: health paths there without a token; ``secure_port`` is the HTTPS one, as in production
        self.metrics_port = free_port()
        self.secure_port = free_port()
        self.log = log
        self.argv = [
            sys.executable,
            "-m",
            "shoal.cli",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--id",
            identity,
            "--lease-name",
            lease_name,
            "--lease-duration",
            str(lease_duration),
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.secure_port),
            "--insecure-metrics-port",
            str(self.metrics_port),
            *(["--no-leader-elect"] if not leader_elect else []),
            *extra,
        ]
        self.env = python_env(dict(env or {}))
        self.popen: Any = None

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def start(self) -> OperatorProcess:
        self.popen = spawn(self.argv, self.log, env=self.env)
        return self

    def stop(self, grace: float = 20.0) -> int | None:
        return stop_process(self.popen, grace) if self.popen is not None else None

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

    def is_leader(self) -> bool:
        """Whether this replica reports holding the Lease (``shoal_leader 1`` on /metrics)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as resp:
                return "shoal_leader 1.0" in resp.read().decode()
        except OSError:
            return False

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        return tail(self.log, lines)

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
