"""VolumeBinding's port: the writes its PreBind makes, which kube/ (the API server) and sim/
(memory) implement."""

from __future__ import annotations

from typing import Protocol

from shoal.core.state.status import Status
from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo


class VolumeWriter(Protocol):
    """What VolumeBinding's PreBind writes, as kube-scheduler's volume binder writes it (the
    operator's is ``kube/volumes.py``; the simulator's binds in memory). Each returns a non-success
    Status on failure (a 409 included: the object changed since it was read)."""

    async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
        """Set the PV's ``claimRef`` to the claim (and ``pv.kubernetes.io/bound-by-controller``),
        guarded by the PV's resourceVersion; the PV controller completes the binding."""
        ...

    async def select_node(self, claim: PVCInfo, node: str) -> Status:
        """Annotate the claim ``volume.kubernetes.io/selected-node: <node>`` (guarded by its
        resourceVersion), asking its provisioner for a volume there."""
        ...


#: the key of the VolumeWriter in ``Handle.extras``
VOLUME_WRITER = "volume-writer"


#: the key of the VolumeWriter in ``Handle.extras``
VOLUME_WRITER = "volume-writer"
