"""``shoal profiles from-config``: KubeSchedulerConfiguration → SchedulingProfiles (shoal/migrate.py).

The inputs in tests/data/scheduler-plugins/ are scheduler-plugins' own configurations: its Helm
chart's rendered ConfigMap and its Coscheduling example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.cli import main
from shoal.core.framework.profile import validate_profile
from shoal.migrate import ConfigError, Conversion, convert, load_config
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry

DATA = Path(__file__).resolve().parents[1] / "data" / "scheduler-plugins"
REGISTRY = load_registry(third_party=False)
KSC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def run(config: dict[str, Any]) -> Conversion:
    return convert(config, REGISTRY, DEFAULT_PLUGINS)


def points(profile: dict[str, Any]) -> dict[str, list[tuple[str, int | None]]]:
    """What shoal will run: the converted spec validated with shoal's defaults."""
    validated = validate_profile(profile["spec"], REGISTRY, DEFAULT_PLUGINS)
    return {p: [(r.name, r.weight) for r in refs] for p, refs in validated.points.items()}


def one_profile(**profile: Any) -> dict[str, Any]:
    return {**KSC, "profiles": [{"schedulerName": "batch", **profile}]}


def test_scheduler_plugins_chart_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "from-config", str(DATA / "as-a-second-scheduler.yaml")]) == 0
    out, err = capsys.readouterr()
    (profile,) = list(yaml.safe_load_all(out))
    assert profile["kind"] == "SchedulingProfile"
    assert profile["metadata"]["name"] == profile["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert profile["spec"]["pluginConfig"] == [
        {"name": "Coscheduling", "args": {"defaultScheduleTimeoutSeconds": 10}}
    ]
    run_points = points(profile)
    for point in ("preEnqueue", "preFilter", "reserve", "permit"):
        assert "Coscheduling" in [n for n, _ in run_points[point]], point
    assert run_points["queueSort"] == [("PrioritySort", None)]
    # kube-scheduler's weights, not shoal's defaults (TaintToleration 3, NodeResourcesFit 1)
    assert ("TaintToleration", 3) in run_points["score"] and ("NodeResourcesFit", 1) in run_points["score"]
    assert ("NodeResourcesBalancedAllocation", 1) in run_points["score"]  # kube's default, kept
    assert "GPUMemory" not in {n for refs in run_points.values() for n, _ in refs}  # not in the source
    lines = [line.removeprefix("not carried over: ") for line in err.splitlines()]
    assert lines == [
        "leaderElection: not a profile setting (shoal's equivalent: the chart's leaderElection values / "
        "`shoal run --lease-*`)",
        "profiles[0].plugins: plugin CapacityScheduling (multiPoint) left out: shoal does not read "
        "ElasticQuotas",
        "profiles[0].plugins: plugin NodeResourceTopologyMatch (multiPoint) left out: shoal does not read "
        "NodeResourceTopology (NUMA) objects",
        "profiles[0].plugins: plugin NodeResourcesAllocatable (multiPoint) left out: not a shoal plugin "
        "(NodeResourcesFit's scoringStrategy is the closest)",
        "profiles[0].plugins.queueSort: no shoal QueueSort plugin left; PrioritySort used (shoal places a "
        "gang in one cycle, so its members need not be sorted together)",
    ]


def test_scheduler_plugins_coscheduling_example() -> None:
    result = run(load_config((DATA / "coscheduling.yaml").read_text(), "coscheduling.yaml"))
    (profile,) = result.profiles
    assert profile["spec"]["schedulerName"] == "default-scheduler"
    assert any("default-scheduler is the cluster's default scheduler's" in n for n in result.notes)
    assert (
        "profiles[0].plugins.queueSort: plugin Coscheduling left out: shoal's Coscheduling has no queueSort"
        in (result.notes)
    )
    assert points(profile)["permit"] == [("Coscheduling", None)]


def test_no_plugin_changes_keep_kube_schedulers_defaults_where_shoal_differs() -> None:
    (profile,) = run(one_profile()).profiles
    spec = profile["spec"]
    assert "preEnqueue" in spec["plugins"]  # shoal's default adds Coscheduling there
    assert "bind" not in spec["plugins"] and "queueSort" not in spec["plugins"]  # same as shoal's
    assert "Coscheduling" not in {n for refs in points(profile).values() for n, _ in refs}


def test_enable_disable_and_weights_per_point() -> None:
    plugins = {
        "multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}]},
        "filter": {"disabled": [{"name": "NodePorts"}]},
        "score": {
            "enabled": [{"name": "ImageLocality", "weight": 250}],
            "disabled": [{"name": "NodeAffinity"}],
        },
    }
    result = run(one_profile(plugins=plugins))
    run_points = points(result.profiles[0])
    assert "NodePorts" not in [n for n, _ in run_points["filter"]]
    assert "NodePorts" in [n for n, _ in run_points["preFilter"]]  # disabled at filter only
    score = dict(run_points["score"])
    assert score["TaintToleration"] == 7  # re-configured in place at multiPoint
    assert score["ImageLocality"] == 100 and "NodeAffinity" not in score
    assert run_points["score"][0] == ("ImageLocality", 100)  # enabled at the point itself: first
    assert (
        "profiles[0].plugins.score: ImageLocality weight 250 lowered to shoal's maximum 100" in result.notes
    )


def test_everything_disabled_keeps_only_what_a_point_lists() -> None:
    plugins = {
        "multiPoint": {"disabled": [{"name": "*"}]},
        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
        "filter": {"enabled": [{"name": "NodeResourcesFit"}]},
        "preFilter": {"enabled": [{"name": "NodeResourcesFit"}]},
        "bind": {"enabled": [{"name": "DefaultBinder"}]},
    }
    result = run(one_profile(plugins=plugins))
    run_points = points(result.profiles[0])
    assert run_points["filter"] == [("NodeResourcesFit", None)]
    assert run_points["score"] == [] and run_points["preEnqueue"] == []
    assert not any("DefaultPreemption" in n for n in result.notes)  # disabled by the source itself


def test_noderesourcesfit_args_and_percentage() -> None:
    args = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "NodeResourcesFitArgs",
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "nvidia.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
            },
        },
        "ignoredResourceGroups": ["example.com"],
    }
    config = {
        **one_profile(pluginConfig=[{"name": "NodeResourcesFit", "args": args}]),
        "percentageOfNodesToScore": 40,
    }
    (profile,) = run(config).profiles
    assert profile["spec"]["percentageOfNodesToScore"] == 40
    (cfg,) = profile["spec"]["pluginConfig"]
    assert cfg["args"]["scoringStrategy"]["type"] == "RequestedToCapacityRatio"
    assert cfg["args"]["ignoredResourceGroups"] == ["example.com"] and "kind" not in cfg["args"]
    validate_profile(profile["spec"], REGISTRY, DEFAULT_PLUGINS)


def test_pod_topology_spread_args_are_kept() -> None:
    """Cluster-level default constraints, as kube-scheduler's documentation configures them."""
    args = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "PodTopologySpreadArgs",
        "defaultConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
            }
        ],
        "defaultingType": "List",
    }
    (profile,) = run(one_profile(pluginConfig=[{"name": "PodTopologySpread", "args": args}])).profiles
    (cfg,) = profile["spec"]["pluginConfig"]
    assert cfg == {
        "name": "PodTopologySpread",
        "args": {"defaultConstraints": args["defaultConstraints"], "defaultingType": "List"},
    }
    validated = validate_profile(profile["spec"], REGISTRY, DEFAULT_PLUGINS)
    assert validated.args["PodTopologySpread"].defaulting_type == "List"


def test_node_affinity_added_affinity_is_kept() -> None:
    """A profile confined to a node pool, as kube-scheduler's documentation writes it."""
    added = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "scheduler-profile", "operator": "In", "values": ["foo"]}]}
            ]
        }
    }
    args = {"kind": "NodeAffinityArgs", "addedAffinity": added}
    (profile,) = run(one_profile(pluginConfig=[{"name": "NodeAffinity", "args": args}])).profiles
    assert profile["spec"]["pluginConfig"] == [{"name": "NodeAffinity", "args": {"addedAffinity": added}}]
    validate_profile(profile["spec"], REGISTRY, DEFAULT_PLUGINS)


@pytest.mark.parametrize(
    ("profile", "note"),
    [
        pytest.param(
            {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Fancy"}}}]},
            "profiles[0].pluginConfig[0].args.scoringStrategy.type: Input should be",
            id="bad-args",
        ),
        pytest.param(
            {"pluginConfig": [{"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 5}}]},
            "profiles[0].pluginConfig[0]: args of Coscheduling dropped: the plugin is not in the profile",
            id="args-of-absent-plugin",
        ),
        pytest.param(
            {"pluginConfig": [{"name": "Trimaran", "args": {}}]},
            "profiles[0].pluginConfig[0]: args of Trimaran dropped: not a shoal plugin",
            id="args-of-unknown-plugin",
        ),
        pytest.param(
            {"percentageOfNodesToScore": 0},
            "profiles[0].percentageOfNodesToScore: 0 (kube-scheduler's adaptive share) dropped",
            id="adaptive-percentage",
        ),
    ],
)
def test_what_is_not_carried_over_is_said(profile: dict[str, Any], note: str) -> None:
    notes = run(one_profile(**profile)).notes
    assert any(n.startswith(note) for n in notes), notes


def test_coscheduling_args_translate() -> None:
    plugins = {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}
    args = {"permitWaitingTimeSeconds": 3600, "podGroupBackoffSeconds": 5}
    result = run(one_profile(plugins=plugins, pluginConfig=[{"name": "Coscheduling", "args": args}]))
    assert result.profiles[0]["spec"]["pluginConfig"] == [
        {"name": "Coscheduling", "args": {"defaultScheduleTimeoutSeconds": 900}}
    ]
    assert any("permitWaitingTimeSeconds 3600 is 900 in shoal" in n for n in result.notes)
    assert any(
        n.startswith("profiles[0].pluginConfig[0].args: podGroupBackoffSeconds dropped") for n in result.notes
    )


def test_top_level_settings_are_named() -> None:
    notes = run({**one_profile(), "extenders": [{"urlPrefix": "http://x"}], "parallelism": 32}).notes
    assert notes[:2] == [
        "extenders: not a profile setting (shoal's equivalent: nothing: shoal has no scheduler extenders "
        "(write a plugin))",
        "parallelism: not a profile setting (shoal's equivalent: nothing: shoal's filters are vectorised "
        "over all nodes)",
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("a: [", "not YAML", id="not-yaml"),
        pytest.param("kind: Pod\n", "expected one KubeSchedulerConfiguration, found 0", id="not-a-config"),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n",
            "is not kubescheduler.config.k8s.io/v1",
            id="old-version",
        ),
        pytest.param(
            yaml.safe_dump({**KSC, "profiles": [{"plugins": {"score": {"enabled": "x"}}}]}),
            "profiles[0].plugins.score.enabled: expected a list",
            id="bad-list",
        ),
    ],
)
def test_invalid_files_fail_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert main(["profiles", "from-config", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("shoal: error: ")
    assert words in err and "Traceback" not in err


def test_a_missing_file_fails_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles", "from-config", str(tmp_path / "nope.yaml")]) == 1
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err == f"shoal: error: cannot read {tmp_path / 'nope.yaml'}: No such file or directory\n"
    )


def test_load_config_refuses_two_configs() -> None:
    with pytest.raises(ConfigError, match="found 2"):
        load_config(yaml.safe_dump_all([KSC, KSC]), "f")


def test_converted_default_profile_runs_every_point_upstream_runs() -> None:
    """kube-scheduler 1.37's multiPoint plugins run at the same points in the converted profile:
    DynamicResources deallocates at PostFilter before DefaultPreemption preempts, VolumeBinding
    scores (StorageCapacityScoring); nothing is said to be narrowed."""
    converted = run(one_profile())
    assert not any("runs without" in n for n in converted.notes), converted.notes
    run_points = points(converted.profiles[0])
    assert ("VolumeBinding", None) in run_points["preScore"] and ("VolumeBinding", 1) in run_points["score"]
    assert [n for n, _ in run_points["postFilter"]] == ["DynamicResources", "DefaultPreemption"]
