"""A SchedulingProfile claiming several schedulerNames (``spec.aliases``), without a server.

KubeRay hard-codes ``schedulerName: scheduler-plugins-scheduler``: a profile that lists it as an
alias schedules those pods with its own plugins. Each name is owned apart (the oldest claimant).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from shoal.core.framework.profile import ProfileError, validate_profile
from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.status import Status
from shoal.kube.crds import profile_crd
from shoal.kube.informer import ADDED, DELETED, Event
from shoal.kube.kinds import KIND_PROFILES, ProfileObject
from shoal.operator_app.metrics import PromMetrics
from shoal.operator_app.profiles import ProfileController, Profiles, owner_of
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry

REGISTRY = load_registry(third_party=False)
KUBERAY = "scheduler-plugins-scheduler"


def spec(name: str, *aliases: str) -> dict[str, Any]:
    out: dict[str, Any] = {**DEFAULT_PROFILE_SPEC, "schedulerName": name}
    if aliases:
        out["aliases"] = list(aliases)
    return out


def event(type: str, name: str, body: dict[str, Any], created: str) -> Event[ProfileObject]:
    raw = {"metadata": {"name": name, "creationTimestamp": created, "generation": 1}, "spec": body}
    return Event(KIND_PROFILES, type, raw)


class _NoBind:
    async def bind(self, pod: Any, node: str) -> Status:
        return Status()


def feed(profiles: Profiles, *events: Event[ProfileObject]) -> None:
    for e in events:
        for name in profiles.observe(e):
            assert profiles.apply(name) is None


def ready(profiles: Profiles, name: str) -> tuple[str, str, str]:
    cond = profiles.status(name)["conditions"][0]
    return cond["status"], cond["reason"], cond["message"]


def test_profile_object_claims_its_name_then_its_aliases() -> None:
    obj = ProfileObject.from_dict({"metadata": {"name": "p"}, "spec": spec("gpu", KUBERAY, "batch")})
    assert obj.scheduler_names == ("gpu", KUBERAY, "batch")
    assert owner_of([obj], KUBERAY) is obj


def test_an_alias_gets_a_framework_with_the_profiles_plugins() -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    feed(profiles, event(ADDED, "gpu", spec("gpu", KUBERAY), "2026-01-01T00:00:00Z"))
    assert set(sched.profiles) == {"gpu", KUBERAY}
    assert sched.profiles[KUBERAY].name == KUBERAY  # metrics and events carry the pod's own name
    assert ready(profiles, "gpu") == ("True", "Valid", f"scheduling pods with schedulerName gpu, {KUBERAY}")
    # the alias is dropped by an edit: its framework goes
    feed(profiles, event("MODIFIED", "gpu", spec("gpu"), "2026-01-01T00:00:00Z"))
    assert set(sched.profiles) == {"gpu"}


def test_an_alias_another_profile_owns_is_a_conflict_reported_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    controller = ProfileController(profiles, _NoWrite(), lambda: False, PromMetrics())
    caplog.set_level(logging.WARNING, logger="shoal.operator")
    old = event(ADDED, "plugins", spec(KUBERAY), "2026-01-01T00:00:00Z")
    new = event(ADDED, "gpu", spec("gpu", KUBERAY), "2026-02-01T00:00:00Z")
    for e in (old, new):
        feed(profiles, e)
        controller.log_conflicts()
    assert profiles.applied[KUBERAY] == ("plugins", 1) and profiles.applied["gpu"] == ("gpu", 1)
    status, reason, message = ready(profiles, "gpu")
    assert (status, reason) == ("True", "Valid")
    assert f'alias "{KUBERAY}" is claimed by the older SchedulingProfile "plugins"' in message
    assert profiles.conflicts() == [("gpu", KUBERAY, "plugins")]
    controller.log_conflicts()  # nothing new: not logged again
    logged = [r.getMessage() for r in caplog.records if "SchedulerNameConflict" in r.getMessage()]
    assert len(logged) == 1 and f'claims schedulerName "{KUBERAY}"' in logged[0]
    # the owner goes: the alias moves to the remaining claimant
    feed(profiles, event(DELETED, "plugins", spec(KUBERAY), "2026-01-01T00:00:00Z"))
    assert profiles.applied[KUBERAY] == ("gpu", 1) and profiles.conflicts() == []


def test_a_profile_that_lost_its_own_name_schedules_its_alias() -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    feed(
        profiles,
        event(ADDED, "old", spec("gpu"), "2026-01-01T00:00:00Z"),
        event(ADDED, "new", spec("gpu", KUBERAY), "2026-02-01T00:00:00Z"),
    )
    assert profiles.applied == {"gpu": ("old", 1), KUBERAY: ("new", 1)}
    assert ready(profiles, "new") == (
        "True",
        "Valid",
        f'scheduling pods with schedulerName {KUBERAY}; schedulerName "gpu" is claimed by the older '
        'SchedulingProfile "old" (SchedulerNameConflict)',
    )


def test_a_profile_owning_none_of_its_names_is_refused() -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    feed(
        profiles,
        event(ADDED, "a", spec("gpu", KUBERAY), "2026-01-01T00:00:00Z"),
        event(ADDED, "b", spec(KUBERAY, "gpu"), "2026-02-01T00:00:00Z"),
    )
    status, reason, message = ready(profiles, "b")
    assert (status, reason) == ("False", "SchedulerNameConflict")
    assert f'schedulerName "{KUBERAY}" is already claimed by SchedulingProfile "a"' in message
    assert 'schedulerName "gpu" is already claimed' in message


@pytest.mark.parametrize(
    ("aliases", "words"),
    [
        pytest.param(["gpu"], "aliases must differ", id="same-as-schedulerName"),
        pytest.param([KUBERAY, KUBERAY], "aliases must differ", id="twice"),
        pytest.param(["Not_Valid"], "spec.aliases[0]", id="pattern"),
    ],
)
def test_bad_aliases_are_refused(aliases: list[str], words: str) -> None:
    with pytest.raises(ProfileError, match=words.replace("[", r"\[").replace("]", r"\]")):
        validate_profile({**spec("gpu"), "aliases": aliases}, REGISTRY, DEFAULT_PLUGINS)


def test_the_crd_refuses_an_alias_equal_to_the_scheduler_name() -> None:
    schema = profile_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert schema["properties"]["aliases"]["x-kubernetes-list-type"] == "set"
    rules = [r["rule"] for r in schema["x-kubernetes-validations"]]
    assert "!has(self.aliases) || !(self.schedulerName in self.aliases)" in rules


class _NoWrite:
    async def write(self, path: str, status: Any, what: str, *, patch: str = "") -> bool:
        return True


async def test_an_invalid_profile_is_logged_once_per_generation(caplog: pytest.LogCaptureFixture) -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    controller = ProfileController(profiles, _NoWrite(), lambda: False, PromMetrics())
    caplog.set_level(logging.WARNING, logger="shoal.operator")
    bad = {**spec("gpu", KUBERAY), "plugins": {"filter": [{"name": "Nope"}]}}
    # added, then seen again and again (resyncs, the echo of a status write): one warning
    for kind in (ADDED, "MODIFIED", "MODIFIED", "MODIFIED"):
        await controller.on_event(event(kind, "gpu", bad, "2026-01-01T00:00:00Z"))
    invalid = [r.getMessage() for r in caplog.records if "is invalid" in r.getMessage()]
    assert len(invalid) == 1 and "SchedulingProfile gpu (generation 1) is invalid" in invalid[0]
    # a new generation that is still invalid is news
    again = Event(
        KIND_PROFILES,
        "MODIFIED",
        {
            "metadata": {"name": "gpu", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 2},
            "spec": bad,
        },
    )
    await controller.on_event(again)
    await controller.on_event(again)
    invalid = [r.getMessage() for r in caplog.records if "is invalid" in r.getMessage()]
    assert len(invalid) == 2 and "(generation 2)" in invalid[1]


async def test_a_scheduler_name_conflict_is_logged_from_the_event_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    controller = ProfileController(profiles, _NoWrite(), lambda: False, PromMetrics())
    caplog.set_level(logging.WARNING, logger="shoal.operator")
    await controller.on_event(event(ADDED, "old", spec("gpu"), "2026-01-01T00:00:00Z"))
    for kind in (ADDED, "MODIFIED"):
        await controller.on_event(event(kind, "new", spec("gpu"), "2026-02-01T00:00:00Z"))
    logged = [r for r in caplog.records if "SchedulerNameConflict" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING
    assert 'SchedulingProfile new claims schedulerName "gpu"' in logged[0].getMessage()
