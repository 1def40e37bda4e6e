"""SchedulingProfiles: which one schedules each schedulerName, and the status each should show.

* **Ownership**: the oldest profile (creationTimestamp, then name) claiming a schedulerName owns
  it; a newer one is refused (``SchedulerNameConflict``) and takes over only when the owner goes.
  A profile claims its ``schedulerName`` and its ``aliases`` (e.g. ``scheduler-plugins-scheduler``,
  which KubeRay hard-codes), each owned apart: the scheduler runs one framework per name owned,
  built from the owner's spec. A profile that owns none of its names is refused; one that lost
  only some says which in its Ready message. Each conflict is logged once.
* **Validation**: an invalid edit of the owner keeps the last valid generation scheduling
  (``InvalidSpec``, the message says which generation); an owner never valid schedules nothing.
* **Status**: ``profile_status`` is pure (tested without a server); :class:`ProfileController`
  writes it, as the leader only, when it differs from what the object shows.

``shoal explain`` uses :class:`Profiles` too, so it picks the same owner as the operator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shoal.core.framework.profile import PluginEntry, PluginSet, ProfileError, validate_profile
from shoal.core.scheduling.scheduler import Scheduler
from shoal.kube.informer import Event
from shoal.kube.kinds import ProfileObject
from shoal.kube.status import StatusWriter, same_status
from shoal.kube.wire import PROFILES, rfc3339
from shoal.operator_app.metrics import PromMetrics

log = logging.getLogger("shoal.operator")


def owner_of(profiles: Iterable[ProfileObject], scheduler_name: str) -> ProfileObject | None:
    """The oldest profile claiming ``scheduler_name`` (ties: the smaller name)."""
    claimants = [p for p in profiles if scheduler_name in p.scheduler_names]
    return min(claimants, key=lambda p: (p.created, p.name)) if claimants else None


def _conflicts(profile: ProfileObject, owners: Mapping[str, str | None]) -> dict[str, str]:
    """The names ``profile`` claims that an older profile owns: name -> that profile."""
    return {
        n: owner
        for n in profile.scheduler_names
        if (owner := owners.get(n)) is not None and owner != profile.name
    }


def profile_status(
    profile: ProfileObject,
    *,
    owner: str | None,
    applied: tuple[str, int] | None,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None,
    now: Callable[[], str] = rfc3339,
    alias_owners: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The status ``profile`` should have: ``owner`` of its schedulerName (``alias_owners``: of its
    aliases), ``applied`` = (profile, generation) scheduling it now. ``lastTransitionTime`` moves
    only when ``Ready`` changes."""
    plugins: dict[str, list[str]] | None = None
    lost = _conflicts(profile, {**(alias_owners or {}), profile.scheduler_name: owner})
    owned = [n for n in profile.scheduler_names if n not in lost]
    if not owned:
        ready, reason = "False", "SchedulerNameConflict"
        message = "; ".join(
            f'schedulerName "{n}" is already claimed by SchedulingProfile "{o}"' for n, o in lost.items()
        )
        message += " (the older one wins); this profile is not used"
    else:
        try:
            validated = validate_profile(profile.spec, registry, defaults)
            plugins = {p: [r.name for r in refs] for p, refs in validated.points.items() if refs}
            ready, reason = "True", "Valid"
            message = f"scheduling pods with schedulerName {', '.join(owned)}"
            message += "".join(
                f'; {"schedulerName" if n == profile.scheduler_name else "alias"} "{n}" is claimed by '
                f'the older SchedulingProfile "{o}" (SchedulerNameConflict)'
                for n, o in lost.items()
            )
        except ProfileError as exc:
            ready, reason = "False", "InvalidSpec"
            message = str(exc)
            if applied is not None and applied[0] == profile.name:
                message += f" (still scheduling with generation {applied[1]}, the last valid one)"
    previous = next((c for c in profile.status.get("conditions") or () if c.get("type") == "Ready"), None)
    transition = (
        previous["lastTransitionTime"]
        if previous is not None and previous.get("status") == ready and previous.get("lastTransitionTime")
        else now()
    )
    condition = {
        "type": "Ready",
        "status": ready,
        "reason": reason,
        "message": message[:32000],
        "lastTransitionTime": transition,
        "observedGeneration": profile.generation,
    }
    return {"observedGeneration": profile.generation, "conditions": [condition], "plugins": plugins}


class Profiles:
    """The profiles seen, and which one the scheduler runs for each schedulerName."""

    def __init__(
        self, scheduler: Scheduler, registry: Mapping[str, PluginEntry], defaults: PluginSet | None
    ) -> None:
        self.scheduler = scheduler
        self.registry = registry
        self.defaults = defaults
        self.objects: dict[str, ProfileObject] = {}
        #: schedulerName -> (profile object name, generation) currently in effect
        self.applied: dict[str, tuple[str, int]] = {}

    def observe(self, event: Event[ProfileObject]) -> set[str]:
        """Record an event; returns the schedulerNames whose owner may have changed."""
        touched: set[str] = set()
        name = str((event.raw.get("metadata") or {}).get("name") or "")
        old = self.objects.pop(name, None)
        if old is not None:
            touched.update(old.scheduler_names)
        if not event.deleted:
            self.objects[name] = event.obj
            touched.update(event.obj.scheduler_names)
        return touched

    def owner(self, scheduler_name: str) -> ProfileObject | None:
        return owner_of(self.objects.values(), scheduler_name)

    def apply(self, scheduler_name: str) -> ProfileError | None:
        """Make the scheduler run the owner's spec (or nothing); the owner's error if invalid."""
        owner = self.owner(scheduler_name)
        if owner is None:
            self.scheduler.remove_profile(scheduler_name)
            self.applied.pop(scheduler_name, None)
            return None
        if self.applied.get(scheduler_name) == (owner.name, owner.generation):
            return None
        spec = owner.spec
        if scheduler_name != owner.scheduler_name:  # an alias: the same plugins under that name
            spec = {**spec, "schedulerName": scheduler_name, "aliases": []}
        try:
            self.scheduler.set_profile(spec)
        except ProfileError as exc:
            previous = self.applied.get(scheduler_name)
            if previous is None or previous[0] != owner.name:
                self.scheduler.remove_profile(scheduler_name)
                self.applied.pop(scheduler_name, None)
            return exc
        self.applied[scheduler_name] = (owner.name, owner.generation)
        log.info(
            "SchedulingProfile %s (generation %s) now schedules %s",
            owner.name,
            owner.generation,
            scheduler_name,
        )
        return None

    def status(self, name: str) -> dict[str, Any]:
        """The status the profile object ``name`` should have now."""
        profile = self.objects[name]
        owners = {n: (o.name if (o := self.owner(n)) is not None else None) for n in profile.scheduler_names}
        return profile_status(
            profile,
            owner=owners[profile.scheduler_name],
            applied=self.applied.get(profile.scheduler_name),
            registry=self.registry,
            defaults=self.defaults,
            alias_owners=owners,
        )

    def conflicts(self) -> list[tuple[str, str, str]]:
        """(profile, schedulerName, owner) for every name a profile claims and does not own."""
        out = []
        for profile in self.objects.values():
            for n in profile.scheduler_names:
                owner = self.owner(n)
                if owner is not None and owner.name != profile.name:
                    out.append((profile.name, n, owner.name))
        return sorted(out)

    def ready_count(self) -> int:
        return sum(1 for n in self.objects if self.status(n)["conditions"][0]["status"] == "True")


class ProfileController:
    """Profile events into :class:`Profiles`; the leader writes the statuses that changed."""

    def __init__(
        self, profiles: Profiles, writer: StatusWriter, leading: Callable[[], bool], metrics: PromMetrics
    ) -> None:
        self.profiles = profiles
        self.writer = writer
        self.leading = leading
        self.metrics = metrics
        self._written: dict[str, dict[str, Any]] = {}
        #: conflicts already logged, so each is logged once (again only after it went away)
        self._logged_conflicts: set[tuple[str, str, str]] = set()
        #: profile -> (generation, error) last logged as invalid: a resync, a status write's echo
        #: or an alias re-applying the same bad generation does not log it again
        self._logged_invalid: dict[str, tuple[int, str]] = {}

    def log_conflicts(self) -> None:
        """Log each SchedulerNameConflict once, when it appears."""
        now = set(self.profiles.conflicts())
        for profile, name, owner in sorted(now - self._logged_conflicts):
            log.warning(
                'SchedulerNameConflict: SchedulingProfile %s claims schedulerName "%s", which the older '
                "SchedulingProfile %s owns; %s does not schedule it",
                profile,
                name,
                owner,
                profile,
            )
        self._logged_conflicts = now

    def log_invalid(self, owner: ProfileObject, error: ProfileError) -> None:
        """Log an invalid generation once (again for another generation or another error)."""
        seen = (owner.generation, str(error))
        if self._logged_invalid.get(owner.name) == seen:
            return
        self._logged_invalid[owner.name] = seen
        log.warning(
            "SchedulingProfile %s (generation %s) is invalid: %s", owner.name, owner.generation, error
        )

    async def on_event(self, event: Event[ProfileObject]) -> None:
        touched = self.profiles.observe(event)
        if event.deleted:
            self._written.pop(event.obj.name, None)
        for scheduler_name in touched:
            error = self.profiles.apply(scheduler_name)
            owner = self.profiles.owner(scheduler_name)
            if error is not None and owner is not None:
                self.log_invalid(owner, error)
        if event.deleted:
            self._logged_invalid.pop(event.obj.name, None)
        self.log_conflicts()
        for profile in list(self.profiles.objects.values()):
            if touched.intersection(profile.scheduler_names):
                await self.write(profile.name)
        ready = self.profiles.ready_count()
        self.metrics.profiles.labels("true").set(ready)
        self.metrics.profiles.labels("false").set(len(self.profiles.objects) - ready)

    def new_term(self) -> None:
        """A new leader writes every status it disagrees with, whatever an earlier term wrote."""
        self._written.clear()

    async def write_all(self) -> None:
        for name in list(self.profiles.objects):
            await self.write(name)

    async def write(self, name: str) -> None:
        if not self.leading() or name not in self.profiles.objects:
            return
        status = self.profiles.status(name)
        if same_status(self.profiles.objects[name].status, status) or self._written.get(name) == status:
            return
        if await self.writer.write(PROFILES.path(name, sub="status"), status, f"SchedulingProfile {name}"):
            self._written[name] = status
