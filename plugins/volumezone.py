"""VolumeZone (PreFilter, Filter): a pod goes where the zones and regions of its bound volumes are.

kube-scheduler's semantics (pkg/scheduler/framework/plugins/volumezone, release 1.37):

* PreFilter looks up each ``persistentVolumeClaim`` volume's claim and the PersistentVolume it is
  bound to, and keeps the PV's topology labels (``topology.kubernetes.io/zone`` / ``region`` and
  their ``failure-domain.beta`` forms; a value may list several zones joined by ``__``). An unbound
  claim of a ``WaitForFirstConsumer`` class is left to VolumeBinding; any other unbound claim, a
  missing claim, class or PV is UnschedulableAndUnresolvable (``persistentvolumeclaim "data" not
  found``, ``PersistentVolume had no name``, ...). No topology labels: Skip.
* Filter: a node without any of the four labels fits; otherwise each PV label must be on the node
  (a beta key may be matched by its GA form) with one of the PV's values, or the node is
  ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).

Vectorised: one ``isin`` over a label column per PV label. Checked against upstream's unit-test
tables (tests/data/upstream/volumezone.yaml).
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
from shoal.plugins.volumebinding.objects import WAIT_FOR_FIRST_CONSUMER, PVInfo, not_found
from shoal.plugins.volumebinding.store import VolumeStore

NAME = "VolumeZone"
STATE_KEY = f"PreFilter{NAME}"
REASON = "node(s) had no available volume zone"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: PVInfo) -> list[PVTopology]:
    """The PV's topology labels; a value with an empty zone (``a____b``) is ignored, as upstream."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split("__")]
        if all(zones):
            out.append(PVTopology(pv.name, key, frozenset(zones)))
    return out


def _unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


class VolumeZone:
    name = NAME
    #: Filter reads what PreFilter computed (profile validation checks it is listed there too)
    needs_pre_filter = True

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def topologies(self, pod: PodInfo) -> tuple[list[PVTopology], Status]:
        store = self.cache.store(VolumeStore)
        out: list[PVTopology] = []
        for volume in pod.volumes:
            if volume.claim is None or volume.ephemeral:
                continue
            if not volume.claim:
                return [], _unresolvable("PersistentVolumeClaim had no name")
            pvc = store.claim(pod.namespace, volume.claim)
            if pvc is None:
                return [], _unresolvable(not_found("persistentvolumeclaim", volume.claim))
            if not pvc.volume_name:
                if not pvc.storage_class:
                    return [], _unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = store.classes.get(pvc.storage_class)
                if sc is None:
                    return [], _unresolvable(not_found("storageclass.storage.k8s.io", pvc.storage_class))
                if sc.binding_mode is None:
                    return [], _unresolvable(f'VolumeBindingMode not set for StorageClass "{sc.name}"')
                if sc.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return [], _unresolvable("PersistentVolume had no name")
            pv = store.pvs.get(pvc.volume_name)
            if pv is None:
                return [], _unresolvable(not_found("persistentvolume", pvc.volume_name))
            out.extend(pv_topologies(pv))
        return out, SUCCESS

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        topologies, status = self.topologies(pod)
        if not status.ok:
            return None, status
        if not topologies:
            return None, Status.skip()
        state.write(STATE_KEY, topologies)
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        topologies: list[PVTopology] = state.require(STATE_KEY)
        constrained = np.zeros(table.n, dtype=bool)
        for key in TOPOLOGY_LABELS:
            constrained |= table.label_column(key) >= 0
        ok = np.ones(table.n, dtype=bool)
        for t in topologies:
            match = _has(table, t.key, t.values)
            ga = _GA.get(t.key)
            if ga is not None:  # a beta key missing on the node: its GA form is read instead
                match = np.where(table.label_column(t.key) >= 0, match, _has(table, ga, t.values))
            ok &= match
        rejected = constrained & ~ok
        if not rejected.any():
            return ()
        return (Rejection(rejected, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.STORAGE_CHANGE | EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def _has(table: NodeTable, key: str, values: frozenset[str]) -> BoolArray:
    """Rows whose label ``key`` has one of ``values``."""
    known = table.label_values(key)
    hits: BoolArray = np.isin(table.label_column(key), [known[v] for v in values if v in known])
    return hits


def new(args: None, handle: Handle) -> VolumeZone:
    return VolumeZone(handle.cache)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(Evaluates(fidelity.volume("persistentVolumeClaim")),), filter_blind_to_pods=True
)
ENTRY = PluginEntry(NAME, new, None, VolumeZone, contract=CONTRACT, stores=(VolumeStore,))
