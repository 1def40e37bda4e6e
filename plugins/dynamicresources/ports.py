"""DynamicResources' port: the writes its PreBind makes, which kube/ (the API server) and sim/
(memory) implement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status
from shoal.plugins.dynamicresources.objects import ResourceClaimInfo


class ClaimWriter(Protocol):
    """What DynamicResources' PreBind writes, as kube-scheduler does (the operator's writer is
    ``kube/dra.py``; the simulator's writes in memory). Returns a non-success Status on failure (a
    409 included: the claim changed since it was read)."""

    async def reserve_claim(
        self, claim: ResourceClaimInfo, allocation: ResourceClaimInfo | None, consumer: Mapping[str, str]
    ) -> Status:
        """Add ``consumer`` (the pod, or its PodGroup: :func:`objects.consumer`) to the claim's
        ``status.reservedFor``; with ``allocation`` (a claim shoal
        allocated at Reserve) first add the ``resource.kubernetes.io/delete-protection`` finalizer,
        then write ``status.allocation`` too, guarded by the claim's resourceVersion."""
        ...

    async def deallocate(self, claim: ResourceClaimInfo) -> Status:
        """Clear the claim's ``status.allocation``, ``reservedFor`` and ``devices`` (PostFilter:
        an allocation no pod uses that keeps its pod off every node), guarded by the claim's
        resourceVersion."""
        ...

    async def create_claim(self, body: Mapping[str, Any]) -> tuple[ResourceClaimInfo | None, Status]:
        """Create the claim ``body`` (with ``generateName``) for a pod's DRA-backed extended
        resources; the claim as created (its name, uid, resourceVersion), or None and why not."""
        ...

    async def delete_claim(self, claim: ResourceClaimInfo) -> Status:
        """Delete a claim made for a pod's extended resources, its ``delete-protection``
        finalizer removed first (a claim already gone is no failure)."""
        ...

    async def record_extended_claim(self, pod: PodInfo, status: Mapping[str, Any]) -> Status:
        """Write the pod's ``status.extendedResourceClaimStatus`` (the claim's name, which request
        serves which container's resource): what the kubelet reads to prepare the devices."""
        ...


#: the key of the ClaimWriter in ``Handle.extras``
CLAIM_WRITER = "claim-writer"
#: the finalizer kube-scheduler adds to a claim it allocates (the resourceclaim controller removes it)
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
