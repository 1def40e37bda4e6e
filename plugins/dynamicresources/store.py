"""The devices each node offers and which are taken: DynamicResources' store (kube-scheduler's DRA
manager and allocated-devices tracking), shared by every profile.

Every allocated claim's devices are counted as taken, whoever allocated it (kube-scheduler, another
shoal, a driver), so two schedulers never hand out one device; the allocations shoal itself holds
between Reserve and the claim's status update coming back through the watch (``assumed``) are
counted too. NodeResourcesFit (DRA-backed extended resources) and GPUMemory (GPU memory a DRA
driver publishes) read it as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, ClassVar

from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.plugins.dynamicresources.objects import (
    Device,
    DeviceClassInfo,
    DeviceId,
    DeviceTaintRuleInfo,
    DraObject,
    ResourceClaimInfo,
    ResourceSliceInfo,
)

#: every DeviceClass provides the extended resource of this prefix and its name
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


@dataclass
class DraStore:
    """DeviceClasses and slices by name, claims by ``namespace/name``; the devices taken."""

    #: the objects it takes (core/framework/interfaces.py: Store)
    kinds: ClassVar[tuple[type, ...]] = (
        DeviceClassInfo,
        ResourceSliceInfo,
        ResourceClaimInfo,
        DeviceTaintRuleInfo,
    )

    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    slices: dict[str, ResourceSliceInfo] = field(default_factory=dict)
    claims: dict[str, ResourceClaimInfo] = field(default_factory=dict)
    #: claims shoal allocated in memory (Reserve) and has not seen come back allocated yet
    assumed: dict[str, ResourceClaimInfo] = field(default_factory=dict)
    #: node name -> the slices published for it alone (``spec.nodeName``)
    _by_node: dict[str, set[str]] = field(default_factory=dict)
    #: slices not tied to one node (allNodes, nodeSelector)
    _shared: set[str] = field(default_factory=set)
    #: device -> the claim (``namespace/name``) it is allocated to
    _taken: dict[DeviceId, str] = field(default_factory=dict)
    #: shared device -> (how many shares it has, what they take of each capacity together)
    _shares: dict[DeviceId, tuple[int, dict[str, Decimal]]] = field(default_factory=dict)
    #: bumped on every change; ``devices_version`` only when classes or slices change (what a
    #: plugin's per-device caches are keyed on)
    version: int = 0
    devices_version: int = 0
    #: bumped whenever a device is taken or released (what per-node "free" caches are keyed on)
    taken_version: int = 0
    #: DeviceTaintRules by name: their taints are added to the devices they select
    rules: dict[str, DeviceTaintRuleInfo] = field(default_factory=dict)
    #: slice name -> (the slice, its devices with the rules' taints added), while the rules last
    _patched: dict[str, tuple[ResourceSliceInfo, tuple[Device, ...]]] = field(default_factory=dict)
    #: (driver, pool) -> the names of its slices, of every generation
    _by_pool: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: called after every claim change (DynamicResources' PreBind waits on them for binding conditions)
    watchers: list[Callable[[], None]] = field(default_factory=list)
    #: pod uid -> the claim (``namespace/name``) made for its DRA-backed extended resources
    _extended_by_pod: dict[str, str] = field(default_factory=dict)
    #: (devices_version, extended resource name -> the DeviceClass that provides it)
    _extended: tuple[int, dict[str, DeviceClassInfo]] = (-1, {})
    #: (node, its labels' identity) -> (devices_version, the pools the node reaches)
    _pools: dict[str, tuple[int, Mapping[str, str], tuple[NodePool, ...]]] = field(default_factory=dict)
    #: (driver, pool) -> bumped whenever one of its devices is taken or released
    _pool_taken: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (driver, pool) -> (the pool, its ``_pool_taken``, its counters left), see :meth:`counters_left`
    _left: dict[tuple[str, str], tuple[NodePool, int, Counters | None]] = field(default_factory=dict)

    def apply(self, obj: Any, deleted: bool = False) -> ClusterEvent | None:
        """Record (or forget, when ``deleted``) one object; the cluster event the change is. A
        claim deleted or deallocated carries no object: "something was freed", which may help any
        pod (the last state of a deleted claim may still show the allocation it no longer holds,
        which a queueing hint would read as "nothing freed")."""
        freed = deleted
        if isinstance(obj, ResourceClaimInfo) and not deleted:
            before = self.claims.get(obj.key)
            freed = before is not None and before.allocated is not None and obj.allocated is None
        self._apply(obj, deleted)
        return ClusterEvent(EventKind.DRA_CHANGE, None if freed else obj)

    def _apply(self, obj: DraObject, deleted: bool) -> None:
        self.version += 1
        if not isinstance(obj, ResourceClaimInfo):
            self.devices_version += 1
        if isinstance(obj, DeviceClassInfo):
            self.classes.pop(obj.name, None)
            if not deleted:
                self.classes[obj.name] = obj
        elif isinstance(obj, DeviceTaintRuleInfo):
            self.rules.pop(obj.name, None)
            if not deleted:
                self.rules[obj.name] = obj
            self._patched.clear()
            self._pools.clear()
        elif isinstance(obj, ResourceSliceInfo):
            self._apply_slice(obj, deleted)
        else:
            self._apply_claim(obj, deleted)
            for wake in self.watchers:
                wake()

    def _apply_slice(self, obj: ResourceSliceInfo, deleted: bool) -> None:
        self._patched.pop(obj.name, None)
        self._pools.clear()
        old = self.slices.pop(obj.name, None)
        if old is not None:
            self._by_node.get(old.node_name, set()).discard(old.name)
            self._shared.discard(old.name)
            self._by_pool.get((old.driver, old.pool), set()).discard(old.name)
        if deleted:
            return
        self.slices[obj.name] = obj
        self._by_pool.setdefault((obj.driver, obj.pool), set()).add(obj.name)
        if obj.node_name:
            self._by_node.setdefault(obj.node_name, set()).add(obj.name)
        else:
            self._shared.add(obj.name)

    def _apply_claim(self, obj: ResourceClaimInfo, deleted: bool) -> None:
        old = self.claims.pop(obj.key, None)
        if old is not None:
            self._release(old)
            if old.extended and self._extended_by_pod.get(old.owner_uid) == old.key:
                del self._extended_by_pod[old.owner_uid]
        if obj.extended and not deleted:
            self._extended_by_pod[obj.owner_uid] = obj.key
        if deleted:  # a deleted claim frees what shoal held for it too
            held = self.assumed.pop(obj.key, None)
            if held is not None:
                self._release(held)
            return
        self.claims[obj.key] = obj
        if obj.allocated is not None:
            self.assumed.pop(obj.key, None)  # the allocation came back: the watch's copy rules
            self._take(obj)

    def _take(self, claim: ResourceClaimInfo) -> None:
        for result in claim.allocated or ():
            if result.admin_access:  # an admin's access leaves the device to others
                continue
            self._changed(result.id)
            if result.share_id:  # a share of a shared device: it takes part of its capacity
                count, amounts = self._shares.get(result.id, (0, {}))
                for name, amount in result.consumed.items():
                    amounts[name] = amounts.get(name, Decimal(0)) + amount
                self._shares[result.id] = (count + 1, amounts)
            else:
                self._taken[result.id] = claim.key

    def _release(self, claim: ResourceClaimInfo) -> None:
        for result in claim.allocated or ():
            if result.admin_access:
                continue
            if result.share_id:
                held = self._shares.get(result.id)
                if held is None:
                    continue
                count, amounts = held
                for name, amount in result.consumed.items():
                    amounts[name] = amounts.get(name, Decimal(0)) - amount
                if count > 1:
                    self._shares[result.id] = (count - 1, amounts)
                else:
                    del self._shares[result.id]
                self._changed(result.id)
            elif self._taken.get(result.id) == claim.key:
                del self._taken[result.id]
                self._changed(result.id)

    def _changed(self, device: DeviceId) -> None:
        """``device`` was taken or released: what per-node and per-pool caches are keyed on moves."""
        self.taken_version += 1
        pool = (device.driver, device.pool)
        self._pool_taken[pool] = self._pool_taken.get(pool, 0) + 1

    def counters_left(self, pools: Iterable[NodePool]) -> dict[tuple[str, str], Counters]:
        """:func:`counters_left` of ``pools`` with the devices taken here (allocated, assumed or
        shared), each pool's figures kept until one of its devices is taken or released or the
        pool changes; the caller's to change (fresh copies)."""
        out: dict[tuple[str, str], Counters] = {}
        for p in pools:
            if not p.usable or not p.counters:
                continue
            key = (p.driver, p.name)
            version = self._pool_taken.get(key, 0)
            hit = self._left.get(key)
            if hit is None or hit[0] is not p or hit[1] != version:
                left = counters_left((p,), self._taken.__contains__, self.shares).get(key)
                if len(self._left) > 20_000:
                    self._left.clear()
                hit = self._left[key] = (p, version, left)
            if hit[2] is not None:
                out[key] = {name: dict(counters) for name, counters in hit[2].items()}
        return out

    def extended_claim(self, pod_uid: str) -> ResourceClaimInfo | None:
        """The claim made for the pod's DRA-backed extended resources (annotated, the pod its
        controller), if one exists."""
        key = self._extended_by_pod.get(pod_uid)
        return self.claims.get(key) if key is not None else None

    def extended_class(self, resource: str) -> DeviceClassInfo | None:
        """The DeviceClass that provides the extended resource ``resource`` to pods' requests
        (upstream's extended-resource cache): each class provides
        ``deviceclass.resource.kubernetes.io/<its name>``, and its ``extendedResourceName``
        unless a newer class names the same one (of two as old, the first by name)."""
        version, by_name = self._extended
        if version != self.devices_version:
            by_name = {}
            # newest first, then by name: the first class to name a resource provides it
            for cls in sorted(self.classes.values(), key=lambda c: c.name):
                by_name[IMPLICIT_EXTENDED_PREFIX + cls.name] = cls
            newest = sorted(self.classes.values(), key=lambda c: c.name)
            newest.sort(key=lambda c: c.created, reverse=True)
            for cls in newest:
                if cls.extended_resource_name:
                    by_name.setdefault(cls.extended_resource_name, cls)
            self._extended = (self.devices_version, by_name)
        return by_name.get(resource)

    def shared(self) -> Iterator[tuple[DeviceId, Mapping[str, Decimal]]]:
        """Every shared device with shares, and what they take of each capacity together."""
        for device, (_, amounts) in self._shares.items():
            yield device, amounts

    def shares(self, device: DeviceId) -> Mapping[str, Decimal] | None:
        """What the shares of a shared device take of each capacity together (committed and
        assumed), or None when it has none."""
        held = self._shares.get(device)
        return held[1] if held is not None else None

    def claim(self, namespace: str, name: str) -> ResourceClaimInfo | None:
        """The claim as shoal believes it is: an assumed allocation over the watch's copy."""
        key = f"{namespace}/{name}"
        return self.assumed.get(key) or self.claims.get(key)

    @property
    def taken(self) -> Mapping[DeviceId, str]:
        """Every taken device -> the claim holding it (read-only view for the hot loop)."""
        return self._taken

    def taken_by(self, device: DeviceId) -> str | None:
        """The claim holding ``device``, if any (allocated per the API, or assumed by shoal)."""
        return self._taken.get(device)

    def assume(self, claim: ResourceClaimInfo) -> None:
        """Hold ``claim`` (allocated in memory) until its status comes back or :meth:`forget`."""
        self.version += 1
        self.assumed[claim.key] = claim
        self._take(claim)

    def forget(self, key: str) -> None:
        """Drop an assumed allocation (Unreserve); the watch's copy, if allocated, keeps its devices."""
        claim = self.assumed.pop(key, None)
        if claim is None:
            return
        self.version += 1
        self._release(claim)
        known = self.claims.get(key)
        if known is not None and known.allocated is not None:
            self._take(known)
        for wake in self.watchers:  # a member waiting on a gang peer's allocation learns it is off
            wake()

    def slices_for(self, node: str, labels: Mapping[str, str]) -> Iterator[ResourceSliceInfo]:
        """The slices whose devices ``node`` can reach: its own, then shared ones that select it."""
        for name in sorted(self._by_node.get(node, ())):
            yield self.slices[name]
        for name in sorted(self._shared):
            s = self.slices[name]
            if s.available_on(node, labels):
                yield s

    def devices_of(self, s: ResourceSliceInfo) -> tuple[Device, ...]:
        """The slice's devices, each with the taints of the DeviceTaintRules that select it added
        after its own (the devices the allocator sees, as kube's patched slices)."""
        if not self.rules:
            return s.devices
        hit = self._patched.get(s.name)
        if hit is None or hit[0] is not s:
            rules = [r for r in self.rules.values() if r.taint is not None]
            devices = tuple(_patched(d, rules) for d in s.devices)
            hit = self._patched[s.name] = (s, devices)
        return hit[1]

    def devices_for(self, node: str, labels: Mapping[str, str]) -> Iterator[Device]:
        """Every device ``node`` can reach (free or not) in the pools it may allocate from."""
        for pool in self.pools_for(node, labels):
            if pool.usable:
                yield from pool.devices

    def forget_node(self, node: str) -> None:
        """The node is gone: its pools (and the labels they were gathered for) are not kept; a
        node of that name that comes back gathers them again."""
        self._pools.pop(node, None)
        if not self._by_node.get(node):
            self._by_node.pop(node, None)

    def pools_for(self, node: str, labels: Mapping[str, str]) -> tuple[NodePool, ...]:
        """The pools ``node`` reaches, as the allocator sees them (kube's GatherPools), sorted by
        driver and pool name; kept until a slice or a rule changes, or the node's labels do."""
        hit = self._pools.get(node)
        if hit is not None and hit[0] == self.devices_version and hit[1] is labels:
            return hit[2]
        pools = tuple(self._gather(node, labels))
        if len(self._pools) > 20_000:
            self._pools.clear()
        self._pools[node] = (self.devices_version, labels, pools)
        return pools

    def _gather(self, node: str, labels: Mapping[str, str]) -> Iterator[NodePool]:
        relevant: dict[tuple[str, str], list[ResourceSliceInfo]] = {}
        for s in self.slices_for(node, labels):
            relevant.setdefault((s.driver, s.pool), []).append(s)
        for key in sorted(relevant):
            newest = max(s.generation for s in relevant[key])
            reaching = [s for s in relevant[key] if s.generation == newest]
            same = reaching
            if len(reaching) != reaching[0].slice_count:
                # the pool's other slices (counters, other nodes' devices) may complete it
                everything = [self.slices[name] for name in self._by_pool.get(key, ())]
                if any(s.generation > newest for s in everything):
                    continue  # being replaced by a newer generation: left out altogether
                same = [s for s in everything if s.generation == newest]
                if len(same) != reaching[0].slice_count:
                    yield NodePool(key[0], key[1], incomplete=True)
                    continue
            yield self._pool(key, node, labels, reaching, same)

    def _pool(
        self,
        key: tuple[str, str],
        node: str,
        labels: Mapping[str, str],
        reaching: list[ResourceSliceInfo],
        same: list[ResourceSliceInfo],
    ) -> NodePool:
        """One complete pool: its devices the node reaches (slices by name, as the allocator
        orders them), its counters, and why it is invalid (kube's buildPool)."""
        counter_slices = [s for s in same if s.counter_sets]
        targeting = sorted((s for s in reaching if not s.counter_sets), key=lambda s: s.name)
        sets: dict[str, Mapping[str, Decimal]] = {}
        invalid = ""
        for s in counter_slices:
            for name, counters in s.counter_sets.items():
                if name in sets or name in s.duplicate_sets:
                    invalid = f"counter set {name} is defined twice"
                sets[name] = counters
        names: set[str] = set()
        devices: list[Device] = []
        for s in targeting:
            for d in self.devices_of(s):
                if d.id.device in names:
                    invalid = invalid or f"device {d.id.device} is listed twice"
                names.add(d.id.device)
                if not s.per_device or d.available_on(node, labels):
                    devices.append(d)
        consumers = [d for s in same if not s.counter_sets for d in self.devices_of(s) if d.consumes]
        for d in consumers:
            for set_name, counters in d.consumes.items():
                known = sets.get(set_name)
                if known is None:
                    invalid = (
                        invalid
                        or f"device {d.id.device} consumes counter set {set_name}, which does not exist"
                    )
                elif any(c not in known for c in counters):
                    invalid = invalid or f"device {d.id.device} consumes a counter its set {set_name} lacks"
        return NodePool(
            key[0],
            key[1],
            tuple(devices),
            invalid=invalid,
            counters=sets,
            consumers=tuple(consumers),
            grouped=any(d.groups for d in consumers),
        )

    def node_slice_names(self) -> set[str]:
        """Nodes that have slices of their own (what a plugin may skip the rest for)."""
        return {n for n, names in self._by_node.items() if names}

    @property
    def has_shared(self) -> bool:
        return bool(self._shared)


#: counter set -> counter -> an amount (what a pool has left, or a device takes)
Counters = dict[str, dict[str, Decimal]]


def count_consumed(left: Counters, d: Device, sign: int) -> None:
    """Add (``sign`` 1) or take (-1) what ``d`` consumes of its pool's counters to ``left``."""
    for set_name, counters in d.consumes.items():
        have = left.setdefault(set_name, {})
        for counter, amount in counters.items():
            have[counter] = have.get(counter, Decimal(0)) + sign * amount


def counters_left(
    pools: Iterable[NodePool],
    taken: Callable[[DeviceId], bool],
    shares: Callable[[DeviceId], Mapping[str, Decimal] | None] = lambda d: None,
) -> dict[tuple[str, str], Counters]:
    """Per pool with shared counters: its totals less what its allocated devices take (those
    allocated to a claim, or shared by some, shoal's in-flight allocations included, whatever
    node they reach; a shared device takes its counters once). A pool with a counter already
    below zero is left out: as upstream's pool-wide check, it gives no counter-consuming device."""
    out: dict[tuple[str, str], Counters] = {}
    for p in pools:
        if not p.usable or not p.counters:
            continue
        left = {name: dict(counters) for name, counters in p.counters.items()}
        for d in p.consumers:
            if taken(d.id) or shares(d.id) is not None:
                count_consumed(left, d, -1)
        if all(v >= 0 for counters in left.values() for v in counters.values()):
            out[(p.driver, p.name)] = left
    return out


def _patched(device: Device, rules: list[DeviceTaintRuleInfo]) -> Device:
    taints = tuple(r.taint for r in rules if r.taint is not None and r.selects(*device.id))
    return replace(device, taints=device.taints + taints) if taints else device


@dataclass(frozen=True, slots=True)
class NodePool:
    """One pool of devices as a node sees it. A pool is allocated from only when ``usable``: all
    of its newest generation's slices seen (``incomplete`` while some are missing: a driver is
    republishing it) and consistent (``invalid``: a device listed twice, a counter set defined
    twice, a device consuming a counter no set has)."""

    driver: str
    name: str
    #: the devices of its slices that reach the node, in the allocator's order
    devices: tuple[Device, ...] = ()
    incomplete: bool = False
    invalid: str = ""
    #: counter set -> counter -> the pool's total (its ``sharedCounters``)
    counters: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    #: every device of the pool's generation that consumes counters, whatever node it reaches
    #: (an allocated one takes its share from all)
    consumers: tuple[Device, ...] = ()
    #: one of ``consumers`` declares compatibility groups: who shares a counter set is checked
    grouped: bool = False

    @property
    def usable(self) -> bool:
        return not self.incomplete and not self.invalid
