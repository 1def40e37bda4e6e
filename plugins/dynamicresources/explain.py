"""``shoal explain``'s words for a DRA request: how many devices match its class's and its own
selectors, how many of those are free, and how many are kept from it by a taint it does not
tolerate, cluster-wide or on one node (DynamicResources' ``describe`` and ``explain_nodes``)."""

from __future__ import annotations

from collections.abc import Sequence

from shoal.core.state.objects import PodInfo
from shoal.plugins.dynamicresources.allocator import AllocationError, Matcher
from shoal.plugins.dynamicresources.objects import (
    ALLOCATION_EXACT_COUNT,
    Device,
    DeviceRequest,
    ResourceClaimInfo,
)
from shoal.plugins.dynamicresources.store import DraStore


def node_request(
    store: DraStore, matcher: Matcher, claim: ResourceClaimInfo, req: DeviceRequest, devices: Sequence[Device]
) -> str:
    """One request against the devices one node reaches."""
    cls = store.classes.get(req.device_class)
    if cls is None:
        return f"request {req.name}: device class {req.device_class} does not exist"
    try:
        matching = [d for d in devices if matcher.request_matches(claim, req, cls, d)]
    except AllocationError as exc:
        return f"request {req.name}: {exc}"
    free = sum(1 for d in matching if store.taken_by(d.id) is None)
    selectors = " && ".join(f"({e})" for e in (*cls.selectors, *req.selectors))
    wanted = "all" if req.mode != ALLOCATION_EXACT_COUNT else str(req.count)
    what = f"device class {req.device_class}" + (f" where {selectors}" if selectors else "")
    tainted = _tainted(matching, req)
    found = f"{len(matching)} of {len(devices)} devices match, {free} free{tainted}, {wanted} wanted"
    return f"claim {claim.key}, request {req.name} ({what}): {found}"


def _tainted(matching: Sequence[Device], req: DeviceRequest) -> str:
    """``, 2 tainted (gpu.nvidia.com/xid=79:NoSchedule)``: the matching devices a taint the
    request does not tolerate keeps from it, and the first such taint; "" when none."""
    blocked = [t for d in matching if (t := d.blocked_for(req.tolerations)) is not None]
    if not blocked:
        return ""
    first = blocked[0]
    return f", {len(blocked)} tainted ({first.key}={first.value}:{first.effect}) and not tolerated"


def describe_request(store: DraStore, matcher: Matcher, claim: ResourceClaimInfo, req: DeviceRequest) -> str:
    """One request against every device of the cluster (each pool's newest generation)."""
    what = f"claim {claim.key}, request {req.name} (device class {req.device_class}, "
    what += "all" if req.mode != ALLOCATION_EXACT_COUNT else f"count {req.count}"
    cls = store.classes.get(req.device_class)
    if cls is None:
        return f"{what}): device class {req.device_class} does not exist"
    newest: dict[tuple[str, str], int] = {}
    for s in store.slices.values():
        newest[(s.driver, s.pool)] = max(newest.get((s.driver, s.pool), s.generation), s.generation)
    devices = [
        d
        for s in store.slices.values()
        if s.generation == newest[(s.driver, s.pool)]
        for d in store.devices_of(s)
    ]
    try:
        matching = [d for d in devices if matcher.request_matches(claim, req, cls, d)]
    except AllocationError as exc:
        return f"{what}): {exc}"
    free = sum(1 for d in matching if store.taken_by(d.id) is None)
    found = f"{len(matching)} of {len(devices)} devices match, {free} of them free{_tainted(matching, req)}"
    return f"{what}): {found}"


def describe_claims(store: DraStore, matcher: Matcher, pod: PodInfo) -> list[str]:
    """Per claim of the pod, where it is allocated, or per request how many devices of the
    cluster match its class and selectors and how many of those are free."""
    out: list[str] = []
    for pc in pod.resource_claims:
        claim = store.claims.get(f"{pod.namespace}/{pc.resolved}") if pc.resolved else None
        if claim is None:
            out.append(f"claim {pc.name}: not created yet" if pc.template else f"claim {pc.name}: not found")
        elif claim.allocated is not None:
            devices = ", ".join(str(a.id) for a in claim.allocated)
            where = f" on {claim.allocated_node}" if claim.allocated_node else ""
            out.append(
                f"claim {claim.key}: allocated{where} ({devices}), {len(claim.reserved_for)} consumer(s)"
            )
        else:
            out += [describe_request(store, matcher, claim, r) for alts in claim.requests for r in alts]
    return out
