"""SchedulingGates (PreEnqueue): a pod with ``spec.schedulingGates`` waits outside the queue.

As kube-scheduler's plugin of the same name: a gated pod is never attempted (so never bound — the
API server would refuse the Binding with 409 anyway), and it enters the queue when the pod is
updated with its last gate removed (gates can only be removed after creation). Kueue, for one,
creates its pods gated (``kueue.x-k8s.io/admission``) and lifts the gate on admission.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.interfaces import ClusterEvent, EventKind, EventRegistration, Handle, the_pod_itself
from shoal.core.framework.profile import PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Code, Status

NAME = "SchedulingGates"


def waiting_for(gates: Sequence[str]) -> str:
    """kube-scheduler's wording (Go's ``%v`` of a string slice)."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (waiting_for(pod.scheduling_gates),), NAME)

    def hold_reason(self, status: Status) -> str | None:
        """Not reported: the API server sets ``PodScheduled=False`` reason ``SchedulingGated``."""
        return None

    def events_to_register(self) -> Sequence[EventRegistration]:
        # Only an update of the pod itself lifts a gate; the queue re-runs PreEnqueue on it.
        return (EventRegistration(EventKind.POD_UPDATE, _same_pod, the_pod_itself),)


def _same_pod(pod: PodInfo, event: ClusterEvent) -> bool:
    return isinstance(event.obj, PodInfo) and event.obj.uid == pod.uid


def new(args: None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(evaluates=(Evaluates(fidelity.SCHEDULING_GATES, "preEnqueue"),), pod_only_pre_filter=True)
ENTRY = PluginEntry(NAME, new, None, SchedulingGates, contract=CONTRACT)
