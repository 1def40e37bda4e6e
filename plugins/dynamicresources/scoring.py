"""DynamicResources' Score: how high in its ``firstAvailable`` lists a node's allocation got.

As kube-scheduler 1.37 (``Score`` / ``computeScore`` / ``NormalizeScore`` in
pkg/scheduler/framework/plugins/dynamicresources, DRAPrioritizedList GA; read, not ported): for
each of the pod's claims, its allocation (``status.allocation`` for a claim allocated before this
cycle, otherwise the one Filter found on the node), and each request of the claim that uses
``firstAvailable``: when the allocation used subrequest ``i`` of it (a result naming
``request/subrequest``), the node scores ``8 - i`` (``FirstAvailableDeviceRequestMaxSize``);
``exactly`` requests add nothing. A pod none of whose claims is left to allocate scores 0
everywhere (upstream keeps no per-node allocation then). NormalizeScore is
``DefaultNormalizeScore(100, reverse=false)``: ``score * 100 // max``, all 0 when the max is 0.

Pure: the caller hands in the claims and, per node, the allocation Filter found (or a way to
compute it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from shoal.core.framework.interfaces import IntArray
from shoal.plugins.dynamicresources.objects import AllocatedDevice, ResourceClaimInfo

#: ``resourceapi.FirstAvailableDeviceRequestMaxSize``: a firstAvailable list has at most 8 entries
FIRST_AVAILABLE_MAX = 8

Allocation = Sequence[tuple[AllocatedDevice, ...]]


def _subrequests(claim: ResourceClaimInfo) -> list[tuple[str, ...]]:
    """The subrequest names of each ``firstAvailable`` request of the claim (``exactly`` requests,
    whose names have no ``/``, are left out)."""
    return [tuple(r.name for r in alts) for alts in claim.requests if alts and "/" in alts[0].name]


def uses_first_available(claims: Sequence[ResourceClaimInfo]) -> bool:
    """Whether any claim has a ``firstAvailable`` request (else every node scores 0)."""
    return any(_subrequests(c) for c in claims)


def points(claim: ResourceClaimInfo) -> dict[str, int]:
    """What each firstAvailable subrequest of the claim is worth: ``request/sub_i`` -> ``8 - i``."""
    return {name: FIRST_AVAILABLE_MAX - i for names in _subrequests(claim) for i, name in enumerate(names)}


def _worth(worth: dict[str, int], devices: Sequence[AllocatedDevice]) -> int:
    """An allocation's points: each request (subrequest) it used counts once, however many devices."""
    return sum(worth.get(r, 0) for r in {d.request for d in devices}) if worth else 0


def claim_score(claim: ResourceClaimInfo, devices: Sequence[AllocatedDevice]) -> int:
    """One claim's share (upstream's loop body of computeScore): ``8 - i`` per firstAvailable
    request whose subrequest ``i`` the allocation ``devices`` used."""
    return _worth(points(claim), devices)


def compute_score(
    allocated: Sequence[ResourceClaimInfo], to_allocate: Sequence[ResourceClaimInfo], found: Allocation
) -> int:
    """computeScore: the claims allocated before this cycle by their recorded allocation, the
    others by ``found`` (their devices on the node, in order)."""
    if len(found) < len(to_allocate):
        raise ValueError(
            f"number of allocations {len(found)} is smaller than number of claims needing allocation"
        )
    score = sum(claim_score(c, c.allocated or ()) for c in allocated)
    return score + sum(claim_score(c, devices) for c, devices in zip(to_allocate, found, strict=False))


def uniform(to_allocate: Sequence[ResourceClaimInfo]) -> bool:
    """Whether the score is the same on every node that passed Filter: every firstAvailable
    request left to allocate has one subrequest, which an allocation that succeeded must use."""
    return all(len(names) == 1 for c in to_allocate for names in _subrequests(c))


def score_rows(
    allocated: Sequence[ResourceClaimInfo],
    to_allocate: Sequence[ResourceClaimInfo],
    rows: IntArray,
    allocation_at: Callable[[int], Allocation | None],
) -> IntArray:
    """The raw scores of the node rows ``rows`` (feasible: Filter found an allocation on each).
    ``allocation_at(row)`` is the to_allocate claims' devices on that node, None when there is
    none (the node scores 0, as upstream's Score without a node allocation); it is only called
    when the score differs from node to node."""
    if not to_allocate or not uses_first_available([*allocated, *to_allocate]):
        return np.zeros(len(rows), dtype=np.int64)
    fixed = sum(claim_score(c, c.allocated or ()) for c in allocated)
    if uniform(to_allocate):
        fixed += sum(FIRST_AVAILABLE_MAX * len(_subrequests(c)) for c in to_allocate)
        return np.full(len(rows), fixed, dtype=np.int64)
    scores = []
    for row in rows.tolist():
        found = allocation_at(row)  # computeScore itself, so upstream's table checks this path
        scores.append(0 if found is None else compute_score(allocated, to_allocate, found))
    return np.array(scores, dtype=np.int64)
