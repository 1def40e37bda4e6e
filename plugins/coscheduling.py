"""Coscheduling (PreEnqueue, PreFilter, Reserve, Permit, gang): all-or-nothing PodGroups.

Two APIs, one model (``PodGroupInfo``, keyed apart: ``shoal.core.state.objects.pod_group_key``):

* scheduler-plugins', so Kubeflow Trainer / KubeRay work unchanged: a ``PodGroup``
  (``scheduling.x-k8s.io/v1alpha1``) with ``minMember`` and ``scheduleTimeoutSeconds`` (default
  60 s), and pods that join it with the label ``scheduling.x-k8s.io/pod-group: <name>``;
* Kubernetes' native one (``scheduling.k8s.io/v1beta1``, ``shoal.core.state.workloads``): a ``PodGroup``
  with ``schedulingPolicy.gang.minCount`` or ``basic``, and pods that join it with
  ``spec.schedulingGroup.podGroupName``. A ``basic`` group is not a gang: as kube-scheduler's
  GangScheduling, its pods wait until it exists, then each is scheduled alone.
* Volcano's (``scheduling.volcano.sh/v1beta1``, ``shoal.core.state.volcano``): a ``PodGroup`` with
  ``minMember`` and ``minResources``, and pods that join it with the annotation
  ``scheduling.k8s.io/group-name``. A group using a field shoal does not evaluate (a queue other
  than ``default``, ``networkTopology``, ``subGroupPolicy``, a ``minTaskMember`` the one quorum
  does not imply) is refused at PreFilter (UnschedulableAndUnresolvable), its members' events
  naming the field.

A thin adapter over state the scheduler already keeps (the cache counts members, WaitingPods holds
their gates), after scheduler-plugins' ``pkg/coscheduling``:

* **PreEnqueue** holds members until the PodGroup exists and ``minMember`` of its pods do;
* **PreFilter** also refuses a member early when the PodGroup's ``minResources`` exceed what the
  schedulable nodes have free (counting what members already placed hold toward it), as
  scheduler-plugins does: the gang fails fast with the resource named, instead of a placement
  attempt that cannot succeed;
* **pod_group** tells the scheduler the pod is in a gang, so every queued member is placed in one
  cycle (see ``shoal.core.scheduling.scheduler``);
* **PlacementFeasible** ends a gang's trial (a domain) as soon as the members left to try cannot
  reach ``minMember`` (1.38's GangScheduling does the same there);
* **Permit** returns Wait until ``minMember`` members are placed (assumed or bound); the member
  that completes the quorum opens every waiting member's gate at once. The wait is bounded by
  ``scheduleTimeoutSeconds``;
* **Unreserve** of any member rejects every waiting member's gate: one failure releases the whole
  gang's reservations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import numpy as np
from pydantic import Field

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gangplan import PlacementProgress
from shoal.core.framework.gates import MAX_PERMIT_TIMEOUT
from shoal.core.framework.interfaces import (
    ClusterEvent,
    EventKind,
    EventRegistration,
    Handle,
    PreFilterResult,
)
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.hierarchy import CompositeGroupInfo, min_children, ready, ready_count
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.core.state.status import SUCCESS, Code, Status
from shoal.core.state.volcano import TASK_SPEC_ANNOTATION, short_of_task_quorums

NAME = "Coscheduling"


class Args(ArgsModel):
    default_schedule_timeout_seconds: int = Field(
        default=60, ge=1, le=int(MAX_PERMIT_TIMEOUT), description="Permit wait when the PodGroup sets none."
    )


def _amount(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value}m"
    if resource == "memory":
        return f"{value / 2**30:.1f}Gi"
    return str(value)


def named(group: PodGroupInfo) -> str:
    """``pod group KEY``, with the Workload template a native PodGroup was made from, if any."""
    workload, _, template = group.workload.partition("/")
    origin = f" (Workload {workload}, template {template})" if group.workload else ""
    return f"pod group {group.key}{origin}"


#: how a held member is reported (its event and its ``PodScheduled=False`` condition): below its
#: quorum (a Normal event: more members are coming), or naming a PodGroup that does not exist
WAITING_FOR_GANG = "WaitingForGang"
POD_GROUP_MISSING = "PodGroupMissing"


def _priority_error(group: PodGroupInfo, pod: PodInfo) -> Status:
    """kube-scheduler (1.37 and 1.38) fails a pod group whose pods' priority is not the group's
    with an error, retried with backoff (PodScheduled and PodGroupInitiallyScheduled say
    SchedulerError): so does shoal. Both priorities are immutable: only new objects change it."""
    return Status.error(
        f"{named(group)} has priority {group.priority} (spec.priority, from its priorityClassName) "
        f"and pod {pod.name} has {pod.priority} (spec.priority): every pod of a pod group must "
        "have the group's priority",
        plugin=NAME,
    )


def _unevaluated(group: PodGroupInfo) -> Status:
    """A group that uses what shoal does not evaluate: its members are refused, naming it."""
    why = f"{named(group)} uses {', '.join(group.unevaluated)}, which shoal does not evaluate"
    return Status.unschedulable(why, plugin=NAME, resolvable=False)


def quorum_reached(placed: int, min_member: int) -> bool:
    """The pure rule: the gang may bind once ``min_member`` members are placed."""
    return placed >= min_member


class Coscheduling:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.cache = handle.cache
        self.waiting = handle.waiting
        #: tree verdicts by parent, valid while ``cache.groups_version`` is ``_trees_version``
        self._trees: dict[str, Status] = {}
        self._trees_version = -1

    def pod_group(self, pod: PodInfo) -> PodGroupInfo | None:
        """The pod's gang (None when it has none, or its group is a native ``basic`` one without a
        topology constraint: a ``basic`` group with one is placed by the gang cycle with a quorum of
        one, so its members share the domain, as kube-scheduler's pod-group cycle does)."""
        key = pod.group_key
        group = self.cache.pod_groups.get(key) if key else None
        return group if group is not None and (group.gang or group.topology_levels or group.parent) else None

    def timeout(self, group: PodGroupInfo) -> float:
        return float(group.schedule_timeout_seconds or self.args.default_schedule_timeout_seconds)

    def _check(self, pod: PodInfo) -> Status:
        key = pod.group_key
        if key is None:
            return SUCCESS
        group = self.cache.pod_groups.get(key)
        if group is None:  # kube-scheduler's GangScheduling waits for a native one too
            return Status.unschedulable(f"PodGroup {key} not found", plugin=NAME, resolvable=False)
        if group.parent:
            return self._check_tree(group)
        total = self.cache.group_size(key)
        if group.gang and total < group.min_member:
            return Status.unschedulable(
                f"{named(group)} has {total} of the {group.min_member} pods it needs ({group.min_field})",
                plugin=NAME,
            )
        return SUCCESS

    def _check_tree(self, group: PodGroupInfo) -> Status:
        """A member of a CompositePodGroup tree waits until its root is known and *ready*
        (kube-scheduler 1.38's readiness: ``minGroupCount`` children ready, each PodGroup with
        ``minCount`` pods); a tree that breaks a rule is refused in its cycle (an error, as
        kube-scheduler's validation). Computed once per parent while the groups stand still
        (every member of a tree asks it at each arrival)."""
        version = self.cache.groups_version
        if self._trees_version != version:
            self._trees_version, self._trees = version, {}
        verdict = self._trees.get(group.parent or "")
        if verdict is None:
            verdict = self._trees[group.parent or ""] = self._tree_verdict(group)
        message = verdict.message
        return verdict if verdict.ok else Status(verdict.code, (f"{named(group)}{message}",), NAME)

    def _tree_verdict(self, group: PodGroupInfo) -> Status:
        """The verdict for every member under ``group``'s parent; a message to follow the group's name."""
        tree, problem, _ = self.cache.group_tree(group)
        if tree is None:  # a parent not found (yet), or a cycle: nothing to place
            return Status.unschedulable(f": {problem}", plugin=NAME, resolvable=False)
        if tree.composite is None or ready(tree, self.cache.group_size):
            return SUCCESS
        root = tree.composite
        field = "minGroupCount" if root.gang else "basic: one"
        return Status.unschedulable(
            f" is in {root.named()}, which has {ready_count(tree, self.cache.group_size)} of the "
            f"{min_children(tree)} ready child groups it needs ({field}; a PodGroup is ready with "
            "minCount pods)",
            plugin=NAME,
        )

    def _just_ready(self, member: PodInfo) -> bool:
        """Whether ``member``'s arrival made its own group ready (its ``minCount``-th pod)."""
        group = self.cache.pod_groups.get(member.group_key) if member.group_key else None
        if group is None:
            return False
        return self.cache.group_size(group.key) == (group.min_member if group.gang else 1)

    def _quorum_known(self, pod: PodInfo) -> bool:
        """Whether a gated member's gang now has the members its PreEnqueue waits for: until then
        another member's arrival changes nothing for it (the gang's last arrival releases them
        all; with a gang of a thousand, asking each at every arrival was cubic in its size)."""
        group = self.cache.pod_groups.get(pod.group_key) if pod.group_key else None
        if group is not None and group.parent:
            return self._check_tree(group).ok
        return group is None or not group.gang or self.cache.group_size(group.key) >= group.min_member

    def check_group(self, group: PodGroupInfo, members: Sequence[PodInfo]) -> Status:
        """A native group whose pending or placed members do not all have its priority fails as
        a whole (kube-scheduler's pod-group validation), and so does one that shoal does not
        evaluate: before any placement, so no topology domain or preemption is tried for it."""
        if group.unevaluated:
            return _unevaluated(group)
        if group.priority is not None:
            # the pending members first (the one named is one of them if any is odd), then every
            # member the cache knows, placed ones included
            known = self.cache.group_members(group.key)
            odd = next((p for p in (*members, *known) if p.priority != group.priority), None)
            if odd is not None:
                return _priority_error(group, odd)
        return SUCCESS

    def placement_feasible(self, group: PodGroupInfo, progress: PlacementProgress) -> Status:
        """kube-scheduler 1.38's GangScheduling at PlacementFeasible: the gang holds in this
        trial once its quorum is placed; it cannot once the members left to try cannot make it
        up (the trial ends there instead of trying each of them against every node)."""
        quorum = group.min_member if group.gang else 1
        if progress.scheduled >= quorum:
            return SUCCESS
        if progress.scheduled + progress.remaining < quorum:
            return Status.unschedulable(
                f"{progress.remaining} member(s) not tried: {group.min_field} {group.min_member} is out of "
                f"reach in this placement ({progress.scheduled} placed, "
                f"{progress.unschedulable} fit nowhere).",
                plugin=NAME,
            )
        return Status.wait(f"pod group {group.key}: {progress.scheduled} of {quorum} placed", NAME)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        return self._check(pod)

    def hold_reason(self, status: Status) -> str | None:
        """Unresolvable: the PodGroup does not exist (yet); else the gang is below its quorum."""
        return POD_GROUP_MISSING if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE else WAITING_FOR_GANG

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        status = self._check(pod)
        if status.ok and pod.group_key is not None:
            group = self.cache.pod_groups[pod.group_key]
            if group.priority is not None and pod.priority != group.priority:
                return None, _priority_error(group, pod)
            if group.unevaluated:  # never silently wrong: a Volcano queue, its HyperNode topology, ...
                return None, _unevaluated(group)
            if group.task_quorums:  # Volcano's minTaskMember, where the one quorum implies it
                tasks = Counter(
                    m.annotations.get(TASK_SPEC_ANNOTATION, "") for m in self.cache.group_members(group.key)
                )
                why, may_pass = short_of_task_quorums(group, tasks)
                if why:
                    return None, Status.unschedulable(why, plugin=NAME, resolvable=may_pass)
            short = self.short_of_min_resources(group)
            if short:
                status = Status.unschedulable(short, plugin=NAME)
        return None, status

    def short_of_min_resources(self, group: PodGroupInfo) -> str:
        """Why the cluster cannot hold the group's ``minResources`` now ("" when it can)."""
        if not group.min_resources:
            return ""
        table = self.cache.table
        usable = table.valid_rows() & ~table.unschedulable[: table.size]
        placed = [m for m in self.cache.group_members(group.key) if self.cache.placed_node(m.uid)]
        for resource, want in sorted(group.min_resources.items()):
            need = want - sum(m.requests.get(resource, 0) for m in placed)
            if need <= 0:
                continue
            free = int(np.clip(table.free(resource)[usable], 0, None).sum())
            if free < need:
                return (
                    f"pod group {group.key}: minResources needs {_amount(resource, need)} more {resource}, "
                    f"the schedulable nodes have {_amount(resource, free)} free"
                )
        return ""

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        key = pod.group_key
        if key is None:
            return
        for gate in self.waiting:
            if gate.pod.group_key == key and gate.pod.uid != pod.uid:
                gate.reject(NAME, f"pod group {key}: member {pod.name} was rejected, releasing the gang")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        group = self.pod_group(pod)
        if group is None:
            return SUCCESS, 0.0
        _, placed = self.cache.group_counts(group.key)
        if not quorum_reached(placed, group.min_member):
            return Status.wait(f"waiting for pod group {group.key}", NAME), self.timeout(group)
        for gate in self.waiting:
            if gate.pod.group_key == group.key:
                gate.allow(NAME)
        return SUCCESS, 0.0

    def events_to_register(self) -> Sequence[EventRegistration]:
        def in_a_tree(pod: PodInfo) -> bool:
            group = self.cache.pod_groups.get(pod.group_key) if pod.group_key else None
            return group is not None and group.parent is not None

        def root(namespace: str, parent: str | None, own: str = "") -> str | None:
            """The root CompositePodGroup's key above ``parent`` (``own``: the object's own key,
            when it is a root itself), or None when the chain does not resolve."""
            chain, problem, _ = self.cache.hierarchy.chain(namespace, parent)
            if problem:
                return None
            return chain[-1].key if chain else own or None

        def same_tree(pod: PodInfo, obj: CompositeGroupInfo | PodGroupInfo) -> bool:
            """Whether ``obj`` is in the tree of ``pod``'s group (or either tree is broken, so
            PreEnqueue had better say again what is wrong)."""
            group = self.cache.pod_groups.get(pod.group_key) if pod.group_key else None
            if group is None or group.parent is None:
                return False
            mine = root(group.namespace, group.parent)
            own = obj.key if isinstance(obj, CompositeGroupInfo) else ""
            theirs = root(obj.namespace, obj.parent, own)
            return mine is None or theirs is None or mine == theirs

        def same_group(pod: PodInfo, event: ClusterEvent) -> bool:
            obj = event.obj
            if isinstance(obj, CompositeGroupInfo) or (isinstance(obj, PodGroupInfo) and obj.parent):
                # its tree's shape changed: its members may be ready (or valid) now, or wait for
                # something else (PreEnqueue again says what)
                return same_tree(pod, obj)
            if isinstance(obj, PodGroupInfo):
                return obj.key == pod.group_key
            if isinstance(obj, PodInfo):
                if in_a_tree(pod):  # targets names the tree's members only
                    # the tree may be ready now, or one more child is (PreEnqueue says how many)
                    return obj.group_key is not None and (self._quorum_known(pod) or self._just_ready(obj))
                return (
                    obj.group_key is not None and obj.group_key == pod.group_key and self._quorum_known(pod)
                )
            return False

        def group_of_the_pod(event: ClusterEvent) -> Collection[str] | None:
            """A member's arrival concerns its own group's members only (with a gang of thousands
            pending, asking every gated pod about every arrival was quadratic)."""
            obj = event.obj
            if not isinstance(obj, PodInfo):
                return None
            group = self.cache.pod_groups.get(obj.group_key) if obj.group_key else None
            if group is not None and group.parent:
                # a member of a tree: every member of the tree, but only when the arrival changed
                # something for them (its group became ready, or the tree is): else each arrival
                # would ask every member, quadratic in the tree's size
                if not (self._just_ready(obj) or self._check_tree(group).ok):
                    return ()
                tree, _, _ = self.cache.group_tree(group)
                if tree is not None:
                    return [u for leaf in tree.leaves() for u in self.cache.group_member_uids(leaf.key)]
            return self.cache.group_member_uids(obj.group_key) if obj.group_key else ()

        def has_min_resources(pod: PodInfo, event: ClusterEvent) -> bool:
            group = self.pod_group(pod)
            return group is not None and bool(group.min_resources)

        return (
            EventRegistration(EventKind.POD_ADD, same_group, group_of_the_pod),
            EventRegistration(EventKind.POD_GROUP_CHANGE, same_group),
            EventRegistration(EventKind.POD_DELETE),
            # a gang refused for minResources may fit once nodes are added or change
            EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE, has_min_resources),
        )


def new(args: Args, handle: Handle) -> Coscheduling:
    return Coscheduling(args, handle)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(
    evaluates=tuple(
        Evaluates(f, None)
        for f in (fidelity.SCHEDULING_GROUP, fidelity.POD_GROUP_LABEL_FIELD, fidelity.VOLCANO_GROUP_FIELD)
    )
)
ENTRY = PluginEntry(NAME, new, Args, Coscheduling, contract=CONTRACT)
