"""``shoal explain``'s words for a DRA request: how many devices match its class's and its own
selectors and how many of those are free, cluster-wide or on one node (DynamicResources'
``describe`` and ``explain_nodes``)."""

from __future__ import annotations

from collections.abc import Sequence

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
    found = f"{len(matching)} of {len(devices)} devices match, {free} free, {wanted} wanted"
    return f"claim {claim.key}, request {req.name} ({what}): {found}"


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
        d for s in store.slices.values() if s.generation == newest[(s.driver, s.pool)] for d in s.devices
    ]
    try:
        matching = [d for d in devices if not d.unsupported and matcher.request_matches(claim, req, cls, d)]
    except AllocationError as exc:
        return f"{what}): {exc}"
    free = sum(1 for d in matching if store.taken_by(d.id) is None)
    return f"{what}): {len(matching)} of {len(devices)} devices match, {free} of them free"
