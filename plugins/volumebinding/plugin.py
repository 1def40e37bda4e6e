"""VolumeBinding (PreFilter, Filter, PreScore, Score, Reserve, PreBind, Unreserve): a pod's claims
are bound, or can be bound, on the node it goes to; nodes whose volumes fit the claims best are preferred.

kube-scheduler's semantics (pkg/scheduler/framework/plugins/volumebinding, release 1.37):

* **PreFilter**: every claim of the pod (``persistentVolumeClaim``, and ``<pod>-<volume>`` of a
  generic ``ephemeral`` volume, which must be owned by the pod) exists, is not Lost nor being
  deleted; otherwise UnschedulableAndUnresolvable (``persistentvolumeclaim "data" not found``,
  ``waiting for ephemeral volume controller to create the persistentvolumeclaim "p-x"``, ...). A
  claim is *bound* when it names a volume and carries ``pv.kubernetes.io/bind-completed``; an
  unbound claim whose class is ``WaitForFirstConsumer`` waits for the scheduler, any other makes
  the pod ``pod has unbound immediate PersistentVolumeClaims``. A pod without claims: Skip.
* **Filter**, per node (UnschedulableAndUnresolvable, reasons in this order):
  ``node(s) didn't match PersistentVolume's node affinity`` (a bound claim's PV does not allow the
  node); ``node(s) didn't find available persistent volumes to bind`` (an unbound claim: no
  Available PV of its class with enough capacity, the same volume mode, the access modes, the
  claim's selector and node affinity for the node — smallest first, each PV to one claim, claims
  by size — and dynamic provisioning is not possible there: no provisioner,
  ``kubernetes.io/no-provisioner``, or the class's ``allowedTopologies`` exclude the node; or the
  claim's ``volume.kubernetes.io/selected-node`` names another node);
  ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``.
* **Storage capacity**: a claim to provision whose class's provisioner has a CSIDriver with
  ``storageCapacity: true`` fits a node only if a CSIStorageCapacity of the class selects the node
  (``nodeTopology``) with a limit (``maximumVolumeSize``, else ``capacity``) of at least the
  request (``node(s) did not have enough free storage``); the first such object by namespace/name
  is the one Score reads.
* **PreScore/Score** (StorageCapacityScoring, beta and on by default in 1.37): on each node, the
  claims Filter matched to existing PVs there are grouped by the PV's class, summing the claims'
  requests and the PVs' capacities; a node without such a match is scored by its provisions, their
  requests summed per class against the ``capacity`` of the CSIStorageCapacity holding them; a
  class's utilization (requested x 100 / capacity, 100 when the capacity is 0 or short) maps
  through ``shape`` (scores 0-10, scaled to 0-100; by default 100 at 0 % down to 0 at 100 %: the
  pool that leaves the most room wins), and the node scores the rounded mean over its classes, 0
  without any. PreScore Skips when no node to score has either (all would score 0).
* **Reserve** holds the node's matches in memory (the cache's volume store), so the next pods do
  not pick the same PVs; **Unreserve** drops them (as upstream, nothing written is undone).
* **PreBind** writes what kube-scheduler writes — the PV's ``claimRef`` for a static match, the
  claim's ``volume.kubernetes.io/selected-node`` for provisioning — then waits, polling the cache
  the watch keeps, until the PV controller has bound every claim (``bindTimeoutSeconds``, 600 by
  default); a claim provisioned for another node, or a PV whose claimRef was reset, fails it.

Differences, all documented in docs/differences.md: of several CSIStorageCapacity objects that hold
a claim, the first by namespace/name (upstream: the lister's first); every storage change re-queues
pods (upstream's hints are finer); an in-tree PV's node affinity is not derived from its zone labels
by CSI translation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field, field_validator

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    IntArray,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.invoker import PluginFailed
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.framework.scoring import (
    MAX_CUSTOM_SCORE,
    MAX_UTILIZATION,
    ShapePoint,
    check_increasing,
    class_mean_scores,
    shape_points,
)
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodeselectors import SelectorTerm
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status
from shoal.plugins.nodeaffinity import term_mask
from shoal.plugins.volumebinding.check import check_bindings
from shoal.plugins.volumebinding.objects import (
    BIND_COMPLETED,
    SELECTED_NODE,
    WAIT_FOR_FIRST_CONSUMER,
    CSIStorageCapacityInfo,
    PVCInfo,
    PVInfo,
    not_found,
)
from shoal.plugins.volumebinding.ports import VOLUME_WRITER, VolumeWriter
from shoal.plugins.volumebinding.store import VolumeStore
from shoal.plugins.volumebinding.translation import MIGRATION_ON, TranslationError, translated_affinity

NAME = "VolumeBinding"
STATE_KEY = f"PreFilter{NAME}"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


#: ``SetDefaults_VolumeBindingArgs`` with StorageCapacityScoring on: 10 at 0 % used, 0 at 100 %
DEFAULT_SHAPE = ({"utilization": 0, "score": MAX_CUSTOM_SCORE}, {"utilization": MAX_UTILIZATION, "score": 0})


class Args(ArgsModel):
    #: how long PreBind waits for the PV controller to bind the claims (kube-scheduler: 600)
    bind_timeout_seconds: int = Field(default=600, ge=0)
    #: storage utilization (0-100 %) -> score (0-10) of the PVs a node's claims would get; absent or
    #: empty: :data:`DEFAULT_SHAPE`, as kube-scheduler's v1 defaulting has it
    shape: list[ShapePoint] = Field(default_factory=lambda: [ShapePoint(**p) for p in DEFAULT_SHAPE])

    @field_validator("shape", mode="before")
    @classmethod
    def _default_shape(cls, value: object) -> object:
        return value if value else list(DEFAULT_SHAPE)

    @field_validator("shape")
    @classmethod
    def _increasing(cls, value: list[ShapePoint]) -> list[ShapePoint]:
        check_increasing(value)
        return value


@dataclass
class PodVolumes:
    """What one node needs: (PV, claim) to bind, claims to provision there; and, per binding, the
    PV's class, the claim's request and the PV's capacity (bytes) as Filter saw them (for Score);
    ``written``: the PVs and claims PreBind wrote, with the resourceVersion it read (the bind check
    tells its write not seen yet from a later reset by it)."""

    bindings: list[tuple[str, str]] = field(default_factory=list)
    provisions: list[str] = field(default_factory=list)
    sizes: list[tuple[str, int, int]] = field(default_factory=list)
    #: per provision whose driver publishes its capacity: the claim's class, its request and the
    #: ``capacity`` of the CSIStorageCapacity that holds it (for Score)
    provision_sizes: list[tuple[str, int, int]] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)


#: what ``_find`` returns when a claim to provision finds no CSIStorageCapacity that holds it
NO_SPACE = PodVolumes()


@dataclass
class _State:
    bound: list[PVCInfo]
    delayed: list[PVCInfo]
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False


@dataclass
class _Pool:
    """The PVs one claim may get: the one pre-bound to it, or those that fit, smallest first."""

    prebound: tuple[PVInfo, BoolArray] | None = None
    fitting: list[tuple[PVInfo, BoolArray]] = field(default_factory=list)

    def pick(self, row: int, chosen: set[str]) -> PVInfo | None:
        """The PV for the node at ``row`` (None: none; the pre-bound PV or nothing if it has one)."""
        if self.prebound is not None:
            pv, allowed = self.prebound
            return pv if allowed[row] and pv.name not in chosen else None
        return next((pv for pv, allowed in self.fitting if allowed[row] and pv.name not in chosen), None)


def fully_bound(pvc: PVCInfo) -> bool:
    return bool(pvc.volume_name) and BIND_COMPLETED in pvc.annotations


def _unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


def pod_claims(store: VolumeStore, pod: PodInfo) -> tuple[list[PVCInfo], Status]:
    """``podHasPVCs``: the pod's claims, or why it cannot be scheduled (UnschedulableAndUnresolvable)."""
    claims: list[PVCInfo] = []
    for volume in pod.volumes:
        if volume.claim is None:
            continue
        pvc = store.claim(pod.namespace, volume.claim)
        if pvc is None:
            if volume.ephemeral:
                why = "waiting for ephemeral volume controller to create the persistentvolumeclaim"
                return [], _unresolvable(f'{why} "{volume.claim}"')
            return [], _unresolvable(not_found("persistentvolumeclaim", volume.claim))
        if pvc.phase == "Lost":
            why = f'bound to non-existent persistentvolume "{pvc.volume_name}"'
            return [], _unresolvable(f'persistentvolumeclaim "{pvc.name}" {why}')
        if pvc.deleting:
            return [], _unresolvable(f'persistentvolumeclaim "{pvc.name}" is being deleted')
        if volume.ephemeral and pvc.controller_uid != pod.uid:
            why = f"was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"
            return [], _unresolvable(f"PVC {pvc.namespace}/{pvc.name} {why}")
        claims.append(pvc)
    return claims, SUCCESS


def matches_claim(pv: PVInfo, pvc: PVCInfo) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names the claim (and its uid, when set)."""
    ref = pv.claim_ref
    if ref is None or ref.name != pvc.name or ref.namespace != pvc.namespace:
        return False
    return not ref.uid or ref.uid == pvc.uid


class VolumeBinding:
    name = NAME
    #: Filter reads what PreFilter computed (profile validation checks it is listed there too)
    needs_pre_filter = True

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.cache: ClusterCache = handle.cache
        self.points = shape_points(args.shape)

    # -- PreFilter --------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        store = self.cache.store(VolumeStore)
        claims, status = pod_claims(store, pod)
        if not status.ok:
            return None, status
        if not claims:
            return None, Status.skip()
        bound: list[PVCInfo] = []
        delayed: list[PVCInfo] = []
        for pvc in claims:
            if fully_bound(pvc):
                bound.append(pvc)
                continue
            sc = store.classes.get(pvc.storage_class) if pvc.storage_class else None
            if sc is not None and sc.binding_mode is None:
                return None, Status.error(f'VolumeBindingMode not set for StorageClass "{sc.name}"')
            if sc is not None and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER and not pvc.volume_name:
                delayed.append(pvc)
            else:
                return None, _unresolvable(UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _State(bound, delayed))
        return None, SUCCESS

    # -- Filter -----------------------------------------------------------------------------
    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        st: _State = state.require(STATE_KEY)
        store = self.cache.store(VolumeStore)
        n = table.n
        node_conflict = np.zeros(n, dtype=bool)
        pv_missing = np.zeros(n, dtype=bool)
        decided = np.zeros(n, dtype=bool)  # upstream stops at a node's first bound claim that fails
        for pvc in st.bound:
            pv = store.pvs.get(pvc.volume_name)
            if pv is None:
                pv_missing |= ~decided
                break
            bad = ~self._affinity(pv, table) & ~decided
            node_conflict |= bad
            decided |= bad
        bind_conflict = np.zeros(n, dtype=bool)
        no_space = np.zeros(n, dtype=bool)
        st.by_node = {}
        if st.delayed:  # as upstream, the unbound claims are checked whatever the bound ones said
            pools = {pvc.key: self._pool(pvc, table) for pvc in st.delayed}
            rows = np.flatnonzero(candidates)
            space = {pvc.key: self._space(pvc, table, rows) for pvc in st.delayed}
            for row in rows:
                name = table.name(int(row))
                volumes = self._find(st.delayed, pools, space, table, int(row), name)
                if isinstance(volumes, Status):
                    raise PluginFailed(volumes)
                if volumes is None:
                    bind_conflict[row] = True
                elif volumes is NO_SPACE:
                    no_space[row] = True
                else:
                    st.by_node[name] = volumes
        out = []
        for mask, reason in (
            (node_conflict, NODE_CONFLICT),
            (bind_conflict, BIND_CONFLICT),
            (no_space, NOT_ENOUGH_SPACE),
            (pv_missing, PV_NOT_EXIST),
        ):
            if mask.any():
                out.append(Rejection(mask, reason, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return out

    def _affinity(self, pv: PVInfo, table: NodeTable) -> BoolArray:
        """Rows whose labels (and name) satisfy the PV's required node affinity; for an in-tree PV,
        on the nodes whose CSINode lists its plugin as migrated, the affinity translated to its CSI
        driver's topology (translation.py; a PV that cannot be translated fails the cycle there,
        as upstream's Filter error: PluginFailed)."""
        plain = _terms_mask(pv.node_affinity, table)
        if pv.migrated is None or pv.migrated[0] not in MIGRATION_ON:
            return plain
        plugin, csi_nodes = pv.migrated[0], self.cache.store(VolumeStore).csi_nodes
        migrated = np.zeros(table.n, dtype=bool)
        for name, csi_node in csi_nodes.items():
            row = table.index.get(name)
            if row is not None and plugin in csi_node.migrated_plugins:
                migrated[row] = True
        if not migrated.any():
            return plain
        try:
            terms = translated_affinity(plugin, pv.in_tree_id, pv.labels, pv.node_affinity)
        except TranslationError as exc:
            raise PluginFailed(Status.error(f"could not translate pv: {exc}")) from None
        if terms is pv.node_affinity:
            return plain
        return np.where(migrated, _terms_mask(terms, table), plain)

    def _space(
        self, pvc: PVCInfo, table: NodeTable, rows: IntArray
    ) -> dict[int, CSIStorageCapacityInfo] | None:
        """Where the claim could be provisioned by capacity (upstream's hasEnoughCapacity): None when
        the check does not apply (no class, no CSIDriver of its provisioner that publishes
        ``storageCapacity``, no request); otherwise, per row of ``rows`` that has it, the
        CSIStorageCapacity that holds the claim there: of the class, whose limit
        (``maximumVolumeSize``, else ``capacity``) is at least the request, whose ``nodeTopology``
        selects the node; the first by namespace/name (upstream takes the lister's first)."""
        store = self.cache.store(VolumeStore)
        sc = store.classes.get(pvc.storage_class) if pvc.storage_class else None
        driver = store.csi_drivers.get(sc.provisioner) if sc is not None else None
        if sc is None or driver is None or not driver.storage_capacity or pvc.request <= 0:
            return None
        fits = sorted(
            (
                c
                for c in store.capacities.values()
                if c.storage_class == sc.name and (c.limit or 0) >= pvc.request and c.limit is not None
            ),
            key=lambda c: c.key,
        )
        indexed: dict[tuple[str, str], list[CSIStorageCapacityInfo]] = {}
        scanned: list[CSIStorageCapacityInfo] = []
        for c in fits:  # a node-local pool names its node in one label: found by a lookup
            if c.node_topology is None:
                continue
            one = next(
                (r for r in c.node_topology.requirements if r.operator == "In" and len(r.values) == 1), None
            )
            if one is None:
                scanned.append(c)
            else:
                indexed.setdefault((one.key, next(iter(one.values))), []).append(c)
        keys = {k for k, _ in indexed}
        out: dict[int, CSIStorageCapacityInfo] = {}
        for row in rows.tolist():
            spec = table.specs[row]
            labels = spec.labels if spec is not None else {}
            found = [*scanned, *(c for k in keys if k in labels for c in indexed.get((k, labels[k]), ()))]
            first = min((c for c in found if c.reaches(labels)), key=lambda c: c.key, default=None)
            if first is not None:
                out[row] = first
        return out

    def _find(
        self,
        claims: list[PVCInfo],
        pools: dict[str, _Pool],
        space: dict[str, dict[int, CSIStorageCapacityInfo] | None],
        table: NodeTable,
        row: int,
        node: str,
    ) -> PodVolumes | Status | None:
        """``FindPodVolumes`` for the unbound claims on one node: what to bind or provision there,
        None when it cannot, ``NO_SPACE`` when a claim to provision finds no capacity there, a
        Status when the claims are broken (an Error)."""
        store = self.cache.store(VolumeStore)
        spec = table.specs[row]
        labels = spec.labels if spec is not None else {}
        out = PodVolumes()
        to_match: list[PVCInfo] = []
        to_provision: list[PVCInfo] = []
        for pvc in claims:
            selected = store.assumed_claims.get(pvc.key) or pvc.annotations.get(SELECTED_NODE)
            if selected is not None:
                if selected != node:
                    return None
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        chosen: set[str] = set()
        for pvc in sorted(to_match, key=lambda c: c.request):
            pv = pools[pvc.key].pick(row, chosen)
            if pv is None:
                to_provision.append(pvc)
                continue
            chosen.add(pv.name)
            out.bindings.append((pv.name, pvc.key))
            out.sizes.append((pv.storage_class, pvc.request, pv.capacity or 0))
        for pvc in to_provision:
            if not pvc.storage_class:
                return Status.error(f'no class for claim "{pvc.key}"')
            sc = store.classes.get(pvc.storage_class)
            if sc is None:
                return Status.error(f'failed to find storage class "{pvc.storage_class}"')
            if not sc.provisioner or sc.provisioner == NO_PROVISIONER:
                return None
            if sc.allowed_topologies and not any(t.matches(node, labels) for t in sc.allowed_topologies):
                return None
            where = space.get(pvc.key)
            if where is not None:
                held = where.get(row)
                if held is None:
                    return NO_SPACE
                if held.capacity is not None:  # upstream's Score reads capacity (nil: it crashes)
                    out.provision_sizes.append((sc.name, pvc.request, held.capacity))
            out.provisions.append(pvc.key)
        return out

    def _pool(self, pvc: PVCInfo, table: NodeTable) -> _Pool:
        """``FindMatchingVolume``'s node-independent checks, once per claim: the PV pre-bound to the
        claim (if any), else the Available PVs that fit it, smallest first; each with the rows its
        node affinity allows (vectorised, so the per-node search is a lookup)."""
        store = self.cache.store(VolumeStore)
        fitting: list[tuple[PVInfo, BoolArray]] = []
        for pv in store.pvs.values():
            if pv.storage_class != pvc.storage_class:
                continue  # upstream lists the PVs of the claim's class
            taken = store.assumed_pvs.get(pv.name)  # Reserve's claimRef, not written yet
            if taken is not None and taken != pvc.key:
                continue
            if taken is None and pv.claim_ref is not None and not matches_claim(pv, pvc):
                continue
            if (pv.capacity or 0) < pvc.request or pv.volume_mode != pvc.volume_mode or pv.deleting:
                continue
            if pv.attributes_class != pvc.attributes_class:  # VolumeAttributesClass, pre-bound too
                continue
            if taken is not None or matches_claim(pv, pvc):
                return _Pool(prebound=(pv, self._affinity(pv, table)))
            if pv.phase != "Available":
                continue
            if pvc.selector is not None and not pvc.selector.matches(pv.labels):
                continue
            if not set(pvc.access_modes) <= set(pv.access_modes):
                continue
            fitting.append((pv, self._affinity(pv, table)))
        fitting.sort(key=lambda item: item[0].capacity or 0)
        return _Pool(fitting=fitting)

    # -- PreScore / Score ----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        """Skip unless a node to score has a claim matched to an existing PV: every node would
        score 0 (a pod without unbound delayed-binding claims never has one)."""
        st: _State | None = state.read(STATE_KEY)
        if st is None or not st.by_node:
            return SKIP
        names, by_node = table.names, st.by_node
        matched = (by_node.get(names[row] or "") for row in rows.tolist())
        return SUCCESS if any(v is not None and (v.bindings or v.provision_sizes) for v in matched) else SKIP

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        """Per node, the rounded mean over the matched PVs' classes of ``shape(utilization)``."""
        st: _State | None = state.read(STATE_KEY)
        by_node = st.by_node if st is not None else {}
        groups: dict[tuple[int, str], list[int]] = {}  # (position in rows, class) -> requested, capacity
        for i, row in enumerate(rows.tolist() if by_node else ()):
            volumes = by_node.get(table.names[row] or "")
            if volumes is None:
                continue
            for cls, req, cap in volumes.sizes:
                sums = groups.setdefault((i, cls), [0, 0])
                sums[0] += req
                sums[1] += cap
            # no static binding there: the provisions by the capacity that holds them (upstream's
            # Score: requests summed per class, the capacity the last provision's, not summed)
            for cls, req, cap in volumes.provision_sizes if not volumes.sizes else ():
                sums = groups.setdefault((i, cls), [0, 0])
                sums[0] += req
                sums[1] = cap
        sizes = list(groups.values())
        return class_mean_scores(
            self.points, [i for i, _ in groups], [r for r, _ in sizes], [c for _, c in sizes], len(rows)
        )

    # -- Reserve / Unreserve ------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return SUCCESS
        if not st.delayed:
            st.all_bound = True
            return SUCCESS
        volumes = st.by_node.get(node)
        if volumes is None:
            return Status.error(f'no pod volume found for node "{node}"')
        store = self.cache.store(VolumeStore)
        for pv, claim in volumes.bindings:
            store.assumed_pvs[pv] = claim
        for claim in volumes.provisions:
            store.assumed_claims[claim] = node
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        st: _State | None = state.read(STATE_KEY)
        volumes = st.by_node.get(node) if st is not None else None
        if volumes is not None:
            self._forget(volumes)

    def _forget(self, volumes: PodVolumes) -> None:
        store = self.cache.store(VolumeStore)
        for pv, claim in volumes.bindings:
            if store.assumed_pvs.get(pv) == claim:
                del store.assumed_pvs[pv]
        for claim in volumes.provisions:
            store.assumed_claims.pop(claim, None)

    # -- PreBind ------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.all_bound:
            return SUCCESS
        volumes = st.by_node.get(node)
        if volumes is None:
            return Status.error(f'no pod volume found for node "{node}"')
        writer: VolumeWriter | None = self.handle.extras.get(VOLUME_WRITER)
        if writer is None:
            return Status.error("no volume writer: this scheduler cannot bind volumes")
        store = self.cache.store(VolumeStore)
        known = pod.uid in self.cache.pods  # the cache holds every pod the watch has seen
        for pv_name, claim_key in volumes.bindings:
            pv, pvc = store.pvs.get(pv_name), store.pvcs.get(claim_key)
            if pv is None or pvc is None:
                return Status.error(f"binding volumes: {pv_name} or {claim_key} is gone")
            ref = pv.claim_ref
            if ref is not None and (ref.namespace, ref.name) != (pvc.namespace, pvc.name):
                # taken since Reserve: upstream's update of the object it assumed gets a 409 here
                return Status.error(
                    f'binding volumes: pv "{pv_name}" was bound to {ref.namespace}/{ref.name}'
                )
            if not matches_claim(pv, pvc) or not pv.claim_ref or not pv.claim_ref.uid:
                volumes.written[pv_name] = pv.resource_version
                status = await writer.bind_volume(pv, pvc)
                if not status.ok:
                    return status
        for claim_key in volumes.provisions:
            pvc = store.pvcs.get(claim_key)
            if pvc is None:
                return Status.error(f"binding volumes: {claim_key} is gone")
            selected = pvc.annotations.get(SELECTED_NODE)
            if selected is not None and selected != node:  # given another node since Reserve
                return Status.error(f'binding volumes: claim "{claim_key}" was given node "{selected}"')
            if selected != node:
                volumes.written[claim_key] = pvc.resource_version
                status = await writer.select_node(pvc, node)
                if not status.ok:
                    return status
        return await self._wait_bound(volumes, node, pod.uid if known else None)

    async def _wait_bound(self, volumes: PodVolumes, node: str, uid: str | None) -> Status:
        """``checkBindings`` every half second until every claim is bound, or the bind timeout; a
        pod (``uid``: one the cache held when PreBind began) deleted meanwhile stops it at once."""
        deadline = time.monotonic() + self.args.bind_timeout_seconds
        while True:
            if uid is not None and uid not in self.cache.pods:
                return Status.error("binding volumes: pod does not exist any more")
            status = self._check(volumes, node)
            if status is None:
                self._forget(volumes)
                return SUCCESS
            if not status.ok:
                return status
            if time.monotonic() >= deadline:
                return Status.error("binding volumes: timed out waiting for the PV controller")
            await asyncio.sleep(0.5)

    def _check(self, volumes: PodVolumes, node: str) -> Status | None:
        """None: all bound; SUCCESS: not yet; else why it failed (``core.volumecheck``)."""
        row = self.cache.table.index.get(node)
        spec = self.cache.table.specs[row] if row is not None else None
        labels = spec.labels if spec is not None else {}
        store = self.cache.store(VolumeStore)
        return check_bindings(store, volumes.bindings, volumes.provisions, volumes.written, node, labels)

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a claim or PV created or bound, a class added, a node relabelled into a PV's affinity
        return (EventRegistration(EventKind.STORAGE_CHANGE | EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: Args, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args, handle)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(
        Evaluates(fidelity.volume("persistentVolumeClaim")),
        Evaluates(fidelity.volume("ephemeral")),
    ),
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, Args, VolumeBinding, contract=CONTRACT, stores=(VolumeStore,))


def _terms_mask(terms: tuple[SelectorTerm, ...] | None, table: NodeTable) -> BoolArray:
    """Rows one of ``terms`` matches (every row when None: no node affinity)."""
    if terms is None:
        return np.ones(table.n, dtype=bool)
    mask = np.zeros(table.n, dtype=bool)
    for term in terms:
        mask |= term_mask(table, term)
    return mask
