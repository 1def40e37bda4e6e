"""CompositePodGroups (Kubernetes 1.38, ``scheduling.k8s.io/v1beta1``): gangs of gangs.

A CompositePodGroup groups PodGroups (``spec.parentCompositePodGroupName``) and other
CompositePodGroups (its own ``parentCompositePodGroupName``) into a tree of at most four levels; a
job of replicated gangs is one root with a PodGroup per replica. What the tree means, as
kube-scheduler 1.38 reads it (``schedule_one_podgroup.go``, ``algorithm_podgroup.go``,
``hierarchy_tracker.go``):

* **one cycle for the whole root**: a member of any PodGroup under a root is placed together with
  every pending member of every PodGroup under it (the gang cycle's tree: ``core/scheduling/gangs.py``);
* **all-or-nothing at every level**: a ``gang`` CompositePodGroup holds when at least
  ``minGroupCount`` of its direct children hold (a PodGroup child when ``minCount`` of its pods are
  placed, a CompositePodGroup child by its own rule); a ``basic`` one when one child does. Under a
  level that fails, nothing is kept;
* **topology per level**: a level with ``schedulingConstraints.topology`` is placed inside one domain
  of its key, inside its parent's domain (a job in one block, each replica in one rack of it);
* **readiness**: the members wait (PreEnqueue) until the root is *ready*: a PodGroup when
  ``minCount`` of its pods exist (one, for ``basic``), a CompositePodGroup when ``minGroupCount`` of
  its children are ready (one, for ``basic``);
* **validation**: depth at most four, one Workload for the whole tree, one priority, no ``basic``
  child under a ``gang`` parent; a tree that breaks one is refused whole, naming the rule.

This module holds the model (:class:`CompositeGroupInfo`), the parent links
(:class:`Hierarchy`, kept by the cache) and the pure tree functions (:func:`build_tree`,
:func:`ready`); the condition kube-scheduler writes is :func:`composite_initially_scheduled`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.core.state.objects import PodGroupInfo, parse_time
from shoal.core.state.workloads import find_condition, gang_count, topology_key

#: the API's resource, for messages and the status writer
COMPOSITE_KIND = "CompositePodGroup"
#: kube-scheduler 1.38's limit: the root is depth 1, a CompositePodGroup at depth 4 is refused
MAX_DEPTH = 4
#: the condition kube-scheduler 1.38 writes on a CompositePodGroup, and its validation reason
COMPOSITE_INITIALLY_SCHEDULED = "CompositePodGroupInitiallyScheduled"
REASON_COMPOSITE_ERROR = "CompositePodGroupError"


def composite_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(frozen=True)
class CompositeGroupInfo:
    """A CompositePodGroup: its policy (``gang`` with ``minGroupCount``, or ``basic``), its
    topology key, its parent (None: a root)."""

    namespace: str
    name: str
    parent: str | None = None
    gang: bool = True
    #: ``schedulingPolicy.gang.minGroupCount`` (mutable); 1 for ``basic``
    min_groups: int = 1
    topology_required: str | None = None
    #: ``spec.workloadRef.workloadName`` ("" when none): one Workload per tree
    workload: str = ""
    priority: int = 0
    created: float = 0.0
    uid: str = ""
    generation: int = 0

    @property
    def key(self) -> str:
        return composite_key(self.namespace, self.name)

    def named(self) -> str:
        return f"composite pod group {self.key}"


def composite_pod_group(obj: Mapping[str, Any]) -> CompositeGroupInfo:
    """A ``scheduling.k8s.io`` CompositePodGroup as shoal's model. Never raises: a malformed
    policy is read as ``basic`` (the API server validates one policy and ``minGroupCount >= 1``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    count = gang_count(spec, "minGroupCount")
    ref = spec.get("workloadRef") or {}
    parent = spec.get("parentCompositePodGroupName")
    return CompositeGroupInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        parent=str(parent) if parent else None,
        gang=count is not None,
        min_groups=count or 1,
        topology_required=topology_key(spec),
        workload=str(ref.get("workloadName") or "") if isinstance(ref, Mapping) else "",
        priority=int(spec["priority"]) if isinstance(spec.get("priority"), int) else 0,
        created=parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid") or ""),
        generation=int(meta.get("generation") or 0),
    )


def group_workload(group: PodGroupInfo) -> str:
    """A PodGroup's ``workloadRef.workloadName`` (its ``workload`` is ``name/template``)."""
    return group.workload.partition("/")[0]


class Hierarchy:
    """The CompositePodGroups known and, for each, its children: PodGroups and CompositePodGroups
    naming it as their parent (kept as the objects come and go, so a tree is found without a scan)."""

    def __init__(self) -> None:
        self.composites: dict[str, CompositeGroupInfo] = {}
        self._groups: dict[str, set[str]] = {}
        self._composites: dict[str, set[str]] = {}

    def set_composite(self, info: CompositeGroupInfo) -> None:
        old = self.composites.get(info.key)
        if old is not None and old.parent:
            _unlink(self._composites, composite_key(old.namespace, old.parent), old.key)
        self.composites[info.key] = info
        if info.parent:
            self._composites.setdefault(composite_key(info.namespace, info.parent), set()).add(info.key)

    def remove_composite(self, key: str) -> None:
        old = self.composites.pop(key, None)
        if old is not None and old.parent:
            _unlink(self._composites, composite_key(old.namespace, old.parent), key)

    def link_group(self, group: PodGroupInfo, *, add: bool) -> None:
        """A PodGroup with a parent added (``add``) or removed: its parent's children change."""
        if not group.parent:
            return
        parent = composite_key(group.namespace, group.parent)
        if add:
            self._groups.setdefault(parent, set()).add(group.key)
        else:
            _unlink(self._groups, parent, group.key)

    def child_groups(self, key: str) -> set[str]:
        return self._groups.get(key, set())

    def child_composites(self, key: str) -> set[str]:
        return self._composites.get(key, set())

    def chain(self, namespace: str, parent: str | None) -> tuple[list[CompositeGroupInfo], str, bool]:
        """The CompositePodGroups from ``parent`` up to its root, what is wrong ("" if nothing),
        and whether that is a parent not found (yet: the members wait, as kube-scheduler's do)
        rather than a cycle."""
        chain: list[CompositeGroupInfo] = []
        seen: set[str] = set()
        name = parent
        while name:
            key = composite_key(namespace, name)
            if key in seen:
                loop = " -> ".join([*(c.name for c in chain), name])
                return chain, f"{COMPOSITE_KIND}s in {namespace} form a cycle: {loop}", False
            info = self.composites.get(key)
            if info is None:
                return chain, f"{COMPOSITE_KIND} {key} not found", True
            seen.add(key)
            chain.append(info)
            name = info.parent
        return chain, "", False


def _unlink(index: dict[str, set[str]], parent: str, child: str) -> None:
    children = index.get(parent)
    if children is not None:
        children.discard(child)
        if not children:
            del index[parent]


@dataclass
class TreeNode:
    """One group of a tree: a CompositePodGroup with its children, or a PodGroup (a leaf)."""

    composite: CompositeGroupInfo | None = None
    group: PodGroupInfo | None = None
    children: list[TreeNode] = field(default_factory=list)
    depth: int = 1

    @property
    def key(self) -> str:
        return self.composite.key if self.composite is not None else self.group.key if self.group else ""

    @property
    def gang(self) -> bool:
        if self.composite is not None:
            return self.composite.gang
        return self.group is not None and self.group.gang

    @property
    def topology(self) -> str | None:
        if self.composite is not None:
            return self.composite.topology_required
        return self.group.topology_required if self.group is not None else None

    def named(self) -> str:
        if self.composite is not None:
            return self.composite.named()
        return f"pod group {self.key}"

    def leaves(self) -> Iterator[PodGroupInfo]:
        if self.group is not None:
            yield self.group
        for child in self.children:
            yield from child.leaves()

    def nodes(self) -> Iterator[TreeNode]:
        yield self
        for child in self.children:
            yield from child.nodes()


def build_tree(
    hierarchy: Hierarchy, groups: Mapping[str, PodGroupInfo], root: CompositeGroupInfo
) -> tuple[TreeNode, str]:
    """The tree under ``root`` (children by creation time, then name, as kube-scheduler orders
    them) and the first rule it breaks ("" when valid): depth, one Workload, one priority, a
    ``basic`` child under a ``gang`` parent."""
    problems: list[str] = []

    def grow(info: CompositeGroupInfo, depth: int, path: frozenset[str]) -> TreeNode:
        node = TreeNode(composite=info, depth=depth)
        if depth >= MAX_DEPTH:
            problems.append(
                f'hierarchy depth exceeds maximum allowed depth {MAX_DEPTH} at "compositepodgroup/{info.key}"'
            )
            return node
        known = hierarchy.composites
        subs = [known[k] for k in hierarchy.child_composites(info.key) if k in known]
        leaves = [groups[k] for k in hierarchy.child_groups(info.key) if k in groups]
        kids: list[tuple[float, str, TreeNode]] = []
        for sub in subs:
            if sub.key not in path:  # a cycle below the root is reported by chain()
                kids.append((sub.created, sub.name, grow(sub, depth + 1, path | {sub.key})))
        for group in leaves:
            kids.append((group.created, group.name, TreeNode(group=group, depth=depth + 1)))
        node.children = [n for _, _, n in sorted(kids, key=lambda k: (k[0], k[1]))]
        return node

    tree = grow(root, 1, frozenset({root.key}))
    if problems:
        return tree, problems[0]
    return tree, validate(tree)


def validate(tree: TreeNode) -> str:
    """The first rule of kube-scheduler 1.38's runtime validation ``tree`` breaks ("" if none)."""
    root = tree.composite
    assert root is not None
    priority: int | None
    for node in tree.nodes():
        if node.composite is not None:
            workload, priority, what = node.composite.workload, node.composite.priority, node.named()
        elif node.group is not None:
            workload, priority, what = group_workload(node.group), node.group.priority, node.named()
        else:
            continue
        if workload != root.workload:
            got = f"got: {workload!r}, want: {root.workload!r}"
            return f"{what}: pod group workload does not match root workload, {got}"
        if priority is not None and priority != root.priority:
            return (
                f"{what} has priority {priority} and its root {root.named()} has {root.priority}: "
                "one priority per tree"
            )
        if node.gang and node.composite is not None:
            for child in node.children:
                if not child.gang:
                    return f"{what} is a gang (minGroupCount) and its child {child.named()} is basic"
    return ""


def min_children(node: TreeNode) -> int:
    """How many direct children must hold for ``node`` to hold (a CompositePodGroup)."""
    assert node.composite is not None
    return node.composite.min_groups if node.composite.gang else 1


def ready(node: TreeNode, group_size: Callable[[str], int]) -> bool:
    """Whether the members under ``node`` may be tried (kube-scheduler's readiness, recursive):
    a PodGroup once ``minCount`` of its pods exist (one for ``basic``), a CompositePodGroup once
    ``minGroupCount`` of its children are ready (one for ``basic``)."""
    if node.group is not None:
        need = node.group.min_member if node.group.gang else 1
        return group_size(node.group.key) >= need
    return sum(1 for child in node.children if ready(child, group_size)) >= min_children(node)


def ready_count(node: TreeNode, group_size: Callable[[str], int]) -> int:
    return sum(1 for child in node.children if ready(child, group_size))


def composite_initially_scheduled(
    info: CompositeGroupInfo,
    scheduled: bool,
    message: str,
    current: Sequence[Mapping[str, Any]],
    now: str,
    *,
    reason: str = "",
) -> dict[str, Any] | None:
    """The ``CompositePodGroupInitiallyScheduled`` condition to write, or None when there is
    nothing to say: True (``Scheduled``) once the tree under it holds, final; False with the
    failure's ``message`` and ``reason`` (``Unschedulable``, ``SchedulerError`` or
    ``CompositePodGroupError``) while it cannot."""
    existing = find_condition(current, COMPOSITE_INITIALLY_SCHEDULED)
    if existing is not None and existing.get("status") == "True":
        return None
    if scheduled:
        status, reason, message = "True", "Scheduled", ""
    elif message:
        status, reason = "False", reason or "Unschedulable"
    else:
        return None
    since = now
    if existing is not None and existing.get("status") == status:
        since = str(existing.get("lastTransitionTime") or now)
    condition = {
        "type": COMPOSITE_INITIALLY_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": info.generation,
        "lastTransitionTime": since,
    }
    if existing is not None and all(existing.get(k) == v for k, v in condition.items()):
        return None
    return condition
