"""A pod's ResourceClaims: which claims are the pod's (upstream's ``foreachPodResourceClaim`` with
``resourceclaim.Name`` and ``IsForPod``) and whom the pod's use of each is reserved for
(``BindTo``: the pod, or its native PodGroup when both name the claim alike).

Why apart from the plugin: the same questions are asked by PreEnqueue, PreFilter, PreBind, the gang
cycle and ``shoal explain``, as upstream asks them of its resourceclaim library; claims a PodGroup
owns (DRAWorkloadResourceClaims) answer them differently from a pod's own.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.core.state.objects import NATIVE_GROUP_API, PodGroupInfo, PodInfo
from shoal.plugins.dynamicresources.objects import ResourceClaimInfo, consumer
from shoal.plugins.dynamicresources.store import DraStore


def pod_claims(store: DraStore, pod: PodInfo) -> tuple[list[ResourceClaimInfo], str]:
    """``foreachPodResourceClaim``: the pod's claims as the cache has them, or why not ("" when
    they all are: the reason is unresolvable, as upstream's)."""
    out: list[ResourceClaimInfo] = []
    for pc in pod.resource_claims:
        name = pc.resolved
        if not name:
            if pc.template:
                return [], f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
            why = "none of the supported fields are set"
            return [], f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pc.name}": {why}'
        claim = store.claims.get(f"{pod.namespace}/{name}")  # the API's copy, not an assumed one
        if claim is None:
            return [], f'resourceclaim.resource.k8s.io "{name}" not found'
        if claim.deleting:
            return [], f'resourceclaim "{name}" is being deleted'
        group = native_group(pod)
        if pc.template and claim.owner_uid != pod.uid and (group is None or claim.group_owner != group):
            # a claim the resourceclaim controller made for the pod's PodGroup is the pod's too
            # (upstream's IsForPod, DRAWorkloadResourceClaims)
            owner = "Pod is not owner" if group is None else f"neither Pod nor PodGroup {group} is the owner"
            why = f"was not created for Pod {pod.namespace}/{pod.name} ({owner})"
            return [], f"ResourceClaim {claim.key} {why}"
        out.append(claim)
    return out, ""


def native_group(pod: PodInfo) -> str | None:
    """The name of the native PodGroup the pod belongs to (``spec.schedulingGroup``), or None."""
    return pod.pod_group if pod.pod_group and pod.pod_group_api == NATIVE_GROUP_API else None


def bind_to(pod: PodInfo, groups: Mapping[str, PodGroupInfo], claim_name: str) -> dict[str, str]:
    """Upstream's ``resourceclaim.BindTo``: whom the pod's claim ``claim_name`` is reserved for.
    Its native PodGroup (looked up in ``groups``, the cache's PodGroups by key) when the pod's
    ``spec.resourceClaims`` entry for it is one of the PodGroup's ``spec.resourceClaims`` (same
    name, same claim or template); else the pod itself."""
    group = groups.get(pod.group_key or "") if native_group(pod) is not None else None
    if group is not None:
        for pc in pod.resource_claims:
            if pc.resolved != claim_name:
                continue
            if any(
                (gc.name, gc.claim_name, gc.template) == (pc.name, pc.claim_name, pc.template)
                for gc in group.resource_claims
            ):
                return consumer(group.name, group.uid, group=True)
    return consumer(pod.name, pod.uid)
