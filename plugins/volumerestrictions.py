"""VolumeRestrictions (PreFilter, Filter): in-tree disks one node cannot share, and claims with the
``ReadWriteOncePod`` access mode that another pod already uses.

kube-scheduler's semantics (pkg/scheduler/framework/plugins/volumerestrictions, release 1.37):

* **disk conflicts**, per node: a pod's GCE PD, AWS EBS, iSCSI or RBD volume conflicts with the
  same disk in a pod placed on the node — the same ``pdName`` / ``volumeID`` / ``iqn`` / pool and
  image with an overlapping Ceph monitor — unless both are read-only (EBS: even then):
  ``node(s) had no available disk`` (Unschedulable);
* **ReadWriteOncePod**: PreFilter looks up each ``persistentVolumeClaim`` volume's claim (a missing
  one: ``persistentvolumeclaim "data" not found``, UnschedulableAndUnresolvable); if a claim with
  ``ReadWriteOncePod`` is used by any placed pod, every node is ``node(s) unavailable due to
  PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod``
  (Unschedulable; preemption could free it). A pod with neither: Skip.

Placed pods are those counted on a node, bound or assumed; the cache counts the users of each
claim, so the ReadWriteOncePod check is a lookup, and only placed pods with volumes are scanned for
disks. Checked against upstream's unit-test tables (tests/data/upstream/volumerestrictions.yaml).
"""

from __future__ import annotations

from collections.abc import Sequence
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
from shoal.core.framework.profile import PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Code, Status
from shoal.plugins.volumebinding.objects import READ_WRITE_ONCE_POD, not_found
from shoal.plugins.volumebinding.store import VolumeStore

NAME = "VolumeRestrictions"
STATE_KEY = f"PreFilter{NAME}"
DISK_CONFLICT = "node(s) had no available disk"
READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
    "another pod"
)


@dataclass(frozen=True, slots=True)
class _State:
    #: ReadWriteOncePod claims of the pod already used by placed pods
    conflicting: int


class VolumeRestrictions:
    name = NAME
    #: Filter reads what PreFilter computed (profile validation checks it is listed there too)
    needs_pre_filter = True

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        disks = any(v.disk is not None for v in pod.volumes)
        rwop: set[str] = set()
        for volume in pod.volumes:
            if volume.claim is None or volume.ephemeral:
                continue
            pvc = self.cache.store(VolumeStore).claim(pod.namespace, volume.claim)
            if pvc is None:
                message = not_found("persistentvolumeclaim", volume.claim)
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))
            if READ_WRITE_ONCE_POD in pvc.access_modes:
                rwop.add(pvc.key)
        conflicting = sum(1 for key in rwop if self.cache.claim_users.get(key, 0) > 0)
        if not disks and not conflicting:
            return None, Status.skip()
        state.write(STATE_KEY, _State(conflicting))
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        st: _State = state.require(STATE_KEY)
        out: list[Rejection] = []
        conflict = np.zeros(table.n, dtype=bool)
        disks = [v.disk for v in pod.volumes if v.disk is not None]
        if disks:
            for existing, row in self.cache.placed_with_volumes():
                if conflict[row]:
                    continue
                theirs = [v.disk for v in existing.volumes if v.disk is not None]
                if any(d.conflicts(e) for d in disks for e in theirs):
                    conflict[row] = True
            if conflict.any():
                out.append(Rejection(conflict, DISK_CONFLICT, Code.UNSCHEDULABLE))
        if st.conflicting:
            out.append(Rejection(~conflict, READ_WRITE_ONCE_POD_CONFLICT, Code.UNSCHEDULABLE))
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a placed pod leaving frees its disks and claims; a new node; a claim created
        return (EventRegistration(EventKind.POD_DELETE | EventKind.NODE_ADD | EventKind.STORAGE_CHANGE),)


def new(args: None, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle.cache)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=tuple(
        Evaluates(fidelity.volume(source))
        for source in ("persistentVolumeClaim", "gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")
    ),
    filter_blind_to_pods=True,
)
ENTRY = PluginEntry(NAME, new, None, VolumeRestrictions, contract=CONTRACT, stores=(VolumeStore,))
