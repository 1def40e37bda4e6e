"""NodeDeclaredFeatures (PreFilter, Filter): a pod goes only to a node that declares, in
``status.declaredFeatures``, every feature its spec needs — as kube-scheduler 1.37 does (GA there,
in the default profile, last).

What a pod needs is inferred from its spec when it is parsed (``core/state/declaredfeatures.py``):
``RestartAllContainersOnContainerExits`` for a ``restartPolicyRules`` action
``RestartAllContainers`` in a container or init container, ``UserNamespacesHostNetworkSupport``
for ``hostNetwork: true`` with ``hostUsers: false``, ``VolumeBindMountOptions`` for a volume mount
with ``bindMountOptions``. A pod that needs none skips the plugin (PreFilter ``Skip``). A node
that lacks one is rejected ``node(s) didn't match Pod's required features``, unresolvable:
evicting pods does not add features to a node. Names match exactly; the node's list is read as a
set. A parked pod is retried when a node that declares all it needs is added or changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import (
    BoolArray,
    ClusterEvent,
    EventKind,
    EventRegistration,
    Handle,
    PreFilterResult,
    Rejection,
)
from shoal.core.framework.profile import PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import SKIP, SUCCESS, Code, Status

NAME = "NodeDeclaredFeatures"
REASON = "node(s) didn't match Pod's required features"
STATE_KEY = "PreFilter" + NAME


def lacks(table: NodeTable, features: frozenset[str], rows: BoolArray) -> BoolArray:
    """Of ``rows``, those whose node does not declare every one of ``features``."""
    bad = np.zeros(table.n, dtype=bool)
    specs = table.specs
    for row in np.flatnonzero(rows[: table.n]):
        spec = specs[row]
        bad[row] = spec is not None and not features <= spec.declared_features
    return bad


def declares_what_it_needs(pod: PodInfo, event: ClusterEvent) -> bool:
    """The queueing hint: the node added or changed now declares every feature the pod needs (a
    node that still lacks one cannot take it, whatever else changed)."""
    node = event.obj
    return not isinstance(node, NodeSpec) or pod.required_features <= node.declared_features


class NodeDeclaredFeatures:
    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        if not pod.required_features:
            return None, SKIP
        state.write(STATE_KEY, pod.required_features)
        return None, SUCCESS

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        required: frozenset[str] = state.require(STATE_KEY)
        return (Rejection(lacks(table, required, candidates), REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),)

    def events_to_register(self) -> Sequence[EventRegistration]:
        # the pod's own update needs no registration: the queue retries an updated pod anyway
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE, declares_what_it_needs),)


def new(args: None, handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures()


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=(Evaluates(fidelity.NODE_FEATURE),), pod_only_pre_filter=True, filter_blind_to_pods=True
)
ENTRY = PluginEntry(NAME, new, None, NodeDeclaredFeatures, contract=CONTRACT)
