"""NodeUnschedulable (Filter): cordoned nodes (``spec.unschedulable``) take no new pods
(``node(s) were unschedulable``, unresolvable), unless the pod tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule`` (empty value) by ``Toleration.tolerates``, whether
or not the node carries that taint — as kube-scheduler 1.37 does."""

from __future__ import annotations

from collections.abc import Sequence

from shoal.core.framework.contract import Contract
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import BoolArray, EventKind, EventRegistration, Handle, Rejection
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo, Taint
from shoal.core.state.status import Code

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def tolerates_unschedulable(pod: PodInfo) -> bool:
    return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)


class NodeUnschedulable:
    name = NAME

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if tolerates_unschedulable(pod):
            return ()
        return (Rejection(table.unschedulable[: table.n], REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(filter_blind_to_pods=True)
ENTRY = PluginEntry(NAME, new, None, NodeUnschedulable, contract=CONTRACT)
