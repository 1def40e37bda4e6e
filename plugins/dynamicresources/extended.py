"""Extended resources backed by DRA (KEP 5004, GA in 1.37): a pod asking ``nvidia.com/gpu: 1`` on a
node whose GPUs come from a DRA driver, not a device plugin, gets them through a ResourceClaim the
scheduler makes for it, as kube-scheduler 1.37 makes it (read, not ported).

* A DeviceClass provides ``deviceclass.resource.kubernetes.io/<its name>`` and, when it sets one, its
  ``spec.extendedResourceName`` (``DraStore.extended_class``).
* Per node and resource: a node that lists the resource in its allocatable (a device plugin) serves
  it as before (NodeResourcesFit counts it); one whose allocatable lacks it or says 0 needs it from
  DRA (NodeResourcesFit leaves it to DynamicResources).
* The claim has one ``ExactCount`` request per container and resource, named
  ``container-<i>-request-<j>`` (``i``: the container's index in init containers then containers;
  ``j``: the resource's index among the container's sorted request names), of the class, without
  selectors; a plain init container first reuses the devices of the sidecars and containers after it,
  and of the plain init containers' requests only the largest is kept (they run one at a time).
  ``requestMappings`` say which request serves which container's resource.
* PreBind creates it (``generateName: <pod>-extended-resources-``, the pod its controlling owner,
  annotated ``resource.kubernetes.io/extended-resource-claim: "true"``), writes its allocation and
  reservation, and records it in the pod's ``status.extendedResourceClaimStatus``.
* A claim left from an earlier attempt (a bind that failed after it was made) keeps the pod off
  every node (``cannot schedule extended resource claim``) until PostFilter deletes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from shoal.core.state.objects import PodInfo
from shoal.core.state.podrequests import ContainerRequests
from shoal.core.state.status import Status
from shoal.plugins.dynamicresources.objects import (
    ALLOCATION_EXACT_COUNT,
    EXTENDED_RESOURCE_CLAIM,
    DeviceClassInfo,
    DeviceRequest,
    ResourceClaimInfo,
    consumer,
)
from shoal.plugins.dynamicresources.ports import DELETE_PROTECTION, ClaimWriter
from shoal.plugins.dynamicresources.store import DraStore

#: the name of the claim before PreBind creates it (upstream's, not a valid name: never written)
IN_MEMORY_NAME = "<extended-resources>"
STALE = "cannot schedule extended resource claim"
CANNOT_FIT = "cannot fit resource"


def is_dra_extended(resource: str) -> bool:
    """A name a DeviceClass may provide: an extended resource (a domain outside kubernetes.io),
    or the implicit ``deviceclass.resource.kubernetes.io/<class>``."""
    if resource.startswith("deviceclass.resource.kubernetes.io/"):
        return True
    if "/" not in resource or resource.startswith("requests."):
        return False
    domain = resource.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """One ``status.extendedResourceClaimStatus.requestMappings`` entry."""

    container: str
    resource: str
    request: str

    def as_dict(self) -> dict[str, str]:
        return {"containerName": self.container, "resourceName": self.resource, "requestName": self.request}


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    """What a node needs from DRA for the pod's extended resources: the claim's requests and mappings."""

    requests: tuple[DeviceRequest, ...]
    mappings: tuple[RequestMapping, ...]


def mapped(pod: PodInfo, class_of: Callable[[str], DeviceClassInfo | None]) -> dict[str, int]:
    """The pod's non-zero requests a DeviceClass provides (upstream: nothing to do without one)."""
    return {r: q for r, q in pod.requests.items() if q > 0 and is_dra_extended(r) and class_of(r) is not None}


def requests_and_mappings(
    containers: tuple[ContainerRequests, ...],
    resources: frozenset[str],
    class_of: Callable[[str], DeviceClassInfo | None],
) -> ExtendedClaim:
    """The requests (sorted by name, as strings) and mappings for ``resources``, the extended
    resources the node takes from DRA."""
    requests: list[DeviceRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        cls = class_of(resource)
        if cls is None:
            continue
        # per container index: the request a long-lived container makes (reusable by the plain
        # init containers before it)
        long_lived: dict[int, DeviceRequest] = {}
        long_maps: list[RequestMapping] = []
        for c in containers:
            if c.long_lived:
                req, maps = _request(c, resource, cls.name, ())
                if req is not None:
                    long_lived[c.index] = req
                long_maps += maps
        short_maps: list[RequestMapping] = []
        short_names: list[str] = []
        largest: DeviceRequest | None = None
        for c in containers:
            if c.long_lived:
                continue
            later = tuple(req for i, req in sorted(long_lived.items()) if i >= c.index)
            req, maps = _request(c, resource, cls.name, later)
            if req is not None:
                short_names.append(req.name)
                if largest is None or largest.count < req.count:
                    largest = req
            short_maps += maps
        if largest is not None and len(short_names) > 1:  # one runs at a time: the largest serves all
            dropped = set(short_names) - {largest.name}
            short_maps = [
                RequestMapping(m.container, m.resource, largest.name) if m.request in dropped else m
                for m in short_maps
            ]
        if largest is not None:
            requests.append(largest)
        requests += [req for _, req in sorted(long_lived.items())]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: r.name)
    return ExtendedClaim(tuple(requests), tuple(mappings))


def _request(
    c: ContainerRequests, resource: str, device_class: str, reusable: tuple[DeviceRequest, ...]
) -> tuple[DeviceRequest | None, list[RequestMapping]]:
    """The container's request for ``resource`` beyond the devices of ``reusable`` (None if
    those will do, or it asks for none), and its mappings."""
    want = c.scalars.get(resource, 0)
    if want <= 0:
        return None, []
    maps: list[RequestMapping] = []
    got = 0
    for req in reusable:
        got += req.count
        maps.append(RequestMapping(c.name, resource, req.name))
        if got >= want:
            return None, maps
    name = f"container-{c.index}-request-{c.keys.index(resource)}"
    maps.append(RequestMapping(c.name, resource, name))
    return DeviceRequest(name, device_class, mode=ALLOCATION_EXACT_COUNT, count=want - got), maps


def in_memory_claim(pod: PodInfo, claim: ExtendedClaim) -> ResourceClaimInfo:
    """The claim a node's allocation is searched for, before it exists (keyed apart per pod)."""
    return ResourceClaimInfo(
        namespace=pod.namespace,
        name=f"{IN_MEMORY_NAME}{pod.uid}",
        requests=tuple((r,) for r in claim.requests),
        owner_uid=pod.uid,
        extended=True,
    )


def claim_body(pod: PodInfo, claim: ExtendedClaim, finalizer: str) -> dict[str, object]:
    """The ResourceClaim PreBind creates: named by the API server from the pod's name, the pod its
    controller (the garbage collector deletes it with the pod), with the finalizer that keeps it
    while allocated."""
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
    requests = [
        {
            "name": r.name,
            "exactly": {
                "deviceClassName": r.device_class,
                "allocationMode": ALLOCATION_EXACT_COUNT,
                "count": r.count,
            },
        }
        for r in claim.requests
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{pod.name}-extended-resources-",
            "namespace": pod.namespace,
            "annotations": {EXTENDED_RESOURCE_CLAIM: "true"},
            "ownerReferences": [owner],
            "finalizers": [finalizer],
        },
        "spec": {"devices": {"requests": requests}},
    }


def claim_status(name: str, mappings: tuple[RequestMapping, ...]) -> Mapping[str, object]:
    """The pod's ``status.extendedResourceClaimStatus`` for the created claim ``name``."""
    return {"requestMappings": [m.as_dict() for m in mappings], "resourceClaimName": name}


async def make_claim(
    store: DraStore, writer: ClaimWriter, pod: PodInfo, key: str, wanted: ExtendedClaim
) -> tuple[ResourceClaimInfo | None, Status]:
    """PreBind's writes, in upstream's order: create the claim, write its allocation and
    reservation, record it in the pod's status. The devices stay held throughout: under the
    in-memory ``key`` until the claim exists, then under its name. The claim once created (for
    Unreserve to delete), and how the writes went."""
    held = store.assumed.get(key)
    if held is None:
        return None, Status.error(f"the allocation for the extended resources of pod {pod.key} is gone")
    created, status = await writer.create_claim(claim_body(pod, wanted, DELETE_PROTECTION))
    if created is None:
        return None, status
    allocated = replace(
        created,
        allocated=held.allocated,
        allocated_node=held.allocated_node,
        allocated_terms=held.allocated_terms,
        allocation_config=held.allocation_config,
    )
    store.forget(key)
    store.assume(allocated)
    status = await writer.reserve_claim(created, allocated, consumer(pod.name, pod.uid))
    if status.ok:
        status = await writer.record_extended_claim(pod, claim_status(created.name, wanted.mappings))
    return created, status
