"""Bootstrap profiles without a server: the file, the hash, and what is created, patched or left."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

from shoal.kube.bootstrap import (
    HASH_ANNOTATION,
    MANAGED_BY_LABEL,
    Action,
    BootstrapError,
    BootstrapProfile,
    bootstrap_profiles,
    load_bootstrap_profiles,
    merge_patch,
    parse_bootstrap_profiles,
    plan,
    spec_hash,
)
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry

REGISTRY = load_registry(third_party=False)
SPEC: dict[str, Any] = copy.deepcopy(DEFAULT_PROFILE_SPEC)
PROFILE = BootstrapProfile("gpu-scheduler", SPEC)


def decide(existing: dict[str, Any] | None, profile: BootstrapProfile = PROFILE) -> Any:
    return plan(profile, existing, REGISTRY, DEFAULT_PLUGINS)


def existing(
    spec: dict[str, Any] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {
            "name": "gpu-scheduler",
            "resourceVersion": "42",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": copy.deepcopy(spec if spec is not None else SPEC),
    }


OURS = {MANAGED_BY_LABEL: "shoal"}


# -- the file ----------------------------------------------------------------------------------
def test_parses_a_list_of_name_and_spec() -> None:
    text = "- name: a\n  spec: {schedulerName: a}\n- name: b\n  spec: {schedulerName: x}\n"
    assert parse_bootstrap_profiles(text) == [
        BootstrapProfile("a", {"schedulerName": "a"}),
        BootstrapProfile("b", {"schedulerName": "x"}),
    ]
    assert parse_bootstrap_profiles("") == []
    assert parse_bootstrap_profiles("[]") == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("- name: [unclosed\n", "not YAML", id="yaml"),
        pytest.param("name: a\nspec: {}\n", "expected a list", id="mapping"),
        pytest.param("- just-a-string\n", "[0]: expected a mapping", id="item"),
        pytest.param("- spec: {schedulerName: a}\n", "[0].name: a non-empty string", id="no-name"),
        pytest.param("- name: a\n", "[0].spec: a mapping is required", id="no-spec"),
        pytest.param(
            "- {name: a, spec: {}}\n- {name: a, spec: {}}\n", "[1].name: 'a' is listed twice", id="dup"
        ),
    ],
)
def test_a_malformed_file_is_refused_with_where(text: str, words: str) -> None:
    with pytest.raises(BootstrapError) as info:
        parse_bootstrap_profiles(text, "profiles.yaml")
    assert words in str(info.value)
    assert str(info.value).startswith("profiles.yaml")


def test_an_unreadable_file_is_a_bootstrap_error(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match="cannot read"):
        load_bootstrap_profiles(tmp_path / "missing.yaml")
    (tmp_path / "p.yaml").write_text("- {name: a, spec: {schedulerName: a}}\n")
    assert load_bootstrap_profiles(tmp_path / "p.yaml") == [BootstrapProfile("a", {"schedulerName": "a"})]


# -- the hash and the patch --------------------------------------------------------------------
def test_hash_ignores_key_order_and_follows_content() -> None:
    a = {"schedulerName": "x", "percentageOfNodesToScore": 50}
    b = {"percentageOfNodesToScore": 50, "schedulerName": "x"}
    assert spec_hash(a) == spec_hash(b)
    assert spec_hash(a) != spec_hash({**a, "percentageOfNodesToScore": 51})
    assert len(spec_hash(a)) == 16


def test_merge_patch_turns_old_into_new() -> None:
    old = {"a": 1, "b": {"c": 1, "d": 2}, "gone": True, "list": [1, 2]}
    new = {"a": 1, "b": {"c": 1, "d": 3, "e": 4}, "list": [2]}
    assert merge_patch(old, new) == {"gone": None, "b": {"d": 3, "e": 4}, "list": [2]}
    assert merge_patch(new, new) == {}


# -- the decisions -----------------------------------------------------------------------------
def test_absent_is_created_with_label_and_hash() -> None:
    step = decide(None)
    assert step.action is Action.CREATE
    assert step.body["metadata"] == {
        "name": "gpu-scheduler",
        "labels": {MANAGED_BY_LABEL: "shoal"},
        "annotations": {HASH_ANNOTATION: spec_hash(SPEC)},
    }
    assert step.body["spec"] == SPEC
    assert step.body["kind"] == "SchedulingProfile"
    assert step.body["apiVersion"] == "shoal.dev/v1alpha1"


def test_same_hash_is_left_alone_even_when_edited() -> None:
    edited = {**SPEC, "plugins": {"score": [{"name": "NodeResourcesFit", "weight": 7}]}}
    same = {HASH_ANNOTATION: spec_hash(SPEC)}
    assert decide(existing(edited, labels=OURS, annotations=same)).action is Action.UNCHANGED
    # a user who took the label off keeps the object too
    assert decide(existing(edited, annotations=same)).action is Action.UNCHANGED


@pytest.mark.parametrize("annotations", [{HASH_ANNOTATION: "0123456789abcdef"}, {}], ids=["other", "missing"])
def test_ours_with_another_hash_is_patched_to_the_file(annotations: dict[str, str]) -> None:
    edited = {**SPEC, "percentageOfNodesToScore": 10, "plugins": {"score": [{"name": "GPUMemory"}]}}
    step = decide(existing(edited, labels=OURS, annotations=annotations))
    assert step.action is Action.PATCH
    assert step.body == {
        "metadata": {"annotations": {HASH_ANNOTATION: spec_hash(SPEC)}, "resourceVersion": "42"},
        "spec": {"percentageOfNodesToScore": 100, "plugins": None},
    }
    assert step.hash == spec_hash(SPEC)


@pytest.mark.parametrize(
    "labels",
    [{}, {MANAGED_BY_LABEL: "Helm"}, {"team": "ml"}],
    ids=["none", "helm", "other-label"],
)
@pytest.mark.parametrize(
    "annotations", [{}, {HASH_ANNOTATION: "0123456789abcdef"}], ids=["no-hash", "old-hash"]
)
def test_not_ours_is_never_touched(labels: dict[str, str], annotations: dict[str, str]) -> None:
    step = decide(existing({**SPEC, "percentageOfNodesToScore": 5}, labels=labels, annotations=annotations))
    assert step.action is Action.FOREIGN
    assert step.body is None
    assert MANAGED_BY_LABEL in step.message


def test_a_profile_from_the_former_helm_hook_is_adopted() -> None:
    # shoal <= 0.1 created profiles with a post-install hook: Helm's labels, no hash
    hook_labels = {MANAGED_BY_LABEL: "Helm", "helm.sh/chart": "shoal-0.1.0"}
    hook = {"helm.sh/hook": "post-install,post-upgrade"}
    step = decide(existing({**SPEC, "percentageOfNodesToScore": 5}, labels=hook_labels, annotations=hook))
    assert step.action is Action.PATCH
    assert step.body is not None
    assert step.body["metadata"]["labels"] == {MANAGED_BY_LABEL: "shoal"}
    assert step.body["spec"] == {"percentageOfNodesToScore": 100}
    for chart in ("my-platform-2.3.0", "shoal-profiles-1.2.0"):  # other charts, even shoal-something
        other = {MANAGED_BY_LABEL: "Helm", "helm.sh/chart": chart}
        assert decide(existing(SPEC, labels=other, annotations=hook)).action is Action.FOREIGN
    # a regular (non-hook) resource of a chart named like ours is not adopted either
    assert decide(existing(SPEC, labels=hook_labels)).action is Action.FOREIGN


def test_an_invalid_spec_is_skipped_whatever_exists() -> None:
    bad = BootstrapProfile("gpu-scheduler", {**SPEC, "plugins": {"filter": [{"name": "NoSuchPlugin"}]}})
    for obj in (None, existing(labels=OURS)):
        step = decide(obj, bad)
        assert step.action is Action.INVALID
        assert step.body is None
        assert "NoSuchPlugin" in step.message
    missing = decide(None, BootstrapProfile("x", {"percentageOfNodesToScore": 50}))
    assert missing.action is Action.INVALID
    assert "schedulerName" in missing.message


# -- carrying it out, against a fake API -------------------------------------------------------
class FakeApi:
    """Answers bootstrap's calls from a dict of objects, with optional scripted replies."""

    def __init__(self, objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.objects = objects or {}
        self.calls: list[tuple[str, str, Any]] = []
        self.script: list[tuple[int, Any]] = []  # replies to writes, first in first out
        self.read_script: list[tuple[int, Any] | Exception] = []  # replies to reads (or errors)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        self.calls.append((method, path, body))
        name = path.rsplit("/", 1)[-1]
        if method == "GET":
            if self.read_script:
                reply = self.read_script.pop(0)
                if isinstance(reply, Exception):
                    raise reply
                return reply
            obj = self.objects.get(name)
            return (200, copy.deepcopy(obj)) if obj is not None else (404, {"message": "not found"})
        if self.script:
            code, reply = self.script.pop(0)
            if code == 409 and method == "POST":  # the other replica's object exists now
                self.objects[body["metadata"]["name"]] = copy.deepcopy(body)
            return code, reply
        if method == "POST":
            self.objects[body["metadata"]["name"]] = copy.deepcopy(body)
            return 201, body
        assert content_type == "application/merge-patch+json"
        self.objects[name]["spec"] = {
            k: v for k, v in {**self.objects[name]["spec"], **body["spec"]}.items() if v is not None
        }
        self.objects[name]["metadata"]["annotations"].update(body["metadata"]["annotations"])
        return 200, self.objects[name]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.yaml"
    path.write_text(text)
    return path


FILE = (
    "- name: gpu-scheduler\n"
    "  spec: {schedulerName: gpu-scheduler, percentageOfNodesToScore: 50}\n"
    "- name: broken\n"
    "  spec: {schedulerName: broken, plugins: {filter: [{name: NoSuchPlugin}]}}\n"
)


async def test_creates_then_leaves_alone_and_skips_the_invalid(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApi()
    path = write(tmp_path, FILE)
    with caplog.at_level(logging.INFO, logger="shoal.bootstrap"):
        first = await bootstrap_profiles(api, path, REGISTRY, DEFAULT_PLUGINS)
    assert [(p.name, p.action) for p in first] == [
        ("gpu-scheduler", Action.CREATE),
        ("broken", Action.INVALID),
    ]
    assert set(api.objects) == {"gpu-scheduler"}
    assert any(r.levelno == logging.ERROR and "broken is invalid" in r.getMessage() for r in caplog.records)
    posts = [c for c in api.calls if c[0] == "POST"]
    assert len(posts) == 1
    assert posts[0][1] == "/apis/shoal.dev/v1alpha1/schedulingprofiles"
    api.calls.clear()
    again = await bootstrap_profiles(api, path, REGISTRY, DEFAULT_PLUGINS)
    assert [p.action for p in again] == [Action.UNCHANGED, Action.INVALID]
    assert [c[0] for c in api.calls] == ["GET", "GET"]  # no writes


async def test_a_409_on_create_means_another_replica_won(tmp_path: Path) -> None:
    api = FakeApi()
    api.script = [(409, {"message": "already exists"})]
    done = await bootstrap_profiles(api, write(tmp_path, FILE), REGISTRY, DEFAULT_PLUGINS)
    assert done[0].action is Action.UNCHANGED  # read again: the winner wrote the same hash
    assert [c[0] for c in api.calls if "gpu-scheduler" in c[1] or c[0] == "POST"] == ["GET", "POST", "GET"]


async def test_a_changed_file_patches_ours(tmp_path: Path) -> None:
    api = FakeApi()
    await bootstrap_profiles(api, write(tmp_path, FILE), REGISTRY, DEFAULT_PLUGINS)
    changed = FILE.replace("percentageOfNodesToScore: 50", "percentageOfNodesToScore: 70")
    done = await bootstrap_profiles(api, write(tmp_path, changed), REGISTRY, DEFAULT_PLUGINS)
    assert done[0].action is Action.PATCH
    obj = api.objects["gpu-scheduler"]
    assert obj["spec"]["percentageOfNodesToScore"] == 70
    assert obj["metadata"]["annotations"][HASH_ANNOTATION] == done[0].hash


async def test_a_bad_file_or_refusals_never_raise(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    with caplog.at_level(logging.ERROR, logger="shoal.bootstrap"):
        assert await bootstrap_profiles(api, tmp_path / "nope.yaml", REGISTRY) == []
        assert await bootstrap_profiles(api, write(tmp_path, "{oops"), REGISTRY) == []
    assert api.calls == []
    assert sum("not applied" in r.getMessage() for r in caplog.records) == 2
    api.script = [(403, {"message": "forbidden"})]
    done = await bootstrap_profiles(api, write(tmp_path, FILE), REGISTRY, DEFAULT_PLUGINS)
    assert done[0].action is Action.FAILED
    assert "403" in done[0].message
    assert api.objects == {}


async def test_what_may_pass_is_retried_until_it_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh install: the API is unreachable, then the CRD's storage initialises (429), then
    the CRD is not served yet (404 on create); each is waited out, and the profile is created."""
    api = FakeApi()
    api.read_script = [
        ConnectionResetError("reset by peer"),
        (429, {"message": "storage is (re)initializing"}),
        (503, {"message": "unavailable"}),
    ]
    api.script = [(404, {"message": "the server could not find the requested resource"})]
    with caplog.at_level(logging.WARNING, logger="shoal.bootstrap"):
        done = await bootstrap_profiles(
            api, write(tmp_path, FILE), REGISTRY, DEFAULT_PLUGINS, backoff=(0.0, 0.0)
        )
    assert [(p.name, p.action) for p in done] == [
        ("gpu-scheduler", Action.CREATE),
        ("broken", Action.INVALID),
    ]
    assert [c[0] for c in api.calls] == ["GET", "GET", "GET", "GET", "POST", "GET", "POST", "GET"]
    assert set(api.objects) == {"gpu-scheduler"}
    retries = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert len(retries) == 4
    assert "reset by peer" in retries[0] and "429" in retries[1] and "404" in retries[3]


async def test_a_retry_stops_when_leadership_is_lost(tmp_path: Path) -> None:
    api = FakeApi()
    api.read_script = [(429, {"message": "busy"})] * 3
    leading = iter([True, True, False])
    done = await bootstrap_profiles(
        api,
        write(tmp_path, FILE),
        REGISTRY,
        DEFAULT_PLUGINS,
        leading=lambda: next(leading),
        backoff=(0.0, 0.0),
    )
    assert done == []
    assert [c[0] for c in api.calls] == ["GET", "GET"]


async def test_stops_writing_when_no_longer_leading(tmp_path: Path) -> None:
    api = FakeApi()
    done = await bootstrap_profiles(
        api, write(tmp_path, FILE), REGISTRY, DEFAULT_PLUGINS, leading=lambda: False
    )
    assert done == []
    assert api.calls == []


def test_the_servers_minor_version_is_read_as_releases_write_it() -> None:
    from shoal.kube.rest import minor_of

    assert minor_of({"major": "1", "minor": "38", "gitVersion": "v1.38.0-beta.0"}) == 38
    assert minor_of({"major": "1", "minor": "37+"}) == 37  # some distributions add a "+"
    assert minor_of({}) == 0 and minor_of("not json") == 0
