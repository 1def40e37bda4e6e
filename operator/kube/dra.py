"""DynamicResources' writes (its port: plugins/dynamicresources/ports.py) on the API server, as
kube-scheduler's PreBind writes them: the ``resource.kubernetes.io/delete-protection`` finalizer
on a claim it allocates (a normal update: here a merge patch of ``metadata.finalizers``), then
``status.allocation`` and the pod in ``status.reservedFor`` (the status subresource). Both carry
the resourceVersion the scheduler read, so a claim someone else allocated or reserved meanwhile is
a 409, never overwritten. For a pod's DRA-backed extended resources, the claim is created first
(with the finalizer: upstream creates it, then adds the finalizer in a second write) and recorded
in the pod's ``status.extendedResourceClaimStatus`` after; Unreserve and PostFilter delete it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from shoal.core.state.nodeselectors import Requirement, SelectorTerm
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.kube.rest import RawClient, message_of
from shoal.kube.wire import MERGE_PATCH, PODS, RESOURCE_CLAIMS
from shoal.plugins.dynamicresources.binding import now
from shoal.plugins.dynamicresources.capacity import quantity
from shoal.plugins.dynamicresources.objects import ResourceClaimInfo
from shoal.plugins.dynamicresources.ports import DELETE_PROTECTION


def allocation_body(held: ResourceClaimInfo) -> dict[str, Any]:
    """``status.allocation`` for the devices shoal picked, with the configuration Reserve gathered
    and the node selector of a node-local allocation."""
    results: list[dict[str, Any]] = []
    for r in held.allocated or ():
        result: dict[str, Any] = {"request": r.request, "driver": r.id.driver, "pool": r.id.pool}
        result["device"] = r.id.device
        if r.admin_access:
            result["adminAccess"] = True
        if r.share_id:  # a share of a device that allows multiple allocations
            result["shareID"] = r.share_id
        if r.consumed:
            result["consumedCapacity"] = {name: quantity(v) for name, v in r.consumed.items()}
        if r.tolerations:  # a copy of the request's, as the allocator writes it
            result["tolerations"] = [dict(t.raw) for t in r.tolerations]
        if r.binding_conditions:  # copies of the device's, when it was allocated
            result["bindingConditions"] = list(r.binding_conditions)
            result["bindingFailureConditions"] = list(r.binding_failure_conditions)
        if r.skip_node_operations:  # a copy of its slice's, as the allocator writes it
            result["skipNodeOperations"] = list(r.skip_node_operations)
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if held.allocation_config:
        devices["config"] = [dict(c) for c in held.allocation_config]
    body: dict[str, Any] = {"devices": devices, "allocationTimestamp": now()}
    if held.allocated_node:
        field = {"key": "metadata.name", "operator": "In", "values": [held.allocated_node]}
        body["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
    elif held.allocated_terms:  # the merged selector of the nodeSelector slices it used
        body["nodeSelector"] = {"nodeSelectorTerms": [_term(t) for t in held.allocated_terms]}
    return body


def _term(term: SelectorTerm) -> dict[str, Any]:
    def requirements(reqs: tuple[Requirement, ...]) -> list[dict[str, Any]]:
        return [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in reqs
        ]

    out: dict[str, Any] = {}
    if term.expressions:
        out["matchExpressions"] = requirements(term.expressions)
    if term.fields:
        out["matchFields"] = requirements(term.fields)
    return out


class KubeClaimWriter:
    def __init__(self, raw: RawClient) -> None:
        self.raw = raw

    async def reserve_claim(
        self, claim: ResourceClaimInfo, allocation: ResourceClaimInfo | None, consumer: Mapping[str, str]
    ) -> Status:
        path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace)
        version = claim.resource_version
        if allocation is not None and DELETE_PROTECTION not in claim.finalizers:
            meta = {"resourceVersion": version, "finalizers": [*claim.finalizers, DELETE_PROTECTION]}
            code, reply = await self._patch(path, {"metadata": meta}, claim)
            if code >= 300:
                return _failed(f"add finalizer to claim {claim.key}", code, reply)
            version = str(
                ((reply if isinstance(reply, dict) else {}).get("metadata") or {}).get("resourceVersion")
                or ""
            )
        status: dict[str, Any] = {"reservedFor": [*_consumers(claim), dict(consumer)]}
        if allocation is not None:
            status["allocation"] = allocation_body(allocation)

        body = {"metadata": {"resourceVersion": version}, "status": status}
        code, reply = await self._patch(path + "/status", body, claim)
        if code >= 300:
            what = "add allocation and reservation to" if allocation is not None else "add reservation to"
            return _failed(f"{what} claim {claim.key}", code, reply)
        return Status()

    async def deallocate(self, claim: ResourceClaimInfo) -> Status:
        path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace) + "/status"
        status = {"allocation": None, "reservedFor": None, "devices": None}
        body = {"metadata": {"resourceVersion": claim.resource_version}, "status": status}
        code, reply = await self._patch(path, body, claim)
        if code >= 300:
            return _failed(f"deallocate claim {claim.key}", code, reply)
        return Status()

    async def create_claim(self, body: Mapping[str, Any]) -> tuple[ResourceClaimInfo | None, Status]:
        meta = body.get("metadata") or {}
        namespace, what = str(meta.get("namespace") or "default"), f"{meta.get('generateName')}*"
        code, reply = await self._call("POST", RESOURCE_CLAIMS.path(namespace=namespace), body, what)
        if code >= 300 or not isinstance(reply, dict):
            return None, _failed(f"create claim {namespace}/{what}", code, reply)
        return ResourceClaimInfo.from_dict(reply), Status()

    async def delete_claim(self, claim: ResourceClaimInfo) -> Status:
        """Upstream's deleteClaim: the finalizer off (guarded by the resourceVersion, re-read on a
        conflict), then DELETE; a claim gone meanwhile is done."""
        path = RESOURCE_CLAIMS.path(claim.name, namespace=claim.namespace)
        version, finalizers = claim.resource_version, claim.finalizers
        for _ in range(5):
            if DELETE_PROTECTION not in finalizers:
                break
            meta = {
                "resourceVersion": version,
                "finalizers": [f for f in finalizers if f != DELETE_PROTECTION],
            }
            code, reply = await self._call("PATCH", path, {"metadata": meta}, claim.key, MERGE_PATCH)
            if code == 404:
                return Status()
            if code != 409:
                if code >= 300:
                    return _failed(f"remove finalizer of claim {claim.key}", code, reply)
                break
            code, reply = await self._call("GET", path, None, claim.key)  # changed: read it again
            if code == 404:
                return Status()
            if code >= 300 or not isinstance(reply, dict):
                return _failed(f"read claim {claim.key}", code, reply)
            fresh = ResourceClaimInfo.from_dict(reply)
            version, finalizers = fresh.resource_version, fresh.finalizers
        code, reply = await self._call("DELETE", path, None, claim.key)
        if code >= 300 and code != 404:
            return _failed(f"delete claim {claim.key}", code, reply)
        return Status()

    async def record_extended_claim(self, pod: PodInfo, status: Mapping[str, Any]) -> Status:
        path = PODS.path(pod.name, namespace=pod.namespace, sub="status")
        body = {"status": {"extendedResourceClaimStatus": dict(status)}}
        code, reply = await self._call("PATCH", path, body, pod.key, MERGE_PATCH)
        if code >= 300:
            return _failed(f"record extended resource claim of pod {pod.key}", code, reply)
        return Status()

    async def _patch(self, path: str, body: dict[str, Any], claim: ResourceClaimInfo) -> tuple[int, Any]:
        return await self._call("PATCH", path, body, claim.key, MERGE_PATCH)

    async def _call(
        self, method: str, path: str, body: Any, what: str, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        try:
            return await self.raw.request(method, path, body, content_type=content_type)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return 599, {"message": f"{what}: {exc}"}


def _consumers(claim: ResourceClaimInfo) -> list[dict[str, Any]]:
    return [dict(c) for c in claim.consumers]


def _failed(what: str, code: int, reply: Any) -> Status:
    return Status.error(f"{what}: HTTP {code}: {message_of(reply)}")
