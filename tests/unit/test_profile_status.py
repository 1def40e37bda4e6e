"""SchedulingProfile ownership and status (operator_app/profiles.py), without a server."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.status import Status
from shoal.kube.informer import ADDED, DELETED, Event
from shoal.kube.kinds import KIND_PROFILES, ProfileObject
from shoal.operator_app.profiles import Profiles, owner_of, profile_status
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry

REGISTRY = load_registry(third_party=False)
BAD_SPEC = {"schedulerName": "gpu", "plugins": {"filter": [{"name": "NoSuchPlugin"}]}}


def profile(
    name: str,
    spec: dict[str, Any] | None = None,
    *,
    created: float = 0.0,
    generation: int = 1,
    status: dict[str, Any] | None = None,
) -> ProfileObject:
    spec = dict(spec if spec is not None else {**DEFAULT_PROFILE_SPEC, "schedulerName": "gpu"})
    return ProfileObject(name, created, generation, str(spec.get("schedulerName")), spec, status or {})


def status(
    p: ProfileObject, owner: str | None = None, applied: tuple[str, int] | None = None
) -> dict[str, Any]:
    return profile_status(
        p,
        owner=p.name if owner is None else owner,
        applied=applied,
        registry=REGISTRY,
        defaults=DEFAULT_PLUGINS,
        now=lambda: "2026-12-01T00:00:00Z",
    )


def test_the_oldest_profile_owns_a_scheduler_name_and_ties_go_to_the_smaller_name() -> None:
    a, b, c = profile("b", created=1.0), profile("a", created=2.0), profile("c", created=1.0)
    assert owner_of([a, b, c], "gpu") is a
    assert owner_of([a, b, c], "other") is None


def test_a_valid_owner_is_ready_and_lists_its_plugins() -> None:
    s = status(profile("p", generation=4))
    cond = s["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "True", "Valid")
    assert cond["message"] == "scheduling pods with schedulerName gpu"
    assert s["observedGeneration"] == cond["observedGeneration"] == 4
    assert cond["lastTransitionTime"] == "2026-12-01T00:00:00Z"
    assert s["plugins"] and "filter" in s["plugins"]


def test_a_newer_claimant_is_refused() -> None:
    s = status(profile("new"), owner="old")
    cond = s["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "SchedulerNameConflict")
    assert '"old"' in cond["message"] and s["plugins"] is None


@pytest.mark.parametrize(
    ("applied", "still"),
    [
        pytest.param(("p", 2), True, id="last-valid-generation-still-schedules"),
        pytest.param(None, False, id="never-valid"),
        pytest.param(("other", 1), False, id="another-profile-applied"),
    ],
)
def test_an_invalid_owner(applied: tuple[str, int] | None, still: bool) -> None:
    s = status(profile("p", BAD_SPEC, generation=3), applied=applied)
    cond = s["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert "NoSuchPlugin" in cond["message"]
    assert ("still scheduling with generation 2" in cond["message"]) is still


def test_the_transition_time_moves_only_when_ready_changes() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    kept = status(profile("p", status={"conditions": [ready]}))
    assert kept["conditions"][0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    moved = status(profile("p", BAD_SPEC, status={"conditions": [ready]}))
    assert moved["conditions"][0]["lastTransitionTime"] == "2026-12-01T00:00:00Z"


class _NoBind:
    async def bind(self, pod: Any, node: str) -> Status:
        return Status()


def _event(
    type: str, name: str, spec: dict[str, Any], created: str, generation: int = 1
) -> Event[ProfileObject]:
    meta = {"name": name, "creationTimestamp": created, "generation": generation}
    return Event(KIND_PROFILES, type, {"metadata": meta, "spec": spec})


def test_ownership_moves_to_the_next_oldest_and_a_bad_edit_keeps_the_last_valid_generation() -> None:
    sched = Scheduler(REGISTRY, _NoBind(), defaults=DEFAULT_PLUGINS)
    profiles = Profiles(sched, REGISTRY, DEFAULT_PLUGINS)
    good = {**DEFAULT_PROFILE_SPEC, "schedulerName": "gpu"}
    for event in (
        _event(ADDED, "old", good, "2026-01-01T00:00:00Z"),
        _event(ADDED, "new", good, "2026-02-01T00:00:00Z"),
    ):
        for name in profiles.observe(event):
            assert profiles.apply(name) is None
    assert profiles.applied["gpu"] == ("old", 1)
    assert profiles.status("new")["conditions"][0]["reason"] == "SchedulerNameConflict"
    assert profiles.ready_count() == 1
    # a bad edit of the owner: the scheduler keeps generation 1
    (name,) = profiles.observe(_event("MODIFIED", "old", BAD_SPEC, "2026-01-01T00:00:00Z", generation=2))
    assert profiles.apply(name) is not None
    assert profiles.applied["gpu"] == ("old", 1) and "gpu" in sched.profiles
    assert "still scheduling with generation 1" in profiles.status("old")["conditions"][0]["message"]
    # the owner goes: the next oldest takes over
    (name,) = profiles.observe(_event(DELETED, "old", BAD_SPEC, "2026-01-01T00:00:00Z", generation=2))
    assert profiles.apply(name) is None
    assert profiles.applied["gpu"] == ("new", 1)
    assert profiles.status("new")["conditions"][0]["reason"] == "Valid"
