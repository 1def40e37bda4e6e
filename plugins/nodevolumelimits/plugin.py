"""NodeVolumeLimits (PreFilter, Filter): a node attaches at most as many volumes of a CSI driver as
its CSINode allows (``spec.drivers[].allocatable.count``).

kube-scheduler's semantics (pkg/scheduler/framework/plugins/nodevolumelimits, ``CSILimits``,
release 1.37):

* the volumes counted are the pod's claims (``persistentVolumeClaim`` and generic ``ephemeral``):
  a claim bound to a CSI PV counts as (driver, volumeHandle); an in-tree PV or inline volume that
  CSI migration covers (GCE PD, AWS EBS, Azure Disk, Cinder, Portworx) counts under its CSI
  driver, on nodes that have a CSINode; an unbound claim (or one whose PV is not known yet) counts
  under its StorageClass's provisioner, as a volume of its own;
* a pod with none of these: Skip. The new pod's missing claim is UnschedulableAndUnresolvable
  (``looking up PVC team/data: persistentvolumeclaim "data" not found``); an ephemeral claim
  another pod owns is an Error;
* per node, volumes the node's placed pods already use are counted once (shared volumes are not
  new), and so are the node's VolumeAttachments of CSI PVs no placed pod uses (a volume still
  attached for a pod that left; the new pod's own volumes are not matched against them, as
  upstream); for each driver with a limit, ``attached + new > limit`` is ``node(s) exceed max
  volume count`` (Unschedulable). A node without a CSINode, or whose CSINode sets no limit, fits;
* VolumeLimitScaling (beta and on in 1.37): a driver of the pod's volumes whose CSIDriver sets
  ``preventPodSchedulingIfMissing: true`` must be installed on the node (listed in its CSINode;
  a node without a CSINode has none): ``ebs.csi.aws.com CSI driver is not installed on the node``
  (Unschedulable), checked before the limits. A driver without a CSIDriver object is taken to be
  installed, as upstream.

Only nodes whose CSINode limits a driver the pod uses are looked at, with the placed pods that have
volumes. Checked against upstream's unit-test tables (tests/data/upstream/nodevolumelimits.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.invoker import PluginFailed
from shoal.core.framework.profile import PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.podvolumes import MIGRATED_PROVISIONERS
from shoal.core.state.status import SUCCESS, Code, Status
from shoal.plugins.nodevolumelimits.attachments import Attachments
from shoal.plugins.volumebinding.objects import PVCInfo, not_found
from shoal.plugins.volumebinding.store import VolumeStore

NAME = "NodeVolumeLimits"
STATE_KEY = f"PreFilter{NAME}"
REASON = "node(s) exceed max volume count"
#: after the driver's name (VolumeLimitScaling)
MISSING_DRIVER = "CSI driver is not installed on the node"

#: unique volume name (``driver/handle``) -> driver
Volumes = dict[str, str]


class _LookupError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def _driver_of_class(store: VolumeStore, pvc: PVCInfo, migration: bool) -> tuple[str, str]:
    """``getCSIDriverInfoFromSC``: an unbound claim counts under its class's provisioner."""
    sc = store.classes.get(pvc.storage_class) if pvc.storage_class else None
    if sc is None:
        return "", ""
    handle = f"claim-{pvc.namespace}/{pvc.name}"  # upstream: a random prefix, then namespace/name
    driver = sc.provisioner
    if driver in MIGRATED_PROVISIONERS:
        if not migration:
            return "", ""
        driver = MIGRATED_PROVISIONERS[driver]
    elif driver in ("kubernetes.io/azure-file", "kubernetes.io/vsphere-volume"):
        return "", ""  # migratable, but not among the plugins whose migration is counted
    return driver, handle


def _driver_of(store: VolumeStore, pvc: PVCInfo, migration: bool) -> tuple[str, str]:
    """``getCSIDriverInfo``: (driver, volume handle) of a claim ("" when it is not counted)."""
    pv = store.pvs.get(pvc.volume_name) if pvc.volume_name else None
    if pv is None:
        return _driver_of_class(store, pvc, migration)
    if pv.csi is not None:
        return pv.csi
    if pv.migrated is None or not migration:
        return "", ""
    return pv.migrated[1], pv.migrated[2]


def attachable(store: VolumeStore, pod: PodInfo, migration: bool, *, new_pod: bool) -> Volumes:
    """``filterAttachableVolumes``: the pod's volumes that count, ``migration`` when the node has a
    CSINode. For the new pod, a missing claim raises :class:`_LookupError`; for a placed pod it is
    skipped."""
    out: Volumes = {}
    for volume in pod.volumes:
        if volume.claim is None:
            if volume.migrated is not None and migration:
                _, driver, handle = volume.migrated
                out[f"{driver}/{handle}"] = driver
            continue
        if not volume.claim:
            raise _LookupError(Status.error("PersistentVolumeClaim had no name"))
        pvc = store.claim(pod.namespace, volume.claim)
        if pvc is None:
            if new_pod:
                message = f"looking up PVC {pod.namespace}/{volume.claim}: "
                message += not_found("persistentvolumeclaim", volume.claim)
                raise _LookupError(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)))
            continue
        if volume.ephemeral and pvc.controller_uid != pod.uid:
            raise _LookupError(
                Status.error(
                    f"PVC {pvc.namespace}/{pvc.name} was not created for pod {pod.namespace}/{pod.name} "
                    "(pod is not owner)"
                )
            )
        driver, handle = _driver_of(store, pvc, migration)
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    return out


@dataclass(slots=True)
class _State:
    #: the pod's volumes on nodes with a CSINode (migration on) and without; or why they cannot be known
    with_csi: Volumes | Status
    without_csi: Volumes | Status


def _volumes(store: VolumeStore, pod: PodInfo, migration: bool) -> Volumes | Status:
    try:
        return attachable(store, pod, migration, new_pod=True)
    except _LookupError as exc:
        return exc.status


class NodeVolumeLimits:
    name = NAME
    #: Filter reads what PreFilter computed (profile validation checks it is listed there too)
    needs_pre_filter = True

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not any(v.claim is not None or v.migrated is not None for v in pod.volumes):
            return None, Status.skip()
        store = self.cache.store(VolumeStore)
        state.write(STATE_KEY, _State(_volumes(store, pod, True), _volumes(store, pod, False)))
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        st: _State = state.require(STATE_KEY)
        store = self.cache.store(VolumeStore)
        has_csi = np.array(
            [n is not None and n in store.csi_nodes for n in table.names[: table.n]], dtype=bool
        )
        out: list[Rejection] = []
        for volumes, rows in ((st.with_csi, has_csi), (st.without_csi, ~has_csi)):
            if isinstance(volumes, Status):
                rows = rows & candidates
                if volumes.code is Code.ERROR and rows.any():
                    raise PluginFailed(volumes)
                if rows.any():
                    out.append(Rejection(rows, volumes.message, volumes.code))
        missing = self._drivers_missing(st, table, has_csi & candidates, ~has_csi & candidates)
        for driver, rows in missing:
            out.append(Rejection(rows, f"{driver} {MISSING_DRIVER}", Code.UNSCHEDULABLE))
        if isinstance(st.with_csi, Status) or not st.with_csi:
            return out
        checked = has_csi & candidates
        for _, rows in missing:
            checked &= ~rows  # upstream stops at the first failing check
        over = self._over_limit(st.with_csi, table, checked)
        if over.any():
            out.append(Rejection(over, REASON, Code.UNSCHEDULABLE))
        return out

    def _drivers_missing(
        self, st: _State, table: NodeTable, with_csi: BoolArray, without_csi: BoolArray
    ) -> list[tuple[str, BoolArray]]:
        """VolumeLimitScaling: nodes where a driver of the pod's volumes that sets
        ``preventPodSchedulingIfMissing`` is not installed (not in the node's CSINode; a node
        without one has none), one driver per node (the first by name; upstream takes the first of
        a map, in no set order). A driver without a CSIDriver object is taken to be installed."""
        store = self.cache.store(VolumeStore)
        out: list[tuple[str, BoolArray]] = []
        taken = np.zeros(table.n, dtype=bool)
        for volumes, rows in ((st.with_csi, with_csi), (st.without_csi, without_csi)):
            if isinstance(volumes, Status) or not rows.any():
                continue
            for driver in sorted(set(volumes.values())):
                info = store.csi_drivers.get(driver)
                if info is None or not info.prevent_scheduling_if_missing:
                    continue
                lacking = rows & ~taken & ~self._installed(driver, table)
                if lacking.any():
                    taken |= lacking
                    out.append((driver, lacking))
        return out

    def _installed(self, driver: str, table: NodeTable) -> BoolArray:
        csi_nodes = self.cache.store(VolumeStore).csi_nodes
        return np.array(
            [
                n is not None and n in csi_nodes and driver in csi_nodes[n].drivers
                for n in table.names[: table.n]
            ],
            dtype=bool,
        )

    def _over_limit(self, new: Volumes, table: NodeTable, rows: BoolArray) -> BoolArray:
        """Nodes (with a CSINode) where a limited driver would exceed its count."""
        store = self.cache.store(VolumeStore)
        attachments = self.cache.store(Attachments)
        drivers = set(new.values())
        limited: dict[int, dict[str, int]] = {}
        for r in np.flatnonzero(rows):
            csi = store.csi_nodes[table.name(int(r))]
            limits = {d: c.count for d, c in csi.drivers.items() if c.count is not None and d in drivers}
            if limits:
                limited[int(r)] = limits
        over = np.zeros(table.n, dtype=bool)
        if not limited:
            return over
        attached: dict[int, Volumes] = {row: {} for row in limited}
        for existing, row in self.cache.placed_with_volumes():
            if row in attached:
                try:
                    attached[row].update(attachable(store, existing, True, new_pod=False))
                except _LookupError as exc:
                    raise PluginFailed(
                        Status.error(f"{exc.status.message} (node {table.name(row)})")
                    ) from None
        for row, limits in limited.items():
            by_pods = attached[row]
            # VolumeAttachments on the node whose volume no placed pod uses (attached for a pod that
            # left): counted too; as upstream, the new pod's own volumes are not matched against them
            held = attachments.volumes(table.name(row), store.pvs)
            counts = _count([*by_pods.values(), *(d for name, d in held.items() if name not in by_pods)])
            fresh = _count(d for name, d in new.items() if name not in by_pods)
            if any(counts.get(d, 0) + n > limits[d] for d, n in fresh.items() if d in limits):
                over[row] = True
        return over

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a CSINode raising a limit, a placed pod leaving, a claim created, a VolumeAttachment deleted
        return (EventRegistration(EventKind.STORAGE_CHANGE | EventKind.POD_DELETE | EventKind.NODE_ADD),)


def _count(drivers: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in drivers:
        out[d] = out.get(d, 0) + 1
    return out


def new(args: None, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle.cache)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=tuple(
        Evaluates(fidelity.volume(source))
        for source in (
            "persistentVolumeClaim",
            "ephemeral",
            "gcePersistentDisk",
            "awsElasticBlockStore",
            "azureDisk",
            "cinder",
        )
    ),
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(
    NAME,
    new,
    None,
    NodeVolumeLimits,
    contract=CONTRACT,
    stores=(
        VolumeStore,
        Attachments,
    ),
)
