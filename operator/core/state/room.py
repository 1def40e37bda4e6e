"""The room one node has for what a pod asks, with other pods counted in or out by their requests.

Why: "would the pod fit this node if these pods were gone, or those were added?" is, when only
resources can change, a subtraction per requested resource and the pod count. The what-ifs that
ask it many times (preemption's reprieve of victims, the nominated-pods pass on every placement)
answer it here, from the node table's columns, without touching the cache or running a Filter.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.core.state.nodetable import PODS, NodeTable
from shoal.core.state.objects import PodInfo

#: the words of a resource Filter for a node without room (kube-scheduler's NodeResourcesFit)
TOO_MANY_PODS = "Too many pods"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


class Room:
    """The room node ``row`` has for each resource ``pod`` requests and for one more pod, with
    the ``taken`` pods (say, nominated there) counted as if placed. Each pod's use is summed once
    (:meth:`use`), then counted in or out as the what-if goes."""

    def __init__(self, table: NodeTable, pod: PodInfo, row: int, taken: Sequence[PodInfo] = ()) -> None:
        self.names = [r for r, amount in pod.requests.items() if amount > 0]
        self.need = [pod.requests[r] for r in self.names] + [1]
        rows = [table.resource_row(r) for r in self.names]
        self.labels = [insufficient(table.resources[i]) for i in rows] + [TOO_MANY_PODS]
        self.free = [int(table.allocatable[i, row] - table.requested[i, row]) for i in [*rows, PODS]]
        for other in taken:
            self.count(self.use((other,)), -1)

    def use(self, pods: Sequence[PodInfo]) -> list[int]:
        """What ``pods`` hold of the resources the pod asks for, and how many pods they are."""
        return [sum(p.requests.get(r, 0) for p in pods) for r in self.names] + [len(pods)]

    def count(self, use: Sequence[int], sign: int) -> None:
        """``sign`` -1: pods that take room here; +1: pods gone (evicted)."""
        self.free = [f + sign * u for f, u in zip(self.free, use, strict=True)]

    def put_back(self, use: Sequence[int]) -> bool:
        """Count a pod that was gone in again if the pod still fits (True); else leave it out."""
        trial = [f - u for f, u in zip(self.free, use, strict=True)]
        if all(t >= n for t, n in zip(trial, self.need, strict=True)):
            self.free = trial
            return True
        return False

    def short(self) -> list[str]:
        """Why the pod does not fit, in a resource Filter's words ([] when it fits)."""
        return [label for label, f, n in zip(self.labels, self.free, self.need, strict=True) if f < n]
