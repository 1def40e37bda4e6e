"""A gang's devices chosen together (beyond upstream: kubernetes/kubernetes#138765).

kube-scheduler allocates each member's claims on its own, one member after another: the first
member's first choice (a whole GPU, the first alternative of its ``firstAvailable`` list) may take
what a later member needed (one of the halves both could have had), and the gang stays pending.

shoal's gang cycle places its members one after another too, each held at its Permit gate until
the quorum is there, nothing written. So when a member's claims do not fit a node beside the
devices its gang's members hold there, DynamicResources searches all their claims together on
that node (the allocator backtracks across claims): if that fits, Reserve moves the members to
their new devices, and Unreserve moves them back. Only members still at their gates are moved,
and only allocations of whole devices on one node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from shoal.core.framework.gates import WaitingPods
from shoal.core.state.objects import PodInfo
from shoal.plugins.dynamicresources.allocator import (
    AllocationError,
    InvalidPools,
    Matcher,
    allocate,
    allocation_config,
    allocation_selector,
)
from shoal.plugins.dynamicresources.objects import AllocatedDevice, DeviceId, ResourceClaimInfo
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
) -> Joint | None:
    """The members' claims and the pod's, searched together on one node, the members' own devices
    free for it; None when they do not fit together either."""
    released = {c.key for c in theirs}
    fresh = [replace(c, allocated=None, allocated_node="", allocated_terms=()) for c in theirs]
    try:
        found = allocate(
            [*fresh, *mine], pools, store.classes, _taken_but(store, released), matcher, store.shares
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
