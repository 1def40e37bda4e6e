"""The structured-parameters allocator: which devices of one node satisfy a pod's unallocated claims.

As ``k8s.io/dynamic-resource-allocation/structured`` (1.37), read, not ported line by line: every
request of every claim, in order; a request is ``exactly`` one alternative or ``firstAvailable``'s
subrequests tried in order; a device matches when it is free (not allocated to any claim, not
picked for this pod already), its NoSchedule and NoExecute taints are tolerated by the request
(each result carries the request's tolerations) and every CEL selector of the DeviceClass and of
the request accepts it; ``ExactCount`` takes ``count`` devices, ``All`` takes every matching
device of the node's pools and fails when one of them is taken or tainted, or none exists;
``constraints[i].matchAttribute`` makes the devices of its requests share the attribute's value
(a device without it cannot be used); devices drawing from one counter set must all declare no
compatibility group or share one (alpha; allocated devices count). The search backtracks, so an
earlier request does not take the one device a later one needed; it gives up after ``MAX_STEPS``
picks (upstream bounds it with a timeout).

Selector results are memoised per (expression, device) and dropped when the device object changes
(a slice update), and per (expression, the values it reads) when it reads only named values of
the device (cel.py's ``reads``): devices of one model cost one evaluation. The devices a request's
selectors accept are kept per node's device list, so a node searched again is one lookup.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shoal.core.state.nodeselectors import Requirement, SelectorTerm
from shoal.core.state.podclaims import JSON
from shoal.plugins.dynamicresources.capacity import CapacityError, takes
from shoal.plugins.dynamicresources.cel import CelError, compile_selector, device_activation, read_key
from shoal.plugins.dynamicresources.objects import (
    ALLOCATION_ALL,
    AllocatedDevice,
    Device,
    DeviceClassInfo,
    DeviceId,
    DeviceRequest,
    ResourceClaimInfo,
    ResourceSliceInfo,
)
from shoal.plugins.dynamicresources.store import Counters, NodePool, count_consumed, counters_left

MAX_STEPS = 100_000


class AllocationError(Exception):
    """A claim that cannot be evaluated (a selector that fails, a class that is gone): an Error,
    never a mismatch. The message names the claim and the expression."""


#: a node's devices and those of them a request's selectors accept
_Matching = tuple[Sequence[Device], list[Device]]


class Matcher:
    """CEL selector results per device, memoised; and per node's devices, the list of those a
    request's selectors accept."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, DeviceId], tuple[Device, bool]] = {}
        self._activations: dict[DeviceId, tuple[Device, dict[str, Any]]] = {}
        #: (expression, what the device holds of what it reads) -> the result
        self._by_values: dict[tuple[str, tuple[Any, ...]], bool] = {}
        #: (class selectors, request selectors) -> node (or id(devices)) -> (devices, those that match)
        self._lists: dict[tuple[tuple[str, ...], tuple[str, ...]], dict[str | int, _Matching]] = {}
        #: node (or id(pools)) -> (pools, their usable devices in the allocator's order)
        self._ordered: dict[str | int, tuple[Sequence[NodePool], tuple[Device, ...]]] = {}

    def entries(self) -> int:
        """How many nodes (or device lists) the per-node lists are kept for, at most."""
        return max([len(self._ordered), *(len(by_node) for by_node in self._lists.values())])

    def prune(self, alive: Callable[[str], bool]) -> None:
        """Forget the lists of nodes no longer in the cluster (an autoscaler's nodes come and go
        under new names: each left its lists behind until 50,000) and of unnamed device lists."""
        kept_lists: list[dict[str | int, Any]] = [self._ordered, *self._lists.values()]
        for kept in kept_lists:
            for key in [k for k in kept if not (isinstance(k, str) and alive(k))]:
                del kept[key]

    def matching(
        self,
        claim: ResourceClaimInfo,
        req: DeviceRequest,
        cls: DeviceClassInfo,
        devices: Sequence[Device],
        node: str = "",
    ) -> list[Device]:
        """The devices of ``devices`` (``node``'s, when named) the class's and the request's
        selectors accept, kept per node (or ``devices`` object) until the node's devices change
        (checked by identity: a slice update makes new ones), so a node searched again costs one
        lookup. AllocationError as :meth:`request_matches` (never kept)."""
        by_node = self._lists.setdefault((cls.selectors, req.selectors), {})
        key = node or id(devices)
        hit = by_node.get(key)
        if hit is not None and hit[0] is devices:
            return hit[1]
        found = [d for d in devices if self.request_matches(claim, req, cls, d)]
        if len(by_node) > 50_000:
            by_node.clear()
        by_node[key] = (devices, found)
        return found

    def ordered(self, pools: Sequence[NodePool], node: str = "") -> tuple[Device, ...]:
        """The usable pools' devices in the allocator's order (a pool with a device that binds
        only on the driver's word after all others, as upstream's GatherPools, each group in
        driver and pool order), kept per node (or ``pools`` object) while its pools are the same
        object: a node's entry is replaced, never piled up, when its slices change."""
        key = node or id(pools)
        hit = self._ordered.get(key)
        if hit is not None and hit[0] is pools:
            return hit[1]
        usable = [p for p in pools if p.usable]
        ordered = [p for p in usable if not _binds_late(p)] + [p for p in usable if _binds_late(p)]
        devices = tuple(d for p in ordered for d in p.devices)
        if len(self._ordered) > 50_000:
            self._ordered.clear()
        self._ordered[key] = (pools, devices)
        return devices

    def matches(self, expression: str, device: Device) -> bool:
        """Raises CelError."""
        key = (expression, device.id)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is device:
            return hit[1]
        selector = compile_selector(expression)
        if any(v is None for v in device.attributes.values()):  # an attribute without a value
            raise CelError(expression, "unsupported attribute value")
        # a selector that reads only some values of a device gives every device holding the same
        # values the same answer: evaluated once per distinct values, not once per device
        by_values = None
        if selector.reads is not None:
            by_values = (
                expression,
                read_key(device.id.driver, device.attributes, device.capacity, device.multi, selector.reads),
            )
            known = self._by_values.get(by_values)
            if known is not None:
                self._remember(key, device, known)
                return known
        act = self._activations.get(device.id)
        if act is None or act[0] is not device:
            activation = device_activation(device.id.driver, device.attributes, device.capacity, device.multi)
            act = self._activations[device.id] = (device, activation)
        result = selector.matches(act[1])
        if by_values is not None:
            if len(self._by_values) > 100_000:
                self._by_values.clear()
            self._by_values[by_values] = result
        self._remember(key, device, result)
        return result

    def _remember(self, key: tuple[str, DeviceId], device: Device, result: bool) -> None:
        if len(self._memo) > 500_000:
            self._memo.clear()
        self._memo[key] = (device, result)

    def request_matches(
        self, claim: ResourceClaimInfo, request: DeviceRequest, cls: DeviceClassInfo, device: Device
    ) -> bool:
        """Whether ``device`` satisfies the class's and the request's selectors; AllocationError
        naming the claim and expression when one cannot be evaluated."""
        for expression in (*cls.selectors, *request.selectors):
            try:
                if not self.matches(expression, device):
                    return False
            except CelError as exc:
                where = (
                    f"device class {cls.name}" if expression in cls.selectors else f"request {request.name}"
                )
                raise AllocationError(f"claim {claim.key}, {where}: {exc}") from None
        return True


@dataclass
class _Slot:
    claim: int
    alternatives: tuple[DeviceRequest, ...]


class InvalidPools(Exception):
    """Nothing could be allocated on the node and one of its pools is invalid: kube's allocator
    says ``invalid resource pools were encountered`` (the node is unschedulable, not an error)."""


#: a device's amounts per capacity name
Amounts = Mapping[str, Decimal]


@dataclass
class _Search:
    claims: Sequence[ResourceClaimInfo]
    devices: Sequence[Device]
    classes: Mapping[str, DeviceClassInfo]
    taken: Callable[[DeviceId], bool]
    matcher: Matcher
    #: (driver, pool) -> counter set -> counter -> what is left for this pod: the pool's totals
    #: less what its allocated devices take, then less what this search picked (a pool already
    #: overdrawn is not there)
    counters: dict[tuple[str, str], Counters] = field(default_factory=dict)
    #: what the committed shares of a shared device take of its capacities (None: no share)
    shares: Callable[[DeviceId], Amounts | None] = lambda d: None
    slots: list[_Slot] = field(default_factory=list)
    #: device -> the claims (indexes) it is picked for in this search (not shared devices)
    used: dict[DeviceId, set[int]] = field(default_factory=dict)
    #: shared device -> what this search's shares of it take, and how many there are
    allocating: dict[DeviceId, tuple[int, dict[str, Decimal]]] = field(default_factory=dict)
    results: list[list[AllocatedDevice]] = field(default_factory=list)
    #: (claim index, constraint index) -> the attribute value its devices share (matchAttribute),
    #: or the values its devices hold so far, each different (distinctAttribute)
    pinned: dict[tuple[int, int], Any] = field(default_factory=dict)
    distinct: dict[tuple[int, int], list[Any]] = field(default_factory=dict)
    steps: int = 0
    #: the node searched ("" when not named): what the matcher's lists are kept by
    node: str = ""
    #: the node declares OPTIONAL_NODE_OPERATIONS: devices of slices that skip node operations
    #: may be allocated there
    optional_operations: bool = False
    #: (driver, pool) -> the pool, for pools where a device declares compatibility groups
    grouped: Mapping[tuple[str, str], NodePool] = field(default_factory=dict)
    #: (driver, pool) -> counter set -> the groups every device drawing from it (allocated, or
    #: picked by this search) declares: None while none does, an empty set while all of them
    #: declare none (only group-less devices may join), else their common groups
    together: dict[tuple[str, str], dict[str, frozenset[str] | None]] = field(default_factory=dict)

    def matching(self, slot: _Slot, req: DeviceRequest) -> list[Device]:
        cls = self.classes.get(req.device_class)
        if cls is None:
            raise AllocationError(f"request {req.name}: device class {req.device_class} does not exist")
        return self.matcher.matching(self.claims[slot.claim], req, cls, self.devices, self.node)

    def place(self, i: int) -> bool:
        if i == len(self.slots):
            return True
        slot = self.slots[i]
        for req in slot.alternatives:
            found = self.matching(slot, req)
            if req.mode == ALLOCATION_ALL:  # every matching device, none taken or tainted
                found = [d for d in found if self._fits_statically(slot, req, d)]
                if not found or any(self._unusable(slot, req, d) for d in found):
                    continue
                if self._take_all(i, slot, req, found):
                    return True
                continue
            free = [d for d in found if not self._unusable(slot, req, d)]
            if len(free) >= req.count and self._pick(i, slot, req, free, 0, req.count):
                return True
        return False

    def _unusable(self, slot: _Slot, req: DeviceRequest, d: Device) -> bool:
        """kube's allocateDevice skips a device in use — allocated to a claim, or picked for this
        pod already (a shared device is in use only if allocated whole); for an ``adminAccess``
        request only one picked for the same claim — or tainted (NoSchedule, NoExecute) without a
        toleration of this request."""
        if req.admin_access and not d.multi:
            in_use = slot.claim in self.used.get(d.id, ())
        elif req.admin_access:
            in_use = False
        else:
            in_use = self.taken(d.id) or d.id in self.used
        if in_use or (d.skip_node_operations and not self.optional_operations):
            return True
        return bool(d.taints) and d.blocked_for(req.tolerations) is not None

    def _fits_statically(self, slot: _Slot, req: DeviceRequest, d: Device) -> bool:
        """``All``: a device whose capacities cannot hold the request even unshared is not one of
        "all" (one that could, but not now, fails the request)."""
        return self._takes(slot, req, d, {}) is not None

    def _takes(
        self, slot: _Slot, req: DeviceRequest, d: Device, already: Amounts
    ) -> dict[str, Decimal] | None:
        try:
            return takes(req.capacity, d.capacities, already)
        except CapacityError as exc:
            claim = self.claims[slot.claim].key
            raise AllocationError(
                f"claim {claim}, request {req.name}: checking capacity for device {d.id}: {exc}"
            ) from None

    def _try(self, slot: _Slot, req: DeviceRequest, d: Device, must: bool) -> Callable[[], None] | None:
        """Allocate ``d`` for ``req`` if it may be (kube's allocateDevice, after the in-use and
        taint checks): its counters, its capacity, the claim's constraints; a function that takes
        it all back, or None (a constraint broken where the device must be taken is an error)."""
        reserved = self._reserve(d)
        if reserved is None:
            return None
        joined = self._join(d) if reserved and self.grouped else {}
        if joined is None:
            self._release(d, reserved)
            return None
        already = self._already(d)
        taken = self._takes(slot, req, d, already)
        if taken is None:
            self._leave(d, joined)
            self._release(d, reserved)
            return None
        undo: list[tuple[int, int]] = []
        if not self._constrain(slot, req, d, undo):
            if must:
                claim = self.claims[slot.claim].key
                raise AllocationError(
                    f"claim {claim}, request {req.name}: cannot add device {d.id} because a claim "
                    "constraint would not be satisfied"
                )
            self._unpin(undo)
            self._leave(d, joined)
            self._release(d, reserved)
            return None
        self._use(slot, req, d, taken)

        def back() -> None:
            self._unuse(slot, d)
            self._unpin(undo)
            self._leave(d, joined)
            self._release(d, reserved)

        return back

    def _join(self, d: Device) -> dict[str, frozenset[str] | None] | None:
        """Compatibility groups (upstream's checkAndConsumeCompatibilityGroups): ``d`` may draw
        from each of its counter sets only beside devices whose groups it shares (a device without
        groups only beside others without); it is then counted in, and what each set held before
        is returned for :meth:`_leave`. None when it may not. Checked where its counters are taken
        (a further share of a shared device already counted is not checked again)."""
        pool = self.grouped.get((d.id.driver, d.id.pool))
        if pool is None:
            return {}
        together = self.together.get((d.id.driver, d.id.pool))
        if together is None:
            together = self.together[(d.id.driver, d.id.pool)] = self._allocated_groups(pool)
        before: dict[str, frozenset[str] | None] = {}
        for counter_set in d.consumes:
            held = together.get(counter_set)
            mine = d.groups.get(counter_set, frozenset())
            if held is not None and not _admits(held, mine):
                for name, value in before.items():
                    together[name] = value
                return None
            before[counter_set] = held
            together[counter_set] = _joined(held, mine)
        return before

    def _leave(self, d: Device, before: Mapping[str, frozenset[str] | None]) -> None:
        if before:
            together = self.together[(d.id.driver, d.id.pool)]
            for name, value in before.items():
                together[name] = value

    def _allocated_groups(self, pool: NodePool) -> dict[str, frozenset[str] | None]:
        """Per counter set of ``pool``, the groups its allocated devices (shared ones with a share,
        shoal's in-flight allocations included) declare in common, as :meth:`_join` keeps them."""
        out: dict[str, frozenset[str] | None] = {}
        for d in pool.consumers:
            if self.taken(d.id) or self.shares(d.id) is not None:
                for counter_set in d.consumes:
                    held, mine = out.get(counter_set), d.groups.get(counter_set, frozenset())
                    out[counter_set] = _joined(held, mine)
        return out

    def _already(self, d: Device) -> dict[str, Decimal]:
        """What a device's committed shares and this search's take of its capacities."""
        out = dict(self.shares(d.id) or {})
        for name, amount in self.allocating.get(d.id, (0, {}))[1].items():
            out[name] = out.get(name, Decimal(0)) + amount
        return out

    def _take_all(self, i: int, slot: _Slot, req: DeviceRequest, found: list[Device]) -> bool:
        """``allocationMode: All``: every device, or none. A device whose counters or capacity
        are spent fails the request; one that breaks a constraint is an error, as upstream's."""
        undos: list[Callable[[], None]] = []
        for d in found:
            back = self._try(slot, req, d, must=True)
            if back is None:
                for undo in reversed(undos):
                    undo()
                return False
            undos.append(back)
        if self.place(i + 1):
            return True
        for undo in reversed(undos):
            undo()
        return False

    def _pick(
        self, i: int, slot: _Slot, req: DeviceRequest, free: list[Device], start: int, left: int
    ) -> bool:
        if left == 0:
            return self.place(i + 1)
        for j in range(start, len(free) - left + 1):
            self.steps += 1
            if self.steps > MAX_STEPS:
                return False
            back = self._try(slot, req, free[j], must=False)
            if back is None:
                continue
            if self._pick(i, slot, req, free, j + 1, left - 1):
                return True
            back()
        return False

    def _constrain(self, slot: _Slot, req: DeviceRequest, d: Device, undo: list[tuple[int, int]]) -> bool:
        """Whether ``d`` keeps the claim's constraints: matchAttribute pins the first value,
        distinctAttribute records each (``undo``: what to take back if ``d`` is not kept)."""
        parent = req.name.split("/")[0]
        for k, c in enumerate(self.claims[slot.claim].constraints):
            if c.requests and parent not in c.requests and req.name not in c.requests:
                continue
            name = c.match_attribute or c.distinct_attribute
            if name not in d.attributes:
                return False
            value = _typed(d.attributes[name])
            key = (slot.claim, k)
            if c.distinct_attribute:
                seen = self.distinct.setdefault(key, [])
                if value in seen:
                    return False
                seen.append(value)
                undo.append(key)
            elif key not in self.pinned:
                self.pinned[key] = value
                undo.append(key)
            elif self.pinned[key] != value:
                return False
        return True

    def _unpin(self, undo: list[tuple[int, int]]) -> None:
        for key in reversed(undo):
            seen = self.distinct.get(key)
            if seen:
                seen.pop()
            else:
                self.pinned.pop(key, None)

    def _reserve(self, d: Device) -> bool | None:
        """Take the device's share of its pool's counters if every counter of the pool stays at
        or above zero (the check is pool-wide, as upstream's: a pool already overcommitted gives
        no counter-consuming device): True when taken, False when there was nothing to take (no
        counters, or a shared device whose first share already took them), None when it does not
        fit."""
        if not d.consumes or (d.multi and (self.shares(d.id) is not None or d.id in self.allocating)):
            return False
        pool = (d.id.driver, d.id.pool)
        left = self.counters.get(pool)
        if left is None:  # overdrawn already
            return None
        count_consumed(left, d, -1)  # only what it takes can go below zero (``counters`` has none)
        if all(left[s][c] >= 0 for s, counters in d.consumes.items() for c in counters):
            return True
        count_consumed(left, d, 1)
        return None

    def _release(self, d: Device, reserved: bool) -> None:
        if reserved:
            count_consumed(self.counters[(d.id.driver, d.id.pool)], d, 1)

    def _use(self, slot: _Slot, req: DeviceRequest, d: Device, taken: Amounts) -> None:
        if d.multi:  # a share: its own id, what it takes of each capacity
            count, amounts = self.allocating.get(d.id, (0, {}))
            for name, amount in taken.items():
                amounts[name] = amounts.get(name, Decimal(0)) + amount
            self.allocating[d.id] = (count + 1, amounts)
            share, consumed = share_id(), dict(taken)
        else:
            self.used.setdefault(d.id, set()).add(slot.claim)
            share, consumed = "", {}
        result = AllocatedDevice(
            req.name,
            d.id,
            req.tolerations,
            req.admin_access,
            share,
            consumed,
            d.binding_conditions,
            d.binding_failure_conditions,
            d.skip_node_operations,
        )
        self.results[slot.claim].append(result)

    def _unuse(self, slot: _Slot, d: Device) -> None:
        result = self.results[slot.claim].pop()
        if d.multi:
            count, amounts = self.allocating[d.id]
            for name, amount in result.consumed.items():
                amounts[name] -= amount
            if count > 1:
                self.allocating[d.id] = (count - 1, amounts)
            else:
                del self.allocating[d.id]
            return
        claims = self.used.get(d.id)
        if claims is not None:
            claims.discard(slot.claim)
            if not claims:
                del self.used[d.id]


def _admits(held: frozenset[str], mine: frozenset[str]) -> bool:
    """A device declaring ``mine`` may join devices holding ``held`` in common (an empty ``held``:
    they all declare none) on one counter set."""
    return not held if not mine else bool(held & mine)


def _joined(held: frozenset[str] | None, mine: frozenset[str]) -> frozenset[str] | None:
    """What a counter set's devices hold in common once a device declaring ``mine`` joins them
    (upstream's compatibilityGroupIntersection.add): the first device's groups; unchanged while
    either side declares none; else the intersection."""
    if held is None:
        return mine
    return held & mine if held and mine else held


def share_id() -> str:
    """A new version-4 UUID as text (a share's ``shareID``): uuid.uuid4's layout from Python's
    generator, which is seeded from the OS; a cycle makes one per candidate node."""
    n = random.getrandbits(128)
    n = (n & ~(0xF000 << 64) | (0x4000 << 64)) & ~(0xC000 << 48) | (0x8000 << 48)
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _typed(value: Any) -> tuple[type, Any]:
    """An attribute value with its type: a bool true is not the int 1, as in Go's typed compare."""
    return type(value), value


def allocate(
    claims: Sequence[ResourceClaimInfo],
    pools: Sequence[NodePool],
    classes: Mapping[str, DeviceClassInfo],
    taken: Callable[[DeviceId], bool],
    matcher: Matcher,
    shares: Callable[[DeviceId], Amounts | None] = lambda d: None,
    counters: dict[tuple[str, str], Counters] | None = None,
    node: str = "",
    optional_operations: bool = False,
) -> list[tuple[AllocatedDevice, ...]] | None:
    """Each claim's devices on one node (``pools``: what the node reaches), or None when they do
    not all fit. ``counters``: what each pool has left, as :func:`counters_left` gives it for
    ``taken`` and ``shares`` (computed when not given; changed by the search). AllocationError
    when a claim cannot be evaluated (or asks for all devices while a pool is being updated or
    invalid); InvalidPools when nothing fits and a pool is invalid. ``node``: the node ``pools``
    are of, when the caller searches the same nodes again and again (the matcher keeps a node's
    lists under its name, replacing them when its pools change). ``optional_operations``: the node
    declares OPTIONAL_NODE_OPERATIONS (else a device whose slice skips node operations is not
    used, as upstream's allocateDevice)."""
    devices = matcher.ordered(pools, node)
    if counters is None:
        counters = counters_left(pools, taken, shares)
    grouped = {(p.driver, p.name): p for p in pools if p.grouped}
    search = _Search(
        claims,
        devices,
        classes,
        taken,
        matcher,
        counters,
        shares,
        node=node,
        grouped=grouped,
        optional_operations=optional_operations,
    )
    search.results = [[] for _ in claims]
    for index, claim in enumerate(claims):
        search.slots += [_Slot(index, alternatives) for alternatives in claim.requests]
        for alternatives in claim.requests:
            if any(r.mode == ALLOCATION_ALL for r in alternatives):
                _all_needs_every_pool(claim, alternatives, pools)
    if not search.place(0):
        invalid = next((p for p in pools if p.invalid), None)
        if invalid is not None:
            raise InvalidPools(f"{INVALID_POOLS} ({invalid.driver}/{invalid.name}: {invalid.invalid})")
        return None
    return [tuple(r) for r in search.results]


def _binds_late(pool: NodePool) -> bool:
    return any(d.binding_conditions for d in pool.devices)


#: kube's words when nothing could be allocated on a node with an invalid pool
INVALID_POOLS = "invalid resource pools were encountered"


def _all_needs_every_pool(
    claim: ResourceClaimInfo, alternatives: Sequence[DeviceRequest], pools: Sequence[NodePool]
) -> None:
    """A request for all devices cannot be answered while one of the node's pools is being
    updated or is invalid: an error, as upstream's."""
    req = next(r for r in alternatives if r.mode == ALLOCATION_ALL)
    for p in pools:
        if not p.usable:
            state = "being updated" if p.incomplete else "invalid"
            raise AllocationError(
                f"claim {claim.key}, request {req.name}: asks for all devices, but resource pool "
                f"{p.driver}/{p.name} is currently {state}"
            )


def allocation_config(
    claim: ResourceClaimInfo, devices: Sequence[AllocatedDevice], classes: Mapping[str, DeviceClassInfo]
) -> tuple[JSON, ...]:
    """``allocation.devices.config``: each used class's ``spec.config`` for the requests that used it
    (``FromClass``), then the claim's own (``FromClaim``), as the allocator copies them."""
    used: dict[str, list[str]] = {}
    by_name = {req.name: req for alternatives in claim.requests for req in alternatives}
    for d in devices:
        req = by_name.get(d.request)
        if req is not None and d.request not in used.setdefault(req.device_class, []):
            used[req.device_class].append(d.request)
    out: list[JSON] = []
    for cls_name, requests in used.items():
        cls = classes.get(cls_name)
        for c in cls.config if cls is not None else ():
            out.append(
                {
                    "source": "FromClass",
                    "requests": requests,
                    **{k: v for k, v in c.items() if k != "requests"},
                }
            )
    out += [{"source": "FromClaim", **dict(c)} for c in claim.config]
    return tuple(out)


def allocation_selector(
    devices: Sequence[AllocatedDevice], reached: Iterable[ResourceSliceInfo], node: str = ""
) -> tuple[str, tuple[SelectorTerm, ...]]:
    """An allocation's node selector, as the allocator's ``createNodeSelector`` builds it from the
    slices its devices come from (``reached``: the slices the chosen node reaches; in a slice with
    ``perDeviceNodeSelection``, from each device's own): a device of a node's own slice pins it to
    that node (returned as the node's name); otherwise the one term of every ``nodeSelector`` used,
    their requirements merged into one term; ``allNodes`` adds nothing, and a selector with nothing
    left is available everywhere (no term). Counter slices never count. A device that
    ``bindsToNode`` pins it to ``node``, the node it is allocated for."""
    ids = {d.id for d in devices}
    fields: list[Requirement] = []
    expressions: list[Requirement] = []
    for s in reached:
        used = [dev for dev in s.devices if dev.id in ids]
        if node and any(dev.binds_to_node for dev in used):
            return node, (SelectorTerm((), (Requirement("metadata.name", "In", (node,)),)),)
        # a slice with perDeviceNodeSelection: each device's own selection; else the slice's
        selections = (
            [(d.node_name, d.node_selector_terms) for d in used]
            if s.per_device
            else [(s.node_name, s.node_selector_terms)]
        )
        for node_name, terms in selections if used else ():
            if node_name:
                name = Requirement("metadata.name", "In", (node_name,))
                return node_name, (SelectorTerm((), (name,)),)
            if len(terms) == 1:
                fields += [r for r in terms[0].fields if r not in fields]
                expressions += [r for r in terms[0].expressions if r not in expressions]
    return "", ((SelectorTerm(tuple(expressions), tuple(fields)),) if fields or expressions else ())
