"""One scheduling cycle's bookkeeping: the pods it popped and what it assumed for them.

A cycle pops one pod, or a gang's queued members (a gang is a cycle with N members). Each pod
placed is assumed in the cache, reserved and sent to Permit (:meth:`Cycle.assume`). Before the
cycle ends, everything it assumed is either handed to a binding task (:meth:`Cycle.hand_over`,
the commit) or released (:meth:`Cycle.release`: Permit gate rejected, Unreserve, forget). If the
cycle raises, :meth:`Cycle.rollback` releases whatever is still assumed and says which popped pods
must go back to the queue; so a bug costs its pods a backoff, never a leaked reservation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gates import PermitGate, WaitingPods
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.queue import QueuedPodInfo
from shoal.core.state.cache import ClusterCache
from shoal.core.state.status import Status

log = logging.getLogger("shoal.scheduler")


@dataclass(eq=False)  # compared by identity: a cycle looks them up in its list
class Assumed:
    """A pod assumed on ``node`` by ``cycle``: reserved if ``reserved``, at ``gate`` if it waits."""

    qpi: QueuedPodInfo
    state: CycleState
    node: str
    cycle: Cycle
    reserved: bool = False
    gate: PermitGate | None = None


class Cycle:
    """What one scheduling cycle owns until it ends (see the module docstring)."""

    def __init__(self, fw: Framework | None, cache: ClusterCache, waiting: WaitingPods, first: QueuedPodInfo):
        self.fw = fw
        self.cache = cache
        self.waiting = waiting
        #: every pod this cycle popped from the queue
        self.pods: list[QueuedPodInfo] = [first]
        #: assumed and not yet handed to binding: what a failure must give back
        self.assumed: list[Assumed] = []

    def add_members(self, members: Iterable[QueuedPodInfo]) -> None:
        """The other queued members of the gang, popped into this cycle."""
        self.pods.extend(members)

    def assume(
        self, fw: Framework, qpi: QueuedPodInfo, state: CycleState, node: str
    ) -> tuple[Assumed, Status]:
        """Assume the pod on ``node``, then Reserve, then Permit. On failure the caller releases it."""
        assumed = Assumed(qpi, state, node, self)
        self.cache.assume(qpi.pod, node)
        self.assumed.append(assumed)
        status = fw.run_reserve(state, qpi.pod, node)
        if not status.ok:
            return assumed, status  # run_reserve already ran Unreserve for every plugin
        assumed.reserved = True
        status, assumed.gate = fw.run_permit(state, qpi.pod, node)
        return assumed, status

    def release(self, fw: Framework, assumed: Assumed) -> None:
        """Undo everything after assume, for a pod whose binding never started."""
        pod = assumed.qpi.pod
        if assumed.gate is not None:
            assumed.gate.reject("", "released")
            self.waiting.remove(pod.uid)
        if assumed.reserved:
            fw.run_unreserve(assumed.state, pod, assumed.node)
        self.cache.forget(pod.uid)
        if assumed in self.assumed:
            self.assumed.remove(assumed)

    def hand_over(self, assumed: Assumed) -> None:
        """The commit: a binding task now owns the pod (and releases it if binding fails)."""
        if assumed in self.assumed:
            self.assumed.remove(assumed)

    def rollback(self) -> list[QueuedPodInfo]:
        """After the cycle raised: release all it still holds; the popped pods to requeue (not those
        deleted meanwhile or binding)."""
        for assumed in reversed(list(self.assumed)):  # release() removes from the list
            try:
                if self.fw is not None:
                    self.release(self.fw, assumed)
                else:
                    self.cache.forget(assumed.qpi.uid)
            except Exception:
                log.exception("releasing %s after a failed cycle", assumed.qpi.pod.key)
                self.cache.forget(assumed.qpi.uid)
        self.assumed.clear()
        return [m for m in self.pods if m.uid in self.cache.pods and not self.cache.placed_node(m.uid)]
