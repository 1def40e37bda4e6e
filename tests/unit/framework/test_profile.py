"""Profile validation: every bad spec fails with a message naming the field."""

from typing import Any

import pytest

from shoal.core.framework.profile import PluginEntry, ProfileError, validate_profile
from shoal.plugins.registry import DEFAULT_PLUGINS, DEFAULT_PROFILE_SPEC, load_registry

REGISTRY = load_registry(third_party=False)


def check(spec: dict[str, Any]) -> None:
    validate_profile(spec, REGISTRY, DEFAULT_PLUGINS)


def test_default_profile_is_valid() -> None:
    v = validate_profile(DEFAULT_PROFILE_SPEC, REGISTRY, DEFAULT_PLUGINS)
    assert [r.name for r in v.points["queueSort"]] == ["PrioritySort"]
    assert v.args["NodeResourcesFit"].scoring_strategy.type == "MostAllocated"


def test_omitted_points_keep_defaults_given_points_replace_them() -> None:
    v = validate_profile(
        {"schedulerName": "s", "plugins": {"score": [{"name": "GPUMemory", "weight": 7}]}},
        REGISTRY,
        DEFAULT_PLUGINS,
    )
    assert [(r.name, r.weight) for r in v.points["score"]] == [("GPUMemory", 7)]
    assert [r.name for r in v.points["filter"]] == [r.name for r in DEFAULT_PLUGINS.filter or []]


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        pytest.param(
            {"schedulerName": "s", "plugins": {"filter": [{"name": "Nope"}]}},
            "spec.plugins.filter[0].name",
            "unknown plugin",
            id="unknown-plugin",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"filter": [{"name": "NodeName"}, {"name": "NodeName"}]}},
            "spec.plugins.filter[1].name",
            "listed twice",
            id="duplicate-plugin",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"score": [{"name": "GPUMemory", "weight": 0}]}},
            "spec.plugins.score[0].weight",
            "greater than or equal to 1",
            id="weight-zero",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"score": [{"name": "GPUMemory", "weight": 101}]}},
            "spec.plugins.score[0].weight",
            "less than or equal to 100",
            id="weight-too-big",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"score": [{"name": "GPUMemory", "weight": "heavy"}]}},
            "spec.plugins.score[0].weight",
            "integer",
            id="weight-not-int",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"filter": [{"name": "NodeName", "weight": 2}]}},
            "spec.plugins.filter[0].weight",
            "only allowed at score",
            id="weight-outside-score",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"queueSort": []}},
            "spec.plugins.queueSort",
            "exactly one",
            id="no-queuesort",
        ),
        pytest.param(
            {
                "schedulerName": "s",
                "plugins": {"queueSort": [{"name": "PrioritySort"}, {"name": "PrioritySort"}]},
            },
            "spec.plugins.queueSort[1].name",
            "listed twice",
            id="two-queuesort",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"bind": []}}, "spec.plugins.bind", "at least one", id="no-bind"
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"bind": [{"name": "GPUMemory"}]}},
            "spec.plugins.bind[0].name",
            "does not implement bind",
            id="wrong-point",
        ),
        pytest.param(
            {"schedulerName": "s", "pluginConfig": [{"name": "GPUMemory", "args": {"scorePerGb": "lots"}}]},
            "spec.pluginConfig[0].args.scorePerGb",
            "number",
            id="args-wrong-type",
        ),
        pytest.param(
            {"schedulerName": "s", "pluginConfig": [{"name": "GPUMemory", "args": {"labelKy": "x"}}]},
            "spec.pluginConfig[0].args.labelKy",
            "Extra inputs",
            id="args-unknown-field",
        ),
        pytest.param(
            {"schedulerName": "s", "pluginConfig": [{"name": "NodeName", "args": {"a": 1}}]},
            "spec.pluginConfig[0].args",
            "takes no args",
            id="args-for-argless",
        ),
        pytest.param({"schedulerName": "Bad_Name"}, "spec.schedulerName", "pattern", id="bad-scheduler-name"),
        pytest.param({}, "spec.schedulerName", "Field required", id="missing-scheduler-name"),
        pytest.param(
            {"schedulerName": "s", "percentageOfNodesToScore": 0},
            "spec.percentageOfNodesToScore",
            "greater",
            id="percentage-zero",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"filtr": []}},
            "spec.plugins.filtr",
            "Extra inputs",
            id="typo-point",
        ),
        pytest.param(
            {"schedulerName": "s", "plugins": {"filter": [{"name": f"P{i}"} for i in range(65)]}},
            "spec.plugins.filter",
            "at most 64",
            id="very-large-spec",
        ),
    ],
)
def test_invalid_profile_names_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ProfileError) as info:
        check(spec)
    paths = [path for path, _ in info.value.errors]
    assert field in paths, info.value.errors
    message = dict(info.value.errors)[field]
    assert words in message
    assert field in str(info.value)


def test_two_different_queuesort_plugins_are_refused() -> None:
    class FifoSort:
        name = "FifoSort"

        def sort_key(self, pod: Any, enqueued: float) -> tuple[Any, ...]:
            return (enqueued,)

    registry = load_registry(
        third_party=False, extra=[PluginEntry("FifoSort", lambda a, h: FifoSort(), None, FifoSort)]
    )
    spec: dict[str, Any] = {
        "schedulerName": "s",
        "plugins": {"queueSort": [{"name": "PrioritySort"}, {"name": "FifoSort"}]},
    }
    with pytest.raises(ProfileError) as info:
        validate_profile(spec, registry, DEFAULT_PLUGINS)
    assert any(p == "spec.plugins.queueSort" and "exactly one" in m for p, m in info.value.errors), (
        info.value.errors
    )
    spec["plugins"]["queueSort"] = [{"name": "FifoSort"}]  # one, not the default: fine
    assert validate_profile(spec, registry, DEFAULT_PLUGINS).points["queueSort"][0].name == "FifoSort"
