"""NodeName (Filter): a pod that names a node (``spec.nodeName``) fits only that node.

A pod with ``spec.nodeName`` is normally bound already and never queued; this plugin keeps
``shoal simulate``/``explain`` and what-if runs honest for such pods, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.core.framework.contract import Contract
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import BoolArray, Handle, Rejection
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


def fits(pod_node_name: str, node_name: str) -> bool:
    return not pod_node_name or pod_node_name == node_name


class NodeName:
    name = NAME

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if not pod.node_name:
            return ()
        keep = np.zeros(table.n, dtype=bool)
        row = table.index.get(pod.node_name)
        if row is not None:
            keep[row] = True
        return (Rejection(~keep, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)


def new(args: None, handle: Handle) -> NodeName:
    return NodeName()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(filter_blind_to_pods=True)
ENTRY = PluginEntry(NAME, new, None, NodeName, contract=CONTRACT)
