"""DynamicResources' writes (its port: plugins/dynamicresources/ports.py) on the API server, as
kube-scheduler's PreBind writes them: the ``resource.kubernetes.io/delete-protection`` finalizer
on a claim it allocates (a normal update: here a merge patch of ``metadata.finalizers``), then
``status.allocation`` and the pod in ``status.reservedFor`` (the status subresource). Both carry
the resourceVersion the scheduler read, so a claim someone else allocated or reserved meanwhile is
a 409, never overwritten.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from shoal.core.state.nodeselectors import Requirement, SelectorTerm
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.kube.rest import RawClient, message_of
from shoal.kube.wire import MERGE_PATCH, RESOURCE_CLAIMS
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
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if held.allocation_config:
        devices["config"] = [dict(c) for c in held.allocation_config]
    body: dict[str, Any] = {"devices": devices}
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
        self, claim: ResourceClaimInfo, allocation: ResourceClaimInfo | None, pod: PodInfo
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
        consumer = {"resource": "pods", "name": pod.name, "uid": pod.uid}
        status: dict[str, Any] = {"reservedFor": [*_consumers(claim), consumer]}
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

    async def _patch(self, path: str, body: dict[str, Any], claim: ResourceClaimInfo) -> tuple[int, Any]:
        try:
            return await self.raw.request("PATCH", path, body, content_type=MERGE_PATCH)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return 599, {"message": f"{claim.key}: {exc}"}


def _consumers(claim: ResourceClaimInfo) -> list[dict[str, Any]]:
    return [dict(c) for c in claim.consumers]


def _failed(what: str, code: int, reply: Any) -> Status:
    return Status.error(f"{what}: HTTP {code}: {message_of(reply)}")
