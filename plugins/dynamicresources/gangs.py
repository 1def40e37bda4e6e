"""A gang's devices chosen together (beyond upstream: kubernetes/kubernetes#138765), and a claim
its members share allocated once (kubernetes/kubernetes#137617 and #140053).

kube-scheduler allocates each member's claims on its own, one member after another: the first
member's first choice (a whole GPU, the first alternative of its ``firstAvailable`` list) may take
what a later member needed (one of the halves both could have had), and the gang stays pending.

shoal's gang cycle places its members one after another too, each held at its Permit gate until
the quorum is there, nothing written. So when a member's claims do not fit a node beside the
devices its gang's members hold there, DynamicResources searches all their claims together on
that node (the allocator backtracks across claims): if that fits, Reserve moves the members to
their new devices, and Unreserve moves them back. Only members still at their gates are moved,
and only allocations of whole devices on one node.

A claim several members share: the first member's cycle allocates it (held, not written yet); the
others use that allocation as if written (its node selector pins them) instead of being refused
while it is "in the process of being allocated". At PreBind they wait until the first member's
write comes back through the watch, then add themselves to ``reservedFor`` with the claim's fresh
resourceVersion, reading it again when another member's reservation got there first (upstream's
PreBind fails such a member: "got allocated elsewhere in the meantime", #140053).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shoal.core.framework.gates import WaitingPods
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Status
from shoal.plugins.dynamicresources.allocator import (
    AllocationError,
    InvalidPools,
    Matcher,
    allocate,
    allocation_config,
    allocation_selector,
)
from shoal.plugins.dynamicresources.objects import (
    AllocatedDevice,
    DeviceId,
    ResourceClaimInfo,
)
from shoal.plugins.dynamicresources.podclaims import native_group
from shoal.plugins.dynamicresources.ports import ClaimWriter
from shoal.plugins.dynamicresources.store import DraStore, NodePool

Allocation = list[tuple[AllocatedDevice, ...]]
#: the members' claims (key) with their devices anew, then the pod's own claims' devices
Joint = tuple[list[tuple[str, tuple[AllocatedDevice, ...]]], Allocation]


@dataclass
class GangDevices:
    """Which gang member holds which assumed claim (a profile's DynamicResources keeps one)."""

    #: assumed claim (key) -> (member uid, gang key)
    holders: dict[str, tuple[str, str]] = field(default_factory=dict)

    def hold(self, key: str, pod: PodInfo) -> None:
        if pod.group_key is not None:
            self.holders[key] = (pod.uid, pod.group_key)

    def drop(self, key: str) -> None:
        self.holders.pop(key, None)

    def shared_pending(self, key: str, pod: PodInfo, waiting: WaitingPods) -> bool:
        """The assumed claim ``key`` is being allocated by another member of the pod's gang, at its
        Permit gate: the pod may use that allocation."""
        holder = self.holders.get(key)
        return (
            holder is not None
            and pod.group_key is not None
            and holder[1] == pod.group_key
            and holder[0] != pod.uid
            and waiting.get(holder[0]) is not None
        )

    def waiting_peers(
        self, store: DraStore, waiting: WaitingPods, pod: PodInfo
    ) -> dict[str, list[ResourceClaimInfo]]:
        """Per node, the allocations the pod's gang members hold there while at their gates."""
        peers: dict[str, list[ResourceClaimInfo]] = {}
        for key, (uid, group) in list(self.holders.items()):
            held = store.assumed.get(key)
            if held is None:
                del self.holders[key]
                continue
            if group != pod.group_key or uid == pod.uid or waiting.get(uid) is None:
                continue
            if held.allocated_node and not any(a.share_id for a in held.allocated or ()):
                peers.setdefault(held.allocated_node, []).append(held)
        return peers


def joint(
    store: DraStore,
    matcher: Matcher,
    theirs: Sequence[ResourceClaimInfo],
    mine: Sequence[ResourceClaimInfo],
    pools: Sequence[NodePool],
    optional_operations: bool = False,
) -> Joint | None:
    """The members' claims and the pod's, searched together on one node, the members' own devices
    free for it; None when they do not fit together either."""
    released = {c.key for c in theirs}
    fresh = [replace(c, allocated=None, allocated_node="", allocated_terms=()) for c in theirs]
    try:
        found = allocate(
            [*fresh, *mine],
            pools,
            store.classes,
            _taken_but(store, released),
            matcher,
            store.shares,
            optional_operations=optional_operations,
        )
    except (AllocationError, InvalidPools):
        return None
    if found is None:
        return None
    return [(c.key, devices) for c, devices in zip(theirs, found, strict=False)], found[len(theirs) :]


def move(
    store: DraStore,
    node: str,
    moved: Sequence[tuple[str, tuple[AllocatedDevice, ...]]],
    labels: Mapping[str, str],
) -> list[ResourceClaimInfo] | None:
    """Give the members on ``node`` their devices of the joint allocation; their allocations as
    they were (for :func:`restore`), or None when one is no longer held (the joint one is stale)."""
    if any(key not in store.assumed for key, _ in moved):
        return None
    replaced: list[ResourceClaimInfo] = []
    for key, devices in moved:
        old = store.assumed[key]
        replaced.append(old)
        local, terms = allocation_selector(devices, store.slices_for(node, labels), node)
        config = allocation_config(old, devices, store.classes)
        store.forget(key)
        store.assume(
            replace(
                old, allocated=devices, allocated_node=local, allocated_terms=terms, allocation_config=config
            )
        )
    return replaced


def restore(store: DraStore, replaced: Sequence[ResourceClaimInfo]) -> None:
    """The members still held get their own allocations back (Unreserve of the pod that moved them)."""
    for old in reversed(replaced):
        if old.key in store.assumed:
            store.forget(old.key)
            store.assume(old)


def _taken_but(store: DraStore, released: set[str]) -> Callable[[DeviceId], bool]:
    """Whether a device is taken, by a claim other than ``released``."""

    def taken(d: DeviceId) -> bool:
        holder = store.taken_by(d)
        return holder is not None and holder not in released

    return taken


async def join_pending(
    store: DraStore, writer: ClaimWriter, pod: PodInfo, key: str, timeout: float, to: Mapping[str, str]
) -> Status:
    """PreBind of a member sharing a claim another member allocates: once the allocation is back
    from the watch, add ``to`` (the pod, or its PodGroup) to ``reservedFor`` unless it is there
    already (guarded by the resourceVersion read; another member's reservation first: read again,
    try again). An Error when the allocating member's
    binding failed (the claim is neither held nor allocated) or ``timeout`` passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    changed = asyncio.Event()
    store.watchers.append(changed.set)
    tried = ""
    try:
        while True:
            changed.clear()
            claim = store.claims.get(key)
            if claim is not None and claim.allocated is not None:
                if claim.reserved_for_pod(pod.uid, native_group(pod)):
                    return SUCCESS
                if claim.resource_version != tried:
                    status = await writer.reserve_claim(claim, None, to)
                    if status.ok:
                        return status
                    tried = claim.resource_version  # someone wrote first: wait for the next version
                    continue
            elif key not in store.assumed:
                return Status.error(f"claim {key}: the gang member allocating it did not bind")
            left = deadline - loop.time()
            if left <= 0:
                return Status.error(f"claim {key}: its allocation by another member of the gang did not come")
            try:
                await asyncio.wait_for(changed.wait(), timeout=left)
            except TimeoutError:
                continue
    finally:
        store.watchers.remove(changed.set)
