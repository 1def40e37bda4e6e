"""NodePorts (PreFilter, Filter): a pod's host ports must be free on the node.

Two ports conflict when protocol and port match and their host IPs are equal or either is
``0.0.0.0``. A pod's host ports are those of its app containers and of its sidecars (init
containers with ``restartPolicy: Always``), both for what it asks and for what it holds on its node
(``objects.pod_host_ports``, kube-scheduler's ``util.GetHostPorts``). A conflict is
``Unschedulable`` (another pod may leave). Only nodes that have any host port in use are looked at
one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    EventKind,
    EventRegistration,
    Handle,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Status

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"

Port = tuple[str, str, int]


def conflicts(wanted: Iterable[Port], used: Iterable[Port]) -> bool:
    used = list(used)
    for proto, ip, port in wanted:
        for uproto, uip, uport in used:
            if proto == uproto and port == uport and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


class NodePorts:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS if pod.host_ports else SKIP

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        if not pod.host_ports:
            return ()
        n = table.n
        bad = np.zeros(n, dtype=bool)
        for row in np.flatnonzero(table.has_ports[:n] & candidates):
            if conflicts(pod.host_ports, table.ports[int(row)]):
                bad[row] = True
        return (Rejection(bad, REASON),)

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.POD_DELETE),)


def new(args: None, handle: Handle) -> NodePorts:
    return NodePorts()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(Evaluates(fidelity.HOST_PORTS),), pod_only_pre_filter=True, filter_blind_to_pods=True
)
ENTRY = PluginEntry(NAME, new, None, NodePorts, contract=CONTRACT)
