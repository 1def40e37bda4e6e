"""VolumeBinding's bind check (kube-scheduler's ``checkBindings``): after PreBind's writes, are the
pod's claims bound on the node yet, still on their way, or has the binding failed?

Why here: the plugin module is near its size cap; this is the pure part, over the volume store.

kube-scheduler tells its own write not yet seen from a later change by the resourceVersion of the
object it assumed; shoal does the same with the resourceVersion PreBind read before it wrote
(``written``): while the cache holds that version, the write is not seen yet. A PV whose
``claimRef`` is gone (or lost its uid) in a later version was unbound by the PV controller; a claim
whose ``volume.kubernetes.io/selected-node`` is gone or names another node was given back by its
provisioner. Both fail the binding at once, as upstream, rather than when the bind timeout expires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shoal.core.state.status import SUCCESS, Status
from shoal.plugins.volumebinding.objects import BIND_COMPLETED, SELECTED_NODE, PVCInfo
from shoal.plugins.volumebinding.store import VolumeStore


def _fully_bound(pvc: PVCInfo) -> bool:
    return bool(pvc.volume_name) and BIND_COMPLETED in pvc.annotations


def _unseen(written: Mapping[str, str], key: str, version: str) -> bool:
    """PreBind wrote the object and the cache still holds the version it read (asked only when
    the cache does not show the write: a writer that keeps the version, as the simulator's, shows
    it at once)."""
    return key in written and written[key] == version


def check_bindings(
    store: VolumeStore,
    bindings: Sequence[tuple[str, str]],
    provisions: Sequence[str],
    written: Mapping[str, str],
    node: str,
    labels: Mapping[str, str],
) -> Status | None:
    """None: every claim is bound; SUCCESS: not yet; else why the binding failed (an Error).

    ``bindings`` are (PV, claim ``namespace/name``), ``provisions`` claims; ``written`` maps a PV's
    name or a claim's key to the resourceVersion PreBind read before writing it."""
    for pv_name, claim_key in bindings:
        pv, pvc = store.pvs.get(pv_name), store.pvcs.get(claim_key)
        if pv is None or pvc is None:
            return Status.error(f"failed to check binding: {pv_name} or {claim_key} is gone")
        if not pv.node_affinity_matches(node, labels):
            return Status.error(f'pv "{pv_name}" node affinity doesn\'t match node "{node}"')
        if pv.claim_ref is None or not pv.claim_ref.uid:
            if _unseen(written, pv_name, pv.resource_version):
                return SUCCESS
            return Status.error(f'ClaimRef got reset for pv "{pv_name}"')
        if not _fully_bound(pvc):
            return SUCCESS
    for claim_key in provisions:
        pvc = store.pvcs.get(claim_key)
        if pvc is None:
            return Status.error(f"failed to check provisioning pvc: {claim_key} is gone")
        if pvc.annotations.get(SELECTED_NODE) != node:
            if _unseen(written, claim_key, pvc.resource_version):
                return SUCCESS
            if not pvc.annotations:
                return Status.error(f'selectedNode annotation reset for PVC "{pvc.name}"')
            return Status.error(f'provisioning failed for PVC "{pvc.name}"')
        if pvc.volume_name:
            pv = store.pvs.get(pvc.volume_name)
            if pv is None:
                return SUCCESS  # not seen yet, or deleted: the claim will be unbound then
            if not pv.node_affinity_matches(node, labels):
                return Status.error(f'pv "{pv.name}" node affinity doesn\'t match node "{node}"')
        if not _fully_bound(pvc):
            return SUCCESS
    return None
