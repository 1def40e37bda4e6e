"""DynamicResources (PreEnqueue, PreFilter, Filter, PostFilter, Score, Reserve, Unreserve, PreBind):
a pod's ResourceClaims are allocated on the node it goes to, as kube-scheduler 1.37 allocates them,
and so are its extended resources that a DeviceClass provides where a node's allocatable lacks them
(:mod:`shoal.plugins.dynamicresources.extended`: a claim made for the pod).

kube-scheduler's semantics (pkg/scheduler/framework/plugins/dynamicresources, structured
parameters; read, not ported):

* **PreEnqueue**: every claim of the pod exists (UnschedulableAndUnresolvable otherwise, so the pod
  waits outside the queue): a claim named by ``resourceClaimName`` must be in the cache
  (``resourceclaim.resource.k8s.io "x" not found``); a claim from ``resourceClaimTemplateName``
  waits until the resourceclaim controller created it and recorded its name in
  ``status.resourceClaimStatuses`` (``pod "ns/p": ResourceClaim not created yet``) and must be owned
  by the pod; a claim being deleted is refused.
* **PreFilter**: as PreEnqueue, then per claim: allocated and reserved for 256 other consumers
  (``resourceclaim in use``); unallocated but being allocated for another pod right now (``resource
  claim ns/c is in the process of being allocated``); a request naming a DeviceClass that does not
  exist (``request gpu: device class x does not exist``). No claims: Skip.
* **Filter**: an allocated claim restricts the pod to the nodes its allocation's node selector picks
  (``resourceclaim not available on the node``); the unallocated claims must all be allocatable on
  the node from the devices it reaches (its own slices, ``allNodes`` and ``nodeSelector`` slices),
  excluding every device already allocated to any claim, by anyone, and those shoal holds for pods
  in flight (``cannot allocate all claims``). Every rejection is UnschedulableAndUnresolvable, as
  upstream's: evicting pods does not free their claims' devices, so preemption cannot help. The
  allocator is :mod:`shoal.plugins.dynamicresources.allocator`: class and request CEL selectors, ``exactly``
  with ``count`` and ``allocationMode: All``, ``firstAvailable``, ``constraints[].matchAttribute``. A
  selector that cannot be evaluated is an Error naming the claim and the expression, never a match.
* **Score** prefers the node where a ``firstAvailable`` request gets an earlier subrequest: ``8 - i``
  per request allocated by its subrequest ``i``, normalised to 0..100 by the best node
  (:mod:`shoal.plugins.dynamicresources.scoring`); a pod without ``firstAvailable`` scores 0 everywhere, at
  no cost.
* **Reserve** holds the allocation in the cache's DRA store (the devices are taken for every later
  cycle); **Unreserve** drops it.
* **PreBind** writes, per claim, what kube-scheduler writes: the ``delete-protection`` finalizer and
  ``status.allocation`` for a claim it allocated, and the pod (resource ``pods``, name, uid) in
  ``status.reservedFor``, through the ClaimWriter (``Handle.extras[CLAIM_WRITER]``). A claim that
  someone else allocated meanwhile fails it (the 409 of a stale resourceVersion).
* **PostFilter** (no node fits): deallocates a claim of the pod that no other pod uses and whose
  allocation kept the pod off a node (``deallocation of ResourceClaim completed``), or deletes an
  extended-resource claim left from an earlier attempt, so that the next attempt starts afresh.

Vectorised where it pays: when the pod's unallocated claims amount to one ``ExactCount`` request
with no constraint (the common "N GPUs" claim), Filter counts the free matching devices per node
(selector results memoised per device, so a cycle over 1,000 nodes × 8 devices is lookups) and the
allocation is searched at Reserve, on the chosen node only; otherwise the search runs per node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    ClusterEvent,
    Diagnosis,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
    the_pod_itself,
)
from shoal.core.framework.invoker import PluginFailed
from shoal.core.framework.profile import PluginEntry
from shoal.core.framework.scoring import default_normalize
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Code, Status
from shoal.plugins.dynamicresources import gangs
from shoal.plugins.dynamicresources.allocator import (
    INVALID_POOLS,
    AllocationError,
    InvalidPools,
    Matcher,
    allocate,
    allocation_config,
    allocation_selector,
)
from shoal.plugins.dynamicresources.binding import Args, broken, wait_for_binding
from shoal.plugins.dynamicresources.explain import describe_claims, node_request
from shoal.plugins.dynamicresources.extended import (
    CANNOT_FIT,
    STALE,
    ExtendedClaim,
    in_memory_claim,
    is_dra_extended,
    make_claim,
    mapped,
    requests_and_mappings,
)
from shoal.plugins.dynamicresources.objects import (
    ALLOCATION_EXACT_COUNT,
    OPTIONAL_NODE_OPERATIONS,
    RESERVED_FOR_MAX,
    AllocatedDevice,
    Device,
    ResourceClaimInfo,
)
from shoal.plugins.dynamicresources.podclaims import bind_to, native_group, pod_claims
from shoal.plugins.dynamicresources.ports import CLAIM_WRITER, ClaimWriter
from shoal.plugins.dynamicresources.scoring import Allocation, score_rows
from shoal.plugins.dynamicresources.store import DraStore, NodePool
from shoal.plugins.nodeaffinity import term_mask

NAME = "DynamicResources"
STATE_KEY = f"PreFilter{NAME}"
log = logging.getLogger("shoal.dra")

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
#: PostFilter's words when it deallocated a claim that kept the pod off every node
DEALLOCATED = "deallocation of ResourceClaim completed"
#: PostFilter's words when it deleted an extended-resource claim left from an earlier attempt
DELETED = "deletion of ResourceClaim completed"
NOT_YET = "which shoal does not evaluate yet"


def _unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), NAME)


@dataclass
class _State:
    #: claims already allocated (by anyone) and claims this pod's cycle must allocate
    allocated: list[ResourceClaimInfo]
    to_allocate: list[ResourceClaimInfo]
    #: node -> each to_allocate claim's devices there (filled by Filter, or at Reserve)
    by_node: dict[str, list[tuple[AllocatedDevice, ...]]] = field(default_factory=dict)
    #: the claims Reserve assumed (keys), for Unreserve and PreBind
    assumed: list[str] = field(default_factory=list)
    #: allocated claims whose node selector left out a node Filter looked at (PostFilter's)
    unavailable: set[str] = field(default_factory=set)
    #: of ``allocated``: claims another member of the pod's gang is allocating (gangs.py)
    pending: set[str] = field(default_factory=set)
    #: the pod's requests a DeviceClass provides (DRA-backed extended resources: extended.py)
    extended: dict[str, int] = field(default_factory=dict)
    #: a claim made for them in an earlier attempt (PostFilter deletes it)
    stale: ResourceClaimInfo | None = None
    #: the resources a node takes from DRA -> the claims to allocate there, and what the
    #: extended-resource claim among them asks (None: none)
    variants: dict[frozenset[str], tuple[list[ResourceClaimInfo], ExtendedClaim | None]] = field(
        default_factory=dict
    )
    #: the extended-resource claim Reserve assumed (its in-memory key, what it asks), and the one
    #: PreBind created (Unreserve deletes it)
    extended_claim: tuple[str, ExtendedClaim] | None = None
    created: ResourceClaimInfo | None = None
    #: node -> a joint allocation with the gang's members waiting there (see ``_jointly``): each
    #: such member's claim (key) with its devices anew, then this pod's claims' devices
    joint: dict[
        str, tuple[list[tuple[str, tuple[AllocatedDevice, ...]]], list[tuple[AllocatedDevice, ...]]]
    ] = field(default_factory=dict)
    #: the members' allocations Reserve replaced with the joint one (Unreserve puts them back)
    replaced: list[ResourceClaimInfo] = field(default_factory=list)


class DynamicResources:
    name = NAME
    needs_pre_filter = True

    def __init__(self, handle: Handle, args: Args | None = None) -> None:
        self.handle = handle
        #: how long PreBind waits for devices' binding conditions (``bindingTimeout``), seconds
        self.binding_timeout = (args or Args()).binding_timeout_seconds
        self.cache: ClusterCache = handle.cache
        self.matcher = Matcher()
        #: the gang members holding assumed claims (gangs.py)
        self.gang = gangs.GangDevices()
        #: PostFilter's and Unreserve's writes under way (kept so they are not collected mid-flight)
        self._writes: set[asyncio.Task[None]] = set()
        #: (devices_version, table version, the slices that name a node that does not exist)
        self._ghosts: tuple[int, int, tuple[str, ...]] = (-1, -1, ())

    # -- PreEnqueue / PreFilter ------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.resource_claims:
            return SUCCESS
        why = pod_claims(self.cache.store(DraStore), pod)[1]
        return _unresolvable(why) if why else SUCCESS

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        store = self.cache.store(DraStore)
        claims, why = pod_claims(store, pod)
        if why:
            return None, _unresolvable(why)
        extended = mapped(pod, store.extended_class) if pod.containers else {}
        if not claims and not extended:
            return None, Status.skip()
        allocated: list[ResourceClaimInfo] = []
        to_allocate: list[ResourceClaimInfo] = []
        pending: set[str] = set()  # allocated by another member of the pod's gang, not written yet
        for claim in claims:
            if claim.allocated is not None:
                mine = claim.reserved_for_pod(pod.uid, native_group(pod))
                if not mine and len(claim.reserved_for) >= RESERVED_FOR_MAX:
                    return None, _unresolvable("resourceclaim in use")
                allocated.append(claim)
                continue
            if claim.key in store.assumed:
                if self.gang.shared_pending(claim.key, pod, self.handle.waiting):  # gangs.py
                    allocated.append(store.assumed[claim.key])
                    pending.add(claim.key)
                    continue
                return None, _unresolvable(f"resource claim {claim.key} is in the process of being allocated")
            for c in claim.constraints:
                if c.unsupported:
                    return None, _unresolvable(
                        f"claim {claim.key}, constraint uses {c.unsupported}, {NOT_YET}"
                    )
            for alternatives in claim.requests:
                for req in alternatives:
                    if req.unsupported:
                        why = f"claim {claim.key}, request {req.name} uses {req.unsupported}, {NOT_YET}"
                        return None, _unresolvable(why)
                    if req.device_class not in store.classes:
                        why = f"request {req.name}: device class {req.device_class} does not exist"
                        return None, _unresolvable(why)
            to_allocate.append(claim)
        st = _State(allocated, to_allocate, extended=extended, pending=pending)
        if extended:
            st.stale = store.extended_claim(pod.uid)
        state.write(STATE_KEY, st)
        # no PreFilterResult for allocated claims (nor does upstream return one): Filter rejects
        # the nodes their selectors leave out, and PostFilter learns which claims did
        return None, SUCCESS

    # -- Filter --------------------------------------------------------------------------------
    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        st: _State = state.require(STATE_KEY)
        if st.stale is not None:  # made in an earlier attempt: PostFilter deletes it, then anew
            return [Rejection(candidates.copy(), STALE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
        unavailable = _unavailable(st, table, candidates, self.binding_timeout)
        out = []
        if unavailable.any():
            out.append(Rejection(unavailable, NOT_AVAILABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if not st.to_allocate and not st.extended:
            return out
        rows = np.flatnonzero(candidates & ~unavailable)
        cannot_fit = np.zeros(table.n, dtype=bool)
        groups = self._groups(st, pod, table, rows, cannot_fit)
        if cannot_fit.any():
            out.append(Rejection(cannot_fit, CANNOT_FIT, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        none = np.zeros(table.n, dtype=bool)
        invalid = np.zeros(table.n, dtype=bool)
        failed = np.zeros(table.n, dtype=bool)
        nothing: list[ResourceClaimInfo] = []  # the claims of the nodes where nothing matches
        st.by_node = {}
        for claims, where in groups:
            if not claims:  # a device plugin serves all of it there: nothing to allocate
                continue
            try:
                if _simple(claims):  # counting free devices will do, but where devices share counters
                    shared = np.array([self.shares_counters(table, int(r)) for r in where], dtype=bool)
                    some = np.zeros(table.n, dtype=bool)
                    failed |= self._count_free(claims, table, where[~shared], some)
                    if some.any():
                        nothing = claims
                    none |= some
                    failed |= self._search(st, claims, table, where[shared], invalid)
                else:
                    failed |= self._search(st, claims, table, where, invalid)
            except AllocationError as exc:
                raise PluginFailed(Status.error(str(exc))) from None
        if none.any():  # upstream says only CANNOT_ALLOCATE; shoal says why when nothing matches
            out.append(
                Rejection(none, self._nothing_matches(nothing, table), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            )
        if invalid.any():
            out.append(Rejection(invalid, INVALID_POOLS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        taken = failed & ~none & ~invalid
        if taken.any() and pod.group_key is not None:  # chosen with the gang's members instead
            taken &= ~self._jointly(st, pod, table, taken)
        if taken.any():
            out.append(Rejection(taken, CANNOT_ALLOCATE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return out

    def _jointly(self, st: _State, pod: PodInfo, table: NodeTable, rows: BoolArray) -> BoolArray:
        """The nodes of ``rows`` where the pod's claims fit with its gang members' there chosen
        anew (:mod:`shoal.plugins.dynamicresources.gangs`); Reserve moves the members."""
        store = self.cache.store(DraStore)
        peers = self.gang.waiting_peers(store, self.handle.waiting, pod)
        ok = np.zeros(table.n, dtype=bool)
        for row in np.flatnonzero(rows).tolist():
            theirs = peers.get(table.name(row))
            if not theirs:
                continue
            mine, _ = self._node_variant(st, pod, table, row)
            pools = self.node_pools(table, row)
            found = gangs.joint(store, self.matcher, theirs, mine, pools, optional_operations(table, row))
            if found is not None:
                st.joint[table.name(row)] = found
                ok[row] = True
        return ok

    def _groups(
        self, st: _State, pod: PodInfo, table: NodeTable, rows: IntArray, cannot_fit: BoolArray
    ) -> list[tuple[list[ResourceClaimInfo], IntArray]]:
        """``rows`` grouped by the claims to allocate there: the pod's, and for its extended
        resources a node does not offer (allocatable absent or 0) the claim DRA must fill. A
        node that lacks a domain-prefixed resource the pod asks for and no class provides is
        ``cannot_fit`` (upstream's, when the pod has some DRA-backed ones)."""
        if not st.extended:
            return [(st.to_allocate, rows)]
        n = table.n
        for resource, amount in pod.requests.items():
            if amount > 0 and resource not in st.extended and is_dra_extended(resource):
                lacking = rows[table.allocatable[table.resource_row(resource), :n][rows] <= 0]
                cannot_fit[lacking] = True
        rows = rows[~cannot_fit[rows]]
        names = sorted(st.extended)
        from_dra = np.vstack([table.allocatable[table.resource_row(r), :n][rows] <= 0 for r in names])
        out = []
        for pattern in np.unique(from_dra, axis=1).T:
            where = rows[(from_dra == pattern[:, None]).all(axis=0)]
            claims, _ = self._variant(
                st, pod, frozenset(r for r, dra in zip(names, pattern, strict=True) if dra)
            )
            out.append((claims, where))
        return out

    def _variant(
        self, st: _State, pod: PodInfo, from_dra: frozenset[str]
    ) -> tuple[list[ResourceClaimInfo], ExtendedClaim | None]:
        """The claims to allocate on a node that takes ``from_dra`` from DRA (memoised per cycle)."""
        hit = st.variants.get(from_dra)
        if hit is None:
            store = self.cache.store(DraStore)
            wanted = (
                requests_and_mappings(pod.containers, from_dra, store.extended_class) if from_dra else None
            )
            if wanted is None or not wanted.requests:
                hit = (st.to_allocate, None)
            else:
                hit = ([*st.to_allocate, in_memory_claim(pod, wanted)], wanted)
            st.variants[from_dra] = hit
        return hit

    def _node_variant(
        self, st: _State, pod: PodInfo, table: NodeTable, row: int
    ) -> tuple[list[ResourceClaimInfo], ExtendedClaim | None]:
        """The claims to allocate on the node at ``row``."""
        if not st.extended:
            return st.to_allocate, None
        n = table.n
        dra = frozenset(r for r in st.extended if table.allocatable[table.resource_row(r), :n][row] <= 0)
        return self._variant(st, pod, dra)

    def shares_counters(self, table: NodeTable, row: int) -> bool:
        """A device of the node's pools takes a share of its pool's counters, or is shared by
        several allocations: which devices fit together is then the search's to find, not a count
        of free ones."""
        return any(d.consumes or d.multi or d.skip_node_operations for d in self.node_devices(table, row))

    def _nothing_matches(self, claims: Sequence[ResourceClaimInfo], table: NodeTable) -> str:
        """The reason for nodes none of whose devices match the request (taken or not), naming
        the slices that publish devices for nodes that do not exist."""
        claim = claims[0]
        if claim.extended:  # no name to give: the claim does not exist yet
            return CANNOT_ALLOCATE
        req = claim.requests[0][0]
        why = f"{CANNOT_ALLOCATE}: no device matches claim {claim.key}, request {req.name} "
        why += f"(device class {req.device_class})"
        store = self.cache.store(DraStore)
        if self._ghosts[:2] != (store.devices_version, table.version):  # a scan per change, not per call
            names = sorted(
                f"ResourceSlice {s.name} names node {s.node_name}, which does not exist"
                for s in store.slices.values()
                if s.node_name and s.node_name not in table.index
            )
            self._ghosts = (store.devices_version, table.version, tuple(names[:3]))
        return "; ".join([why, *self._ghosts[2]])

    def node_pools(self, table: NodeTable, row: int) -> tuple[NodePool, ...]:
        """The pools the node at ``row`` reaches (the store keeps them until a slice changes)."""
        spec = table.specs[row]
        return self.cache.store(DraStore).pools_for(table.name(row), spec.labels if spec is not None else {})

    def node_devices(self, table: NodeTable, row: int) -> tuple[Device, ...]:
        """The devices the node at ``row`` may allocate from (of its complete, valid pools), in the
        allocator's order: the matcher's list for the node, the one the allocator searches, kept
        while the node's pools are the same objects."""
        if self.matcher.entries() > 2 * len(table) + 64:  # nodes gone since: their lists go too
            self.matcher.prune(lambda name: name in table)
        return self.matcher.ordered(self.node_pools(table, row), table.name(row))

    def _count_free(
        self, claims: Sequence[ResourceClaimInfo], table: NodeTable, rows: np.ndarray, none: BoolArray
    ) -> BoolArray:
        """One ExactCount request, no constraint: a node fits when it has ``count`` free matching
        devices (exact: any such devices will do). The allocation is searched at Reserve. ``none``
        is set for the nodes where no device matches at all, free or not."""
        claim = claims[0]
        req = claim.requests[0][0]
        cls = self.cache.store(DraStore).classes[req.device_class]
        taken = self.cache.store(DraStore).taken
        failed = np.zeros(table.n, dtype=bool)
        for row in rows.tolist():
            # the devices the selectors accept, as the allocator's search would take them (kept per
            # node by the matcher while the node's devices are the same objects)
            matching = self.matcher.matching(claim, req, cls, self.node_devices(table, row), table.name(row))
            free = 0
            for d in matching:
                # free: allocated to no claim, and no taint it does not tolerate keeps it out
                free += d.id not in taken and (not d.taints or d.blocked_for(req.tolerations) is None)
                if free >= req.count:
                    break
            failed[row] = free < req.count
            none[row] = not matching
        return failed

    def _search(
        self,
        st: _State,
        claims: Sequence[ResourceClaimInfo],
        table: NodeTable,
        rows: Iterable[int],
        invalid: BoolArray,
    ) -> BoolArray:
        """The full search on each node of ``rows``: the nodes where the claims do not fit, and
        (``invalid``) those among them with an invalid pool (upstream's own reason)."""
        failed = np.zeros(table.n, dtype=bool)
        for row in rows:
            try:
                found = self._allocate(claims, table, int(row))
            except InvalidPools:
                invalid[row] = True
                found = None
            if found is None:
                failed[row] = True
            else:
                st.by_node[table.name(int(row))] = found
        return failed

    def _allocate(
        self, claims: Sequence[ResourceClaimInfo], table: NodeTable, row: int
    ) -> list[tuple[AllocatedDevice, ...]] | None:
        """The pod's claims on the node at ``row``, or None; AllocationError, InvalidPools."""
        store = self.cache.store(DraStore)
        pools = self.node_pools(table, row)
        if not pools:
            return None
        return allocate(
            claims,
            pools,
            store.classes,
            store.taken.__contains__,
            self.matcher,
            store.shares,
            store.counters_left(pools),
            node=table.name(row),
            optional_operations=optional_operations(table, row),
        )

    # -- PostFilter ----------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        """No node fits, and a claim of the pod is allocated where it keeps the pod off a node
        while no other pod uses it: deallocate it (upstream's, so that the next attempt may
        allocate it elsewhere; that write wakes the pod). Unschedulable either way: the pod is
        not placed in this cycle. The write goes through the ClaimWriter, without waiting."""
        st: _State | None = state.read(STATE_KEY)
        writer: ClaimWriter | None = self.handle.extras.get(CLAIM_WRITER)
        if st is None or writer is None:
            return Status(Code.UNSCHEDULABLE)
        store = self.cache.store(DraStore)
        for key in sorted(st.unavailable):  # upstream picks at random: no heuristic is better
            claim = store.claims.get(key)
            if claim is None or claim.allocated is None or claim.reserved_for not in ((), (pod.uid,)):
                continue
            if self._write("deallocating", claim, writer.deallocate):
                return Status(Code.UNSCHEDULABLE, (DEALLOCATED,), NAME)
            return Status(Code.UNSCHEDULABLE)
        if st.stale is not None and self._write("deleting", st.stale, writer.delete_claim):
            return Status(Code.UNSCHEDULABLE, (DELETED,), NAME)
        return Status(Code.UNSCHEDULABLE)

    def _write(
        self, what: str, claim: ResourceClaimInfo, write: Callable[[ResourceClaimInfo], Awaitable[Status]]
    ) -> bool:
        """Start ``write`` of ``claim`` without waiting (its watch event wakes the pod); False in
        a synchronous what-if run, where nothing is written."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False

        async def run() -> None:
            try:
                status = await write(claim)
            except Exception:  # an adapter bug: logged, the claim stays as it was
                log.exception("%s claim %s failed", what, claim.key)
                return
            if not status.ok:
                log.warning("%s claim %s: %s", what, claim.key, status.message)

        task = loop.create_task(run())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return True

    # -- Score ---------------------------------------------------------------------------------
    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        """Upstream's Score (:mod:`shoal.plugins.dynamicresources.scoring`): 0 everywhere unless a claim left
        to allocate has ``firstAvailable``; else each node's allocation as Filter kept it, searched
        again here only on a node Filter did not search (rare: such pods are few)."""
        st: _State | None = state.read(STATE_KEY)  # None: PreFilter skipped (no claims)
        if st is None:
            return np.zeros(len(rows), dtype=np.int64)
        return score_rows(
            st.allocated, st.to_allocate, rows, lambda row: self._allocation_at(st, pod, table, row)
        )

    def _allocation_at(self, st: _State, pod: PodInfo, table: NodeTable, row: int) -> Allocation | None:
        """The node's allocation (the pod's claims first, then the extended-resource claim)."""
        found = st.by_node.get(table.name(row))
        if found is not None:
            return found
        try:
            return self._allocate(self._node_variant(st, pod, table, row)[0], table, row)
        except InvalidPools:
            return None

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize(scores)

    # -- Reserve / Unreserve ---------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(STATE_KEY)
        if st is None or (not st.to_allocate and not st.extended):
            return SUCCESS
        table = self.cache.table
        row = table.index.get(node)
        if row is None:
            return Status(Code.UNSCHEDULABLE, (CANNOT_ALLOCATE,), NAME)
        claims, wanted = self._node_variant(st, pod, table, row)
        if not claims:  # a device plugin serves it all
            return SUCCESS
        found = st.by_node.get(node)
        joint = st.joint.get(node)
        if found is None and joint is not None:
            replaced = gangs.move(self.cache.store(DraStore), node, joint[0], labels_of(table, row))
            if replaced is not None:
                st.replaced, found = replaced, joint[1]
        if found is None:
            try:
                found = self._allocate(claims, table, row)
            except AllocationError as exc:
                return Status.error(str(exc))
            except InvalidPools as exc:
                return Status(Code.UNSCHEDULABLE, (str(exc),), NAME)
        if found is None:
            return Status(Code.UNSCHEDULABLE, (CANNOT_ALLOCATE,), NAME)
        store = self.cache.store(DraStore)
        st.assumed = []
        spec = table.specs[row]
        labels = spec.labels if spec is not None else {}
        for claim, devices in zip(claims, found, strict=True):
            # the node it is pinned to, or the merged selector of the nodeSelector slices it used
            local, terms = allocation_selector(devices, store.slices_for(node, labels), node)
            config = allocation_config(claim, devices, store.classes)
            held = replace(claim, allocated=devices, allocated_node=local, allocated_terms=terms)
            store.assume(replace(held, allocation_config=config))
            st.assumed.append(claim.key)
            self.gang.hold(claim.key, pod)
            if claim.extended and wanted is not None:
                st.extended_claim = (claim.key, wanted)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return
        store = self.cache.store(DraStore)
        for key in st.assumed:
            store.forget(key)
            self.gang.drop(key)
        st.assumed = []
        st.extended_claim = None
        gangs.restore(store, st.replaced)  # the gang's members get their own allocations back
        st.replaced = []
        writer: ClaimWriter | None = self.handle.extras.get(CLAIM_WRITER)
        if st.created is not None and writer is not None:  # made by PreBind: it goes (upstream's)
            self._write("deleting", st.created, writer.delete_claim)
        st.created = None

    # -- PreBind ---------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return SUCCESS
        writer: ClaimWriter | None = self.handle.extras.get(CLAIM_WRITER)
        if writer is None:
            return Status.error("no claim writer: this scheduler cannot allocate ResourceClaims")
        store = self.cache.store(DraStore)
        groups, group_name = self.cache.pod_groups, native_group(pod)
        for claim in st.allocated:
            if claim.key in st.pending:
                to = bind_to(pod, groups, claim.name)
                status = await gangs.join_pending(store, writer, pod, claim.key, self.binding_timeout, to)
            elif claim.reserved_for_pod(pod.uid, group_name):
                continue
            else:
                status = await writer.reserve_claim(claim, None, bind_to(pod, groups, claim.name))
            if not status.ok:
                return status
        for i, key in enumerate(list(st.assumed)):
            if st.extended_claim is not None and key == st.extended_claim[0]:
                created, status = await make_claim(store, writer, pod, *st.extended_claim)
                if created is not None:  # Unreserve deletes it; the devices are held by its name now
                    st.created, st.assumed[i] = created, created.key
                if not status.ok:
                    return status
                continue
            held = store.assumed.get(key)
            known = store.claims.get(key)
            if held is None or known is None:
                return Status.error(f"resourceclaim {key} is gone")
            if known.allocated is not None and known.reserved_for_pod(pod.uid, group_name):
                continue  # written and seen already
            if known.allocated is not None:
                return Status.error(f"claim {key} got allocated elsewhere in the meantime")
            status = await writer.reserve_claim(known, held, bind_to(pod, groups, known.name))
            if not status.ok:
                return status
        keys = [c.key for c in st.allocated] + list(st.assumed)
        if not any(
            (c := store.assumed.get(k) or store.claims.get(k)) is not None and c.has_binding_conditions
            for k in keys
        ):
            return SUCCESS
        log.info("pod %s waits for the binding conditions of its devices on node %s", pod.key, node)
        return await wait_for_binding(store, keys, self.binding_timeout)

    # -- shoal explain ---------------------------------------------------------------------------
    def describe(self, pod: PodInfo) -> list[str]:
        """For ``shoal explain``: per claim, where it is allocated, or per request how many devices
        of the cluster match its class and selectors and how many of those are free."""
        return describe_claims(self.cache.store(DraStore), self.matcher, pod)

    def explain_nodes(self, pod: PodInfo, rows: Sequence[int]) -> dict[int, str]:
        """For ``shoal explain``: per node and unallocated request, how many of the devices the
        node reaches match the class's and the request's selectors, and how many of those are
        free (``0 of 8 devices match`` names the selectors that matched nothing)."""
        claims, why = pod_claims(self.cache.store(DraStore), pod)
        pending = [c for c in claims if c.allocated is None] if not why else []
        out: dict[int, str] = {}
        for row in rows if pending else ():
            devices = list(self.node_devices(self.cache.table, row))
            out[row] = "; ".join(
                node_request(self.cache.store(DraStore), self.matcher, claim, req, devices)
                for claim in pending
                for alternatives in claim.requests
                for req in alternatives
            )
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a claim created, allocated or deallocated, a slice or class published, a node added;
        # the pod itself updated (the resourceclaim controller records a generated claim's name)
        return (
            EventRegistration(EventKind.DRA_CHANGE, claim_change_may_help, claim_consumers),
            EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),
            EventRegistration(EventKind.POD_UPDATE, _same_pod, the_pod_itself),
        )


def claim_change_may_help(pod: PodInfo, event: ClusterEvent) -> bool:
    """The queueing hint for DRA changes (upstream's isSchedulableAfterClaimChange): a class or
    slice change may help anyone, and so may a claim that freed its devices (deleted or
    deallocated: the event carries no object, see ``DraStore.apply``); any other claim change
    helps only the pods that use that claim (created for the pod, or named by it). Another pod's
    claim being created or allocated only takes devices."""
    claim = event.obj
    if not isinstance(claim, ResourceClaimInfo):
        return True
    if claim.owner_uid == pod.uid:
        return True
    return claim.namespace == pod.namespace and any(c.resolved == claim.name for c in pod.resource_claims)


def claim_consumers(event: ClusterEvent) -> tuple[str, ...] | None:
    """The pods a claim change can concern, when the claim says (``targets``): the pod a template
    claim was made for. A claim named by pods (no owning pod) may concern any pod naming it."""
    claim = event.obj
    if isinstance(claim, ResourceClaimInfo) and claim.owner_uid:
        return (claim.owner_uid,)
    return None


def labels_of(table: NodeTable, row: int) -> Mapping[str, str]:
    spec = table.specs[row]
    return spec.labels if spec is not None else {}


def _same_pod(pod: PodInfo, event: ClusterEvent) -> bool:
    return isinstance(event.obj, PodInfo) and event.obj.uid == pod.uid


def _unavailable(st: _State, table: NodeTable, candidates: BoolArray, binding_timeout: float) -> BoolArray:
    """The nodes an allocated claim's node selector leaves out (upstream's availableOnNodes): those
    none of its terms match (a node-local allocation's one term names its node); vectorised as
    NodeAffinity's terms are. An allocation without a selector is available everywhere. A claim
    whose binding failed or timed out (binding.py) is available nowhere. The claims that leave out
    a candidate are recorded for PostFilter."""
    out = np.zeros(table.n, dtype=bool)
    for claim in st.allocated:
        if broken(claim, binding_timeout):
            st.unavailable.add(claim.key)
            out |= candidates
            continue
        if claim.allocated_terms:
            matched = np.zeros(table.n, dtype=bool)
            for term in claim.allocated_terms:
                matched |= term_mask(table, term)
            if (candidates & ~matched).any():
                st.unavailable.add(claim.key)
            out |= ~matched
        if claim.skips_node_operations:  # only nodes that declare they can skip them
            lacking = np.array([not optional_operations(table, r) for r in range(table.n)], dtype=bool)
            if (candidates & lacking).any():
                st.unavailable.add(claim.key)
            out |= lacking
    return out


def optional_operations(table: NodeTable, row: int) -> bool:
    """The node at ``row`` declares OPTIONAL_NODE_OPERATIONS (``status.declaredFeatures``)."""
    spec = table.specs[row]
    return spec is not None and OPTIONAL_NODE_OPERATIONS in spec.declared_features


def _simple(claims: Sequence[ResourceClaimInfo]) -> bool:
    """One unallocated claim with one ``exactly`` ExactCount request, no constraint, no admin
    access (which may take devices in use)."""
    if len(claims) != 1:
        return False
    claim = claims[0]
    return (
        len(claim.requests) == 1
        and len(claim.requests[0]) == 1
        and claim.requests[0][0].mode == ALLOCATION_EXACT_COUNT
        and not claim.requests[0][0].admin_access
        and claim.requests[0][0].capacity is None
        and not claim.constraints
    )


def new(args: Args, handle: Handle) -> DynamicResources:
    return DynamicResources(handle, args)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    # allocated at Reserve, written at PreBind: all three needed
    evaluates=tuple(Evaluates(fidelity.RESOURCE_CLAIMS, point) for point in ("filter", "reserve", "preBind")),
    # a pod with claims never shares its PreFilter (the field is not pod-only); for one without,
    # the Filter passes every node whatever it holds
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, DynamicResources, contract=CONTRACT, stores=(DraStore,))
