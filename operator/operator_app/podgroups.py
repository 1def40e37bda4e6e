"""PodGroup status: phase and counts, as scheduler-plugins' PodGroup controller reports them.

Like its ``podgroup_controller.go``, this is two parts:

* a **pure phase function** (:func:`pod_group_phase`, :func:`pod_group_counts`), tested alone;
* a **writer loop** (:meth:`PodGroupStatus.run`): every ``interval`` the leader computes each
  group's status from the cache and writes it when it differs from what was last seen/written.

Members that finished are outside the pod watch (it drops terminated pods), so they are listed
once at start-up (:meth:`PodGroupStatus.load_finished`), and a member leaving the watch (DELETED
carries the *previous* object) is checked with one GET: deleted, or finished and counted.
Finished and Failed are final and never rewritten.

A native PodGroup (``scheduling.k8s.io``) gets kube-scheduler 1.37's status instead: the
``PodGroupInitiallyScheduled`` condition (``shoal.core.state.workloads.initially_scheduled``), written by
strategic merge patch so that other conditions stay; and for a gang, once placed, whether it still
has ``minCount`` members scheduled or succeeded (``PodGroupSatisfied``, KEP-6413's proposed
condition: ``gang_satisfied``), with an event when that changes. Its finished members are counted
as scheduler-plugins' are.

A CompositePodGroup (1.38) gets kube-scheduler's ``CompositePodGroupInitiallyScheduled``, from
the last cycle shoal ran for its tree (``shoal.core.state.hierarchy.composite_initially_scheduled``).

A Volcano PodGroup (``scheduling.volcano.sh``) gets vc-scheduler's phase and counts
(``shoal.core.state.volcano.volcano_phase``), merge-patched onto the object itself (Volcano's CRD has no
status subresource), and only while shoal schedules its members: a group whose pods name another
scheduler (vc-scheduler, during a migration) is left to Volcano. A group without pods yet is
shoal's when the Volcano Job that owns it names one of shoal's schedulers (read once): its job
controller creates the pods only once the group is admitted (``Inqueue``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.hierarchy import CompositeGroupInfo, composite_initially_scheduled
from shoal.core.state.objects import (
    NATIVE_GROUP_API,
    POD_GROUP_LABEL,
    TERMINAL_PHASES,
    VOLCANO_GROUP_API,
    PodGroupInfo,
    PodInfo,
)
from shoal.core.state.volcano import volcano_phase
from shoal.core.state.workloads import (
    REASON_SCHEDULER_ERROR,
    SATISFIED,
    find_condition,
    gang_satisfied,
    initially_scheduled,
)
from shoal.kube.informer import Event
from shoal.kube.listing import list_retrying
from shoal.kube.reporter import event_body, expire_before
from shoal.kube.rest import RawClient, write_retrying
from shoal.kube.status import StatusWriter, same_status
from shoal.kube.wire import (
    COMPOSITE_PODGROUPS,
    EVENTS,
    NATIVE_PODGROUPS,
    PODGROUPS,
    PODS,
    STRATEGIC_MERGE_PATCH,
    VOLCANO_JOBS,
    VOLCANO_PODGROUPS,
    phase_selector,
    rfc3339,
)

log = logging.getLogger("shoal.operator")

FINAL_GROUP_PHASES = ("Finished", "Failed")


#: how long a deleted PodGroup's late member events are ignored (its members' deletions follow it
#: within seconds; a member's finish check may take a request timeout)
DELETED_KEPT_S = 600.0


@dataclass(frozen=True)
class GroupCounts:
    min_member: int
    #: members in the watch (not terminated), bound or not
    members: int
    bound: int
    running: int
    succeeded: int
    failed: int

    @property
    def scheduled(self) -> int:
        """Members ever bound: bound now, or terminated."""
        return self.bound + self.succeeded + self.failed


def pod_group_phase(c: GroupCounts) -> str:
    """The phase, as scheduler-plugins' PodGroup controller sets it (``apis/scheduling/v1alpha1``).

    * ``Pending``: fewer pods exist (terminated ones included) than ``minMember``;
    * ``Scheduling``: enough pods, but running + succeeded below ``minMember`` (bound or not);
    * ``Running``: running + succeeded reach ``minMember``;
    * ``Failed`` (final): a member failed and failed + running + succeeded reach ``minMember``;
    * ``Finished`` (final): ``minMember`` members succeeded.

    ``Unknown`` exists in the API but, as upstream's controller, shoal never writes it.
    """
    minimum = c.min_member
    if c.succeeded >= minimum:
        return "Finished"
    if c.failed and c.failed + c.running + c.succeeded >= minimum:
        return "Failed"
    if c.members + c.succeeded + c.failed < minimum:
        return "Pending"
    if c.running + c.succeeded >= minimum:
        return "Running"
    return "Scheduling"


def pod_group_counts(min_member: int, members: Iterable[PodInfo], succeeded: int, failed: int) -> GroupCounts:
    """Counts of a group from its members in the cache and its terminated members' numbers."""
    live = list(members)
    return GroupCounts(
        min_member=min_member,
        members=len(live),
        bound=sum(1 for p in live if p.bound),
        running=sum(1 for p in live if p.phase == "Running"),
        succeeded=succeeded,
        failed=failed,
    )


def status_fields(c: GroupCounts) -> dict[str, Any]:
    """``status`` without the times and owners: phase and counts (scheduler-plugins removed
    ``scheduled``; ``scheduleStartTime`` still marks the first binding)."""
    return {
        "phase": pod_group_phase(c),
        "running": c.running,
        "succeeded": c.succeeded,
        "failed": c.failed,
    }


class PodGroupStatus:
    """What the cache does not keep about gangs (terminated members, owners, first binding) and
    the loop that writes their status while ``leading()``."""

    def __init__(
        self,
        scheduler: Scheduler,
        writer: StatusWriter,
        leading: Callable[[], bool],
        *,
        raw: RawClient | None = None,
        interval: float = 1.0,
    ) -> None:
        self.scheduler = scheduler
        self.writer = writer
        self.leading = leading
        self.raw = raw
        self.interval = interval
        self._written: dict[str, dict[str, Any]] = {}
        self._terminal: dict[str, dict[str, set[str]]] = {}
        self._started: dict[str, str] = {}
        #: PodGroups whose status is Finished or Failed: final, never rewritten (as scheduler-plugins)
        self._final: set[str] = set()
        #: PodGroup -> status.occupiedBy, from the owner references of its first member seen
        self._owner: dict[str, str] = {}
        #: PodGroup -> members that left the watch and are being checked (finished, or deleted?)
        self._checking: dict[str, set[str]] = {}
        self._checks: asyncio.TaskGroup | None = None
        self._waiting_checks: list[PodInfo] = []
        #: native PodGroup -> its status.conditions as last seen or written
        self._conditions: dict[str, list[dict[str, Any]]] = {}
        #: the reason of a group the gang plugin's validation refused: ``SchedulerError`` as 1.37
        #: writes it, ``PodGroupError`` on a 1.38 API server (``ShoalOperator.start`` asks /version)
        self.validation_reason = REASON_SCHEDULER_ERROR
        #: each CompositePodGroup's conditions, as last seen or written (``namespace/name``)
        self._composite_conditions: dict[str, list[dict[str, Any]]] = {}
        #: native PodGroups whose members shoal schedules (so still when none is left)
        self._native_ours: set[str] = set()
        #: Volcano PodGroup -> its status as last seen or written
        self._volcano: dict[str, dict[str, Any]] = {}
        #: Volcano PodGroup owned by a Volcano Job -> [the Job's name, its schedulerName once read]
        self._volcano_job: dict[str, list[str | None]] = {}
        #: PodGroups deleted (and not created again): a member's late event must not bring back
        #: what was forgotten of them (their members are often deleted after them)
        self._deleted: OrderedDict[str, float] = OrderedDict()

    # -- what the watch says ---------------------------------------------------------------------
    def on_composite(self, event: Event[CompositeGroupInfo]) -> None:
        key = event.obj.key
        if event.deleted:
            self._composite_conditions.pop(key, None)
            return
        conditions = (event.raw.get("status") or {}).get("conditions") or []
        self._composite_conditions[key] = [dict(c) for c in conditions if isinstance(c, Mapping)]

    def on_group(self, event: Event[PodGroupInfo]) -> None:
        key = event.obj.key
        status = event.raw.get("status")
        if event.deleted:
            self._forget(key)
        else:
            self._deleted.pop(key, None)
        if event.obj.api == VOLCANO_GROUP_API:
            if event.deleted:
                self._volcano.pop(key, None)
                self._terminal.pop(key, None)
                self._volcano_job.pop(key, None)
            else:
                self._volcano[key] = dict(status or {})
                job = volcano_job_owner(event.raw)
                if job:
                    self._volcano_job.setdefault(key, [job, None])
        elif event.obj.api == NATIVE_GROUP_API:
            conditions = (status or {}).get("conditions") or []
            if event.deleted:
                self._conditions.pop(key, None)
                self._native_ours.discard(key)
                self._terminal.pop(key, None)
            else:
                self._conditions[key] = [dict(c) for c in conditions if isinstance(c, Mapping)]
        elif event.deleted:
            self._written.pop(key, None)
            self._terminal.pop(key, None)
            self._started.pop(key, None)
            self._final.discard(key)
            self._owner.pop(key, None)
        elif status:
            self._written.setdefault(key, dict(status))
            if status.get("scheduleStartTime"):
                self._started.setdefault(key, str(status["scheduleStartTime"]))
            if status.get("phase") in FINAL_GROUP_PHASES:
                self._final.add(key)

    def on_member(self, pod: PodInfo, raw: Mapping[str, Any], deleted: bool) -> None:
        """A gang member's event. Leaving the field selector (finished) arrives as DELETED with the
        *previous* object: ask the API whether the member is gone or finished, for the counts."""
        self.note_member(pod, raw)
        if deleted and pod.phase not in TERMINAL_PHASES and self.raw is not None:
            assert pod.group_key is not None
            self._checking.setdefault(pod.group_key, set()).add(pod.uid)
            if self._checks is not None:
                self._checks.create_task(self._check_finished(pod))
            else:
                self._waiting_checks.append(pod)

    def _forget(self, key: str) -> None:
        """Everything kept of a deleted PodGroup, of any API (the owner, the finished members and
        the rest were kept for native and Volcano groups, one set per gang ever seen)."""
        for kept in (
            self._written, self._terminal, self._started, self._owner, self._conditions,
            self._volcano, self._volcano_job,
        ):  # fmt: skip
            kept.pop(key, None)
        self._final.discard(key)
        self._native_ours.discard(key)
        now = time.monotonic()
        self._deleted[key] = now
        self._deleted.move_to_end(key)
        expire_before(self._deleted, now - DELETED_KEPT_S)

    def note_member(self, pod: PodInfo, raw: Mapping[str, Any]) -> None:
        key = pod.group_key
        assert key is not None
        if key in self._deleted:
            return
        if pod.phase in TERMINAL_PHASES:
            bucket = self._terminal.setdefault(key, {"Succeeded": set(), "Failed": set()})
            bucket[pod.phase].add(pod.uid)
        if key not in self._owner:
            owners = sorted(
                f"{pod.namespace}/{ref.get('name')}"
                for ref in (raw.get("metadata") or {}).get("ownerReferences") or ()
                if ref.get("name")
            )
            if owners:
                self._owner[key] = ",".join(owners)

    async def load_finished(self, raw: RawClient) -> None:
        """Finished members of gangs are outside the pod watch, but PodGroup counts include them:
        read them once, so a restart or fail-over does not send a gang's status backwards."""
        for phase in TERMINAL_PHASES:
            for obj in await list_retrying(
                raw,
                PODS.path(),
                what=f"{phase} gang members",
                label_selector=POD_GROUP_LABEL,
                field_selector=phase_selector(phase),
            ):
                pod = PodInfo.from_dict(obj)
                if pod.group_key is not None:
                    self.note_member(pod, obj)

    async def _check_finished(self, pod: PodInfo, attempts: int = 6) -> None:
        """Did this member finish (count it) or go away? Retries what may pass (429, 5xx, network);
        meanwhile its group's status is not written, so it never shows a member missing."""
        assert self.raw is not None
        assert pod.group_key is not None
        key = pod.group_key
        try:
            for attempt in range(attempts):
                if attempt:
                    await asyncio.sleep(min(0.5 * 2**attempt, 8.0))
                try:
                    code, obj = await self.raw.request("GET", PODS.path(pod.name, namespace=pod.namespace))
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    log.info("checking whether gang member %s finished: %s (will retry)", pod.key, exc)
                    continue
                if code == 429 or code >= 500:
                    continue
                same = isinstance(obj, dict) and (obj.get("metadata") or {}).get("uid") == pod.uid
                if code == 200 and same:
                    now = PodInfo.from_dict(obj)
                    if now.phase in TERMINAL_PHASES and now.group_key is not None:
                        self.note_member(now, obj)
                return  # finished and counted, or gone (404 / another pod of that name)
            log.warning("could not tell whether gang member %s finished; its group's counts may lag", pod.key)
        except Exception:  # a bug here must not end the status loop
            log.exception("checking whether gang member %s finished", pod.key)
        finally:
            checking = self._checking.get(key, set())
            checking.discard(pod.uid)
            if not checking:
                self._checking.pop(key, None)

    # -- status ----------------------------------------------------------------------------------
    def status(self, key: str) -> dict[str, Any]:
        """The status PodGroup ``key`` should have now (it must be in the cache).

        ``scheduleStartTime`` is the first binding of a member (terminated ones included),
        ``occupiedBy`` the owners of the members. Counts of terminated members survive restarts
        (they are listed at start-up) and a final phase is never rewritten.
        """
        cache = self.scheduler.cache
        terminal = self._terminal.get(key, {"Succeeded": set(), "Failed": set()})
        counts = pod_group_counts(
            cache.pod_groups[key].min_member,
            cache.group_members(key),
            len(terminal["Succeeded"]),
            len(terminal["Failed"]),
        )
        status = status_fields(counts)
        if counts.scheduled:
            status["scheduleStartTime"] = self._started.setdefault(key, rfc3339())
        if key in self._owner:
            status["occupiedBy"] = self._owner[key]
        return status

    def new_term(self) -> None:
        """A new leader writes every status it disagrees with, whatever an earlier term wrote."""
        self._written.clear()

    async def run(self) -> None:
        """The writer loop (forever); member checks run in its task group."""
        async with asyncio.TaskGroup() as checks:
            self._checks = checks
            try:
                for pod in self._waiting_checks:
                    checks.create_task(self._check_finished(pod))
                self._waiting_checks.clear()
                while True:
                    await asyncio.sleep(self.interval)
                    if self.leading():
                        await self.write_all()
            finally:
                self._checks = None

    async def write_all(self) -> None:
        for key in list(self.scheduler.cache.pod_groups):
            try:
                await self.write(key)
            except Exception:  # one group's trouble must not end the loop (a vital task)
                log.exception("writing the status of PodGroup %s", key)
        for key, info in list(self.scheduler.cache.hierarchy.composites.items()):
            try:
                await self.write_composite(info)
            except Exception:
                log.exception("writing the status of CompositePodGroup %s", key)

    async def write_composite(self, info: CompositeGroupInfo) -> None:
        """kube-scheduler 1.38's ``CompositePodGroupInitiallyScheduled``, from the last cycle shoal
        ran for the tree (none: the tree is another scheduler's, or not tried yet): True once it
        held (final), else False with why (``SchedulerError`` when a plugin failed,
        ``CompositePodGroupError`` when the tree breaks a rule of the API)."""
        outcome = self.scheduler.gangs.composite_outcomes.get(info.key)
        if outcome is None:
            return
        held, message, reason = outcome
        current = self._composite_conditions.get(info.key, [])
        condition = composite_initially_scheduled(info, held, message, current, rfc3339(), reason=reason)
        if condition is None:
            return
        path = COMPOSITE_PODGROUPS.path(info.name, namespace=info.namespace, sub="status")
        if await self.writer.write(
            path, {"conditions": [condition]}, f"CompositePodGroup {info.key}", patch=STRATEGIC_MERGE_PATCH
        ):
            self._composite_conditions[info.key] = _merged(current, [condition])

    async def write(self, key: str) -> None:
        group = self.scheduler.cache.pod_groups.get(key)
        if group is not None and group.api == NATIVE_GROUP_API:
            await self.write_native(group)
            return
        if group is not None and group.api == VOLCANO_GROUP_API:
            await self.write_volcano(group)
            return
        if key in self._final or key in self._checking:
            return
        if group is None:
            return  # deleted while another group's status was being written
        status = self.status(key)
        if same_status(self._written.get(key, {}), status):
            return
        path = PODGROUPS.path(group.name, namespace=group.namespace, sub="status")
        if await self.writer.write(path, status, f"PodGroup {key}"):
            self._written[key] = status

    # -- native PodGroups --------------------------------------------------------------------------
    def failure(self, key: str) -> tuple[str, bool]:
        """Why the group's pending members were last not placed ("" when none was tried), and
        whether that was an error rather than "does not fit"."""
        queue = self.scheduler.queue
        for pod in self.scheduler.cache.group_members(key):
            qpi = queue.get(pod.uid)
            if qpi is not None and qpi.last_message and not pod.bound:
                return qpi.last_message, qpi.last_error
        return "", False

    async def write_native(self, group: PodGroupInfo) -> None:
        """kube-scheduler's ``PodGroupInitiallyScheduled`` condition (True once ``minCount`` members
        are placed, else False/Unschedulable with the failure) and then, for a gang, whether it
        still has them (``PodGroupSatisfied``, with an event when it changes), in one patch, only
        when they change, and only on groups whose pods shoal schedules (a profile has their
        schedulerName). Not while a member that left the watch is being checked (finished, or
        deleted?): the counts would miss it."""
        key = group.key
        members = self.scheduler.cache.group_members(key)
        if any(m.scheduler_name in self.scheduler.profiles for m in members):
            self._native_ours.add(key)
        elif members or key not in self._native_ours:
            return  # another scheduler's group (kube-scheduler writes its own condition)
        if key in self._checking:
            return
        terminal = self._terminal.get(key, {})
        bound = self.scheduler.cache.group_counts(key)[1]
        placed = bound + sum(len(uids) for uids in terminal.values())
        current = self._conditions.get(key, [])
        message, error = self.failure(key)
        now = rfc3339()
        refused = self.validation_reason if key in self.scheduler.gangs.refused_groups else ""
        initially = initially_scheduled(
            group, placed, message, current, now, error=error, error_reason=refused
        )
        after = _merged(current, [initially] if initially else [])
        satisfied = gang_satisfied(group, bound, len(terminal.get("Succeeded", ())), after, now)
        changes = [c for c in (initially, satisfied) if c is not None]
        if not changes:
            return
        path = NATIVE_PODGROUPS.path(group.name, namespace=group.namespace, sub="status")
        if not await self.writer.write(
            path, {"conditions": changes}, f"PodGroup {key}", patch=STRATEGIC_MERGE_PATCH
        ):
            return
        before = find_condition(current, SATISFIED)
        self._conditions[key] = _merged(current, changes)
        if satisfied is not None and (before is None or before.get("status") != satisfied["status"]):
            await self._satisfied_event(group, satisfied, before is None)

    async def _satisfied_event(self, group: PodGroupInfo, condition: Mapping[str, Any], first: bool) -> None:
        """An event on the PodGroup when ``PodGroupSatisfied`` changes (Warning when the gang falls
        below ``minCount``; Normal when it has them again, not for the first True): best effort."""
        ok = condition["status"] == "True"
        if self.raw is None or (ok and first):
            return
        body = event_body(
            group.namespace,
            group.name,
            group.uid,
            controller="shoal",
            instance=f"shoal-{socket.gethostname()}",
            kind="Normal" if ok else "Warning",
            reason=str(condition["reason"]),
            action="GangHealth",
            note=f"{SATISFIED} {condition['status']}: {condition['message']}",
            when=time.time(),
            regarding=("scheduling.k8s.io/v1beta1", "PodGroup"),
        )
        await write_retrying(
            self.raw,
            "POST",
            EVENTS.path(namespace=group.namespace),
            body,
            f"event {condition['reason']} for PodGroup {group.key}",
            done=lambda code: code < 300 or code in (404, 409),
            log=log,
        )

    # -- Volcano PodGroups -------------------------------------------------------------------------
    async def write_volcano(self, group: PodGroupInfo) -> None:
        """vc-scheduler's phase and counts on a Volcano PodGroup whose members shoal schedules,
        when they differ from what the object shows; not while a member's end is being checked."""
        key = group.key
        members = self.scheduler.cache.group_members(key)
        ours = any(m.scheduler_name in self.scheduler.profiles for m in members)
        if not members and key in self._volcano_job:  # a Volcano Job's pods come once it is Inqueue
            ours = await self._job_scheduler(group) in self.scheduler.profiles
        if key in self._checking or not ours:
            return  # checking, or vc-scheduler's group (or one without pods): Volcano writes it
        terminal = self._terminal.get(key, {"Succeeded": set(), "Failed": set()})
        succeeded, failed = len(terminal["Succeeded"]), len(terminal["Failed"])
        scheduled = sum(1 for m in members if m.bound) + succeeded + failed
        phase = volcano_phase(
            group.min_member, scheduled, succeeded + failed, refused=bool(group.unevaluated)
        )
        running = sum(1 for m in members if m.phase == "Running")
        status = {"phase": phase, "running": running, "succeeded": succeeded, "failed": failed}
        current = self._volcano.get(key, {})
        # Volcano omits zero counts (omitempty): absent and 0 are the same
        if all(current.get(k, 0 if k != "phase" else None) == v for k, v in status.items()):
            return
        path = VOLCANO_PODGROUPS.path(group.name, namespace=group.namespace)  # the object: no /status
        if await self.writer.write(path, status, f"PodGroup {key}"):
            self._volcano[key] = {**current, **status}

    async def _job_scheduler(self, group: PodGroupInfo) -> str:
        """The schedulerName of the Volcano Job that owns ``group`` ("" when unknown), read once:
        its job controller creates the pods only after the PodGroup leaves Pending, so until then
        the Job says whose the group is. A refusal (404, 403: no grant) is kept; a transient
        failure is retried at the next write."""
        entry = self._volcano_job[group.key]
        if entry[1] is not None or self.raw is None:
            return entry[1] or ""
        path = VOLCANO_JOBS.path(str(entry[0]), namespace=group.namespace)
        try:
            code, job = await self.raw.request("GET", path)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.info("reading Volcano Job %s/%s: %s (will retry)", group.namespace, entry[0], exc)
            return ""
        if code == 429 or code >= 500:
            return ""
        spec = (job.get("spec") or {}) if code == 200 and isinstance(job, dict) else {}
        # Volcano's admission webhook fills in "volcano" when a Job names no scheduler
        name = str(spec.get("schedulerName") or "volcano") if code == 200 else ""
        if code != 200:
            log.info("not reading Volcano Job %s/%s: HTTP %s", group.namespace, entry[0], code)
        entry[1] = name
        return name


def _merged(
    current: Sequence[Mapping[str, Any]], changes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``current`` conditions with ``changes`` in place of those of their types (a strategic merge
    patch of conditions, by type)."""
    types = {c.get("type") for c in changes}
    return [dict(c) for c in current if c.get("type") not in types] + [dict(c) for c in changes]


def volcano_job_owner(raw: Mapping[str, Any]) -> str:
    """The name of the Volcano Job (``batch.volcano.sh``) a PodGroup's controller reference names."""
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "Job" and str(ref.get("apiVersion") or "").startswith("batch.volcano.sh/"):
            return str(ref.get("name") or "")
    return ""
