"""The cluster cache: nodes (as a NodeTable), every pod's accounting, PodGroups, assume/forget.

Why: the scheduling cycle must see a node's usage the moment a pod is placed, before the API server
confirms the binding, or a burst of pods would pile onto one node. ``assume`` counts the pod on its
chosen node at once; the watch's bound pod later *confirms* the assumption; ``forget`` undoes it when
binding fails. An assumed pod whose binding finished but was never confirmed expires after
``assumed_ttl`` seconds (a lost watch event must not hold resources forever).

Every non-terminated pod is counted on its node, whoever scheduled it, so pods placed by other
schedulers are never over-committed. Pods bound to a node the cache has not seen yet are kept and
counted when the node arrives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from shoal.core.state.disruption import Nominator, PDBInfo
from shoal.core.state.hierarchy import Hierarchy, TreeNode, build_tree
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodGroupInfo, PodInfo
from shoal.core.state.placedsets import PlacedSets
from shoal.core.state.spreadselectors import SpreadSelectors

T = TypeVar("T")


@dataclass(slots=True)
class _Assumed:
    node: str
    binding_finished: bool = False
    deadline: float | None = None


class CacheError(RuntimeError):
    """A cache operation that breaks an invariant (e.g. assuming an already assumed pod)."""


@runtime_checkable
class ForgetsNodes(Protocol):
    """A plugin store that keeps something per node name: told when a node is deleted (autoscaled
    nodes come and go under new names; what is kept for each must go with it)."""

    def forget_node(self, node: str) -> None: ...


class ClusterCache:
    def __init__(self, *, assumed_ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.table = NodeTable()
        self.pods: dict[str, PodInfo] = {}
        #: where each counted pod is counted (bound or assumed): uid -> node name
        self._placed: dict[str, str] = {}
        self._assumed: dict[str, _Assumed] = {}
        self._node_pods: dict[str, set[str]] = {}
        self.pod_groups: dict[str, PodGroupInfo] = {}
        self._group_members: dict[str, set[str]] = {}
        #: CompositePodGroups and who names which as parent (core/state/hierarchy.py)
        self.hierarchy = Hierarchy()
        #: bumped whenever a group, a CompositePodGroup or a group's members change: what is
        #: computed from them (a tree's readiness) is reused while it stands
        self.groups_version = 0
        self.assumed_ttl = assumed_ttl
        self.clock = clock
        #: placed pods (bound or assumed) grouped by namespace, labels and terms: what
        #: InterPodAffinity and PodTopologySpread scan instead of every pod (core/state/placedsets.py)
        self.placed_sets = PlacedSets()
        #: labels of each namespace (namespaceSelector of pod affinity terms)
        self.namespace_labels: dict[str, dict[str, str]] = {}
        #: what plugin packages keep of the API objects they watch (DynamicResources' devices, the
        #: volume plugins' PVs and claims), one of each class: :meth:`store`
        self.stores: dict[type, object] = {}
        #: placed pods with claims or in-tree disks, and how many placed pods use each claim
        #: (``namespace/name``): what the volume plugins scan instead of every pod
        self._with_volumes: set[str] = set()
        self.claim_users: dict[str, int] = {}
        #: preemption: pods nominated to nodes, and the PodDisruptionBudgets (``namespace/name``)
        self.nominator = Nominator()
        self.pdbs: dict[str, PDBInfo] = {}
        #: Services, ReplicationControllers, ReplicaSets, StatefulSets: the selectors of a pod's
        #: default topology spread constraints (PodTopologySpread)
        self.spread_selectors = SpreadSelectors()

    def store(self, cls: type[T]) -> T:
        """The cache's one ``cls`` (a plugin package's store, made empty on first use)."""
        found = self.stores.get(cls)
        if found is None:
            found = self.stores[cls] = cls()
        assert isinstance(found, cls)
        return found

    # -- nodes ---------------------------------------------------------------------------------
    def set_node(self, spec: NodeSpec) -> bool:
        """Add or update a node. Returns True when it is new."""
        new = spec.name not in self.table
        row = self.table.set_node(spec)
        if new:
            # pods that arrived before their node are counted now
            for uid in self._node_pods.get(spec.name, ()):
                self.table.account(row, self.pods[uid], +1)
        return new

    def remove_node(self, name: str) -> None:
        """Drop a node; its pods stay known (they are gone from the API soon, or it returns). A
        plugin store that keeps something per node (``ForgetsNodes``) forgets it."""
        self.table.remove_node(name)
        for store in self.stores.values():
            if isinstance(store, ForgetsNodes):
                store.forget_node(name)

    # -- pods ----------------------------------------------------------------------------------
    def _count(self, pod: PodInfo, node: str) -> None:
        self._placed[pod.uid] = node
        self.placed_sets.add(pod, node)
        if pod.volumes:
            self._with_volumes.add(pod.uid)
            for claim in _claims(pod):
                self.claim_users[claim] = self.claim_users.get(claim, 0) + 1
        self._node_pods.setdefault(node, set()).add(pod.uid)
        row = self.table.index.get(node)
        if row is not None:
            self.table.account(row, pod, +1)

    def _uncount(self, uid: str) -> None:
        node = self._placed.pop(uid, None)
        if node is None:
            return
        pod = self.pods.get(uid)
        if pod is not None and uid in self._with_volumes:
            self._with_volumes.discard(uid)
            for claim in _claims(pod):
                if (left := self.claim_users.get(claim, 0) - 1) > 0:
                    self.claim_users[claim] = left
                else:
                    self.claim_users.pop(claim, None)
        if pod is not None:
            self.placed_sets.remove(pod, node)
        pods = self._node_pods.get(node)
        if pods is not None:
            pods.discard(uid)
            if not pods:
                del self._node_pods[node]
        row = self.table.index.get(node)
        if row is not None and pod is not None:
            self.table.account(row, pod, -1)

    def _index_group(self, pod: PodInfo, add: bool) -> None:
        key = pod.group_key
        if key is None:
            return
        self.groups_version += 1
        members = self._group_members.setdefault(key, set())
        if add:
            members.add(pod.uid)
        else:
            members.discard(pod.uid)
            if not members:
                del self._group_members[key]

    def upsert_pod(self, pod: PodInfo) -> PodInfo | None:
        """Record the API's view of a pod. Returns the previous view.

        A bound pod is counted on its node; if it was assumed, the assumption is confirmed (or moved,
        if another actor bound it elsewhere). A terminated pod is dropped.
        """
        if pod.terminated:
            return self.remove_pod(pod.uid)
        old = self.pods.get(pod.uid)
        self.nominator.update(old, pod)
        assumed = self._assumed.get(pod.uid)
        if assumed is not None and pod.bound:
            del self._assumed[pod.uid]  # confirmed by the API
        elif assumed is not None:
            # still pending in the API: keep the assumption, but refresh the pod's other fields
            if old is not None:
                self._index_group(old, False)
            self._uncount(pod.uid)
            self.pods[pod.uid] = pod
            self._index_group(pod, True)
            self._count(pod, assumed.node)
            return old
        if old is not None:
            self._index_group(old, False)
            self._uncount(pod.uid)
        self.pods[pod.uid] = pod
        self._index_group(pod, True)
        if pod.bound:
            self._count(pod, pod.node_name)
        return old

    def remove_pod(self, uid: str) -> PodInfo | None:
        old = self.pods.get(uid)
        self.nominator.remove(uid)
        self._uncount(uid)
        self._assumed.pop(uid, None)
        if old is not None:
            self._index_group(old, False)
            del self.pods[uid]
        return old

    # -- assume / forget -----------------------------------------------------------------------
    def assume(self, pod: PodInfo, node: str) -> None:
        """Count ``pod`` on ``node`` now, before the binding is confirmed."""
        if pod.uid in self._assumed:
            raise CacheError(f"pod {pod.key} is already assumed on {self._assumed[pod.uid].node}")
        if pod.uid in self._placed:
            raise CacheError(f"pod {pod.key} is already bound to {self._placed[pod.uid]}")
        if node not in self.table:
            raise CacheError(f"node {node} is not in the cache")
        if pod.uid not in self.pods:
            self.pods[pod.uid] = pod
            self._index_group(pod, True)
        self._assumed[pod.uid] = _Assumed(node)
        self._count(self.pods[pod.uid], node)

    def finish_binding(self, uid: str) -> None:
        """The Binding was accepted; start the expiry clock in case the watch never confirms it."""
        assumed = self._assumed.get(uid)
        if assumed is not None:
            assumed.binding_finished = True
            assumed.deadline = self.clock() + self.assumed_ttl

    def forget(self, uid: str) -> None:
        """Undo an assumption (binding failed or was refused). Idempotent."""
        if self._assumed.pop(uid, None) is not None:
            self._uncount(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def assumed_node(self, uid: str) -> str | None:
        a = self._assumed.get(uid)
        return a.node if a else None

    def placed_node(self, uid: str) -> str | None:
        """The node a pod counts on (bound or assumed), if any."""
        return self._placed.get(uid)

    def cleanup_expired(self, now: float | None = None) -> list[str]:
        """Forget assumptions whose binding finished more than ``assumed_ttl`` ago unconfirmed."""
        now = self.clock() if now is None else now
        expired = [u for u, a in self._assumed.items() if a.deadline is not None and a.deadline <= now]
        for uid in expired:
            self.forget(uid)
        return expired

    # -- what-ifs (preemption) -------------------------------------------------------------------
    def uncount(self, uid: str) -> str | None:
        """Take a placed pod off its node's accounting, for a what-if inside one synchronous cycle
        (preemption removing a victim); returns its node. The caller puts it back with
        :meth:`recount` before the cycle ends."""
        node = self._placed.get(uid)
        if node is not None:
            self._uncount(uid)
        return node

    def pods_on(self, node: str) -> list[PodInfo]:
        """The pods counted on ``node`` (bound or assumed), in no particular order."""
        return [self.pods[u] for u in self._node_pods.get(node, ())]

    def recount(self, pod: PodInfo, node: str) -> None:
        """Count a known pod on ``node`` (undoing :meth:`uncount`, or a nominated pod's what-if)."""
        self._count(pod, node)

    # -- placed pods with volumes (the volume plugins) --------------------------------------------
    def placed_with_volumes(self) -> Iterator[tuple[PodInfo, int]]:
        """Placed pods that have claims, ephemeral volumes or in-tree disks."""
        yield from self._rows_of(self._with_volumes)

    def _rows_of(self, uids: Iterable[str]) -> Iterator[tuple[PodInfo, int]]:
        index, placed, pods = self.table.index, self._placed, self.pods
        for uid in uids:
            row = index.get(placed[uid])
            if row is not None:
                yield pods[uid], row

    # -- namespaces (pod affinity's namespaceSelector) ------------------------------------------
    def set_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.namespace_labels[name] = labels

    def remove_namespace(self, name: str) -> None:
        self.namespace_labels.pop(name, None)

    # -- pod groups ----------------------------------------------------------------------------
    def set_pod_group(self, group: PodGroupInfo) -> None:
        self.groups_version += 1
        old = self.pod_groups.get(group.key)
        if old is not None:
            self.hierarchy.link_group(old, add=False)
        self.pod_groups[group.key] = group
        self.hierarchy.link_group(group, add=True)

    def remove_pod_group(self, key: str) -> None:
        self.groups_version += 1
        old = self.pod_groups.pop(key, None)
        if old is not None:
            self.hierarchy.link_group(old, add=False)

    def group_tree(self, group: PodGroupInfo) -> tuple[TreeNode | None, str, bool]:
        """The CompositePodGroup tree ``group`` is in (None for a group without a parent), what is
        wrong with it ("" if nothing), and whether that is only waiting: a parent not known yet."""
        if not group.parent:
            return None, "", False
        chain, problem, missing = self.hierarchy.chain(group.namespace, group.parent)
        if problem:
            return None, problem, missing
        tree, problem = build_tree(self.hierarchy, self.pod_groups, chain[-1])
        return tree, problem, False

    def group_members(self, key: str) -> list[PodInfo]:
        return [self.pods[u] for u in self._group_members.get(key, ())]

    def group_size(self, key: str) -> int:
        """Members known and not terminated (O(1): PreEnqueue asks it for every gated member)."""
        return len(self._group_members.get(key, ()))

    def group_member_uids(self, key: str) -> Collection[str]:
        """The UIDs of the group's members known and not terminated (a view, not a copy)."""
        return self._group_members.get(key, ())

    def group_counts(self, key: str) -> tuple[int, int]:
        """(members known and not terminated, members counted on a node: bound or assumed)."""
        members = self._group_members.get(key, ())
        return len(members), sum(1 for u in members if u in self._placed)


def _claims(pod: PodInfo) -> set[str]:
    """The claims (``namespace/name``) a pod's ``persistentVolumeClaim`` volumes use, each once
    (kube-scheduler's ``PodPVCKeys``: generic ephemeral volumes are not counted)."""
    return {f"{pod.namespace}/{v.claim}" for v in pod.volumes if v.claim is not None and not v.ephemeral}
