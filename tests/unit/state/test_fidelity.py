"""Never silently wrong: a pod using a field its profile does not evaluate is refused, naming it.

The corpus in tests/data/real/ holds pods as their controllers write them; each says in its
``shoal.dev/expect`` annotation what a faithful scheduler does with it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.core.state import fidelity
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim.cluster import InMemoryCluster, Simulation, load_objects
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import BUILTIN_EVALUATORS, refusal

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
EVALUATORS = BUILTIN_EVALUATORS
check = refusal


REQ, PREF = (
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution",
)


@pytest.mark.parametrize(
    ("patch", "path", "plugin", "point"),
    [
        (
            {"affinity": {"podAntiAffinity": {REQ: [{}]}}},
            f"spec.affinity.podAntiAffinity.{REQ}",
            "InterPodAffinity",
            "filter",
        ),
        (
            {"affinity": {"podAffinity": {PREF: [{}]}}},
            f"spec.affinity.podAffinity.{PREF}",
            "InterPodAffinity",
            "score",
        ),
        (
            {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{}]}}}},
            f"spec.affinity.nodeAffinity.{REQ}",
            "NodeAffinity",
            "filter",
        ),
        ({"nodeSelector": {"disk": "ssd"}}, "spec.nodeSelector", "NodeAffinity", "filter"),
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
            "spec.topologySpreadConstraints[0]",
            "PodTopologySpread",
            "filter",
        ),
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
            "spec.topologySpreadConstraints[0]",
            "PodTopologySpread",
            "score",
        ),
        (
            {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
            "spec.containers[*].ports[*].hostPort",
            "NodePorts",
            "filter",
        ),
        ({"schedulingGates": [{"name": "x"}]}, "spec.schedulingGates", "SchedulingGates", "preEnqueue"),
        ({"resourceClaims": [{"name": "gpu"}]}, "spec.resourceClaims", "DynamicResources", "filter"),
        ({"resourceClaims": [{"name": "gpu"}]}, "spec.resourceClaims", "DynamicResources", "preBind"),
        (
            {
                "volumes": [
                    {"name": "a", "emptyDir": {}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "c"}},
                ]
            },
            "spec.volumes[1].persistentVolumeClaim",
            "VolumeBinding",
            "filter",
        ),
        (
            {"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}]},
            "spec.volumes[0].ephemeral",
            "VolumeBinding",
            "filter",
        ),
        (
            {"volumes": [{"name": "g", "gcePersistentDisk": {"pdName": "x"}}]},
            "spec.volumes[0].gcePersistentDisk",
            "VolumeRestrictions",
            "filter",
        ),
    ],
)
def test_each_field_is_found_with_its_plugin_and_point(
    patch: dict[str, object], path: str, plugin: str, point: str
) -> None:
    obj = make_pod("p")
    obj["spec"].update(patch)
    info = PodInfo.from_dict(obj)
    (use,) = [u for u in info.fields_used if u.path == path]
    assert (plugin, point) in EVALUATORS[use.field]
    status = check(info.fields_used, at={})
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert path in status.message and status.plugin == fidelity.GUARD
    # every plugin that evaluates the field, where it must: evaluated; one of them elsewhere: not
    needs = EVALUATORS[use.field]
    at: dict[str, set[str]] = {}
    for name, where in needs:
        at.setdefault(where or "filter", set()).add(name)
    assert check([use], at=at) is None
    elsewhere = "score" if point != "score" else "filter"
    moved = {k: v - {plugin} for k, v in at.items()}
    moved.setdefault(elsewhere, set()).add(plugin)
    assert check([use], at=moved) is not None


def test_empty_or_harmless_fields_are_not_flagged() -> None:
    obj = make_pod("p")
    obj["spec"].update(
        {
            "affinity": {"podAntiAffinity": {}, "nodeAffinity": {}},
            "topologySpreadConstraints": [],
            "schedulingGates": [],
            "resourceClaims": [],
            "nodeSelector": {},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "volumes": [
                {"name": "t", "projected": {"sources": []}},
                {"name": "c", "configMap": {"name": "c"}},
            ],
        }
    )
    assert PodInfo.from_dict(obj).fields_used == ()


def test_a_field_whose_plugin_the_profile_leaves_out_names_the_plugin_and_point() -> None:
    gpu = "metadata.annotations[shoal.dev/gpu-memory-gb]"
    fields = [
        fidelity.FieldUse("spec.schedulingGates", fidelity.SCHEDULING_GATES),
        fidelity.FieldUse(gpu, gpu),
    ]
    assert check(fields, at={"preEnqueue": {"SchedulingGates"}, "filter": {"GPUMemory"}}) is None
    status = check(fields, at={"preEnqueue": {"SchedulingGates"}, "score": {"GPUMemory"}})
    assert status is not None
    assert (
        "metadata.annotations[shoal.dev/gpu-memory-gb], which this profile does not evaluate"
        " (it leaves out GPUMemory at filter)" in status.message
    )


def test_a_profile_with_interpodaffinity_only_at_score_refuses_required_anti_affinity() -> None:
    """The reviewer's case: InterPodAffinity listed at score but not at filter placed an anti-affine
    pod beside the pod it repels."""
    plugins = {
        "preFilter": [{"name": "NodeResourcesFit"}],
        "filter": [{"name": "NodeResourcesFit"}],
    }
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster, [{**DEFAULT_PROFILE_SPEC, "plugins": plugins}])
    sim.submit(make_pod("x", cpu="1", node_name="n1", labels={"app": "x"}))
    obj = make_pod("anti", scheduler_name="gpu-scheduler")
    obj["spec"]["affinity"] = {
        "podAntiAffinity": {
            REQ: [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]
        }
    }
    sim.submit(obj)
    (outcome,) = [o for o in asyncio.run(sim.run()).values() if o.pod == "default/anti"]
    assert outcome.node is None
    assert "it leaves out InterPodAffinity at filter" in outcome.message


def test_a_profile_without_nodeaffinity_refuses_a_node_selector() -> None:
    plugins = {"preFilter": [{"name": "NodeResourcesFit"}], "filter": [{"name": "NodeResourcesFit"}]}
    cluster = InMemoryCluster([make_node("hdd", cpu="8", labels={"disk": "hdd"})])
    sim = Simulation(cluster, [{**DEFAULT_PROFILE_SPEC, "plugins": plugins}])
    obj = make_pod("picky", scheduler_name="gpu-scheduler")
    obj["spec"]["nodeSelector"] = {"disk": "ssd"}
    sim.submit(obj)
    (outcome,) = asyncio.run(sim.run()).values()
    assert outcome.node is None and "spec.nodeSelector" in outcome.message


def test_plugins_whose_filter_needs_their_prefilter_are_refused_without_it() -> None:
    from shoal.core.framework.profile import ProfileError, validate_profile
    from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry

    for plugin in ("InterPodAffinity", "PodTopologySpread"):
        spec = {"schedulerName": "s", "plugins": {"preFilter": [{"name": "NodeResourcesFit"}]}}
        with pytest.raises(ProfileError) as info:
            validate_profile(spec, load_registry(third_party=False), DEFAULT_PLUGINS)
        assert any(f'"{plugin}" at filter needs its preFilter' in m for _, m in info.value.errors)
        spec = {"schedulerName": "s", "plugins": {"preScore": [{"name": "NodeResourcesFit"}]}}
        with pytest.raises(ProfileError) as info:
            validate_profile(spec, load_registry(third_party=False), DEFAULT_PLUGINS)
        assert any(f'"{plugin}" at score needs its preScore' in m for _, m in info.value.errors)
    # the volume plugins' Filters read their PreFilter state too
    spec = {"schedulerName": "s", "plugins": {"preFilter": [{"name": "NodeResourcesFit"}]}}
    with pytest.raises(ProfileError) as info:
        validate_profile(spec, load_registry(third_party=False), DEFAULT_PLUGINS)
    for plugin in ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"):
        assert any(f'"{plugin}" at filter needs its preFilter' in m for _, m in info.value.errors)


def test_a_claim_needs_all_four_volume_plugins_and_names_the_missing_ones() -> None:
    claim = PodInfo.from_dict(
        {
            **make_pod("c"),
            "spec": {
                **make_pod("c")["spec"],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}],
            },
        }
    ).fields_used
    every = {"VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"}
    assert check(claim, at={"filter": every}) is None
    status = check(claim, at={"filter": {"VolumeBinding", "NodeVolumeLimits"}})
    assert status is not None
    assert "(it leaves out VolumeZone at filter)" in status.message
    assert "(it leaves out VolumeRestrictions at filter)" in status.message
    ephemeral = [fidelity.FieldUse("spec.volumes[1].ephemeral", fidelity.volume("ephemeral"))]
    assert check(ephemeral, at={"filter": {"VolumeBinding", "NodeVolumeLimits"}}) is None
    assert check(ephemeral, at={"filter": {"VolumeBinding"}}) is not None
    disk = [fidelity.FieldUse("spec.volumes[0].gcePersistentDisk", fidelity.volume("gcePersistentDisk"))]
    status = check(disk, at={"filter": {"VolumeRestrictions"}})
    assert status is not None and "(it leaves out NodeVolumeLimits at filter)" in status.message


def test_a_field_no_plugin_declares_is_refused_and_a_plugin_that_declares_it_evaluates_it() -> None:
    """The core knows fields, not plugins: a third-party plugin that declares a field (say,
    Kueue's topology request) takes it off the refused list, where the profile runs it."""
    kueue = fidelity.annotation("kueue.x-k8s.io/podset-required-topology")
    use = [fidelity.FieldUse(kueue, kueue, why="Kueue assigns the domain")]
    status = check(use, at={})
    assert status is not None and "which shoal does not evaluate (Kueue assigns the domain)" in status.message
    declared = {**EVALUATORS, kueue: (("KueueTopology", "filter"),)}
    assert fidelity.check(use, {"filter": {"KueueTopology"}}, declared) is None
    status = fidelity.check(use, {"score": {"KueueTopology"}}, declared)
    assert status is not None and "(it leaves out KueueTopology at filter)" in status.message
    unknown = [fidelity.FieldUse("spec.somethingNew", "spec.somethingNew")]
    status = check(unknown, at={})
    assert status is not None and "which shoal does not evaluate yet" in status.message


def test_five_anti_affine_replicas_are_not_stacked_on_one_node() -> None:
    """The bug report: required anti-affinity on the hostname, and all five landed on one node."""
    cluster = InMemoryCluster([make_node(f"n{i}", cpu="64") for i in range(3)])
    sim = Simulation(cluster)
    for i in range(5):
        obj = make_pod(f"web-{i}", cpu="1", scheduler_name="gpu-scheduler", labels={"app": "web"})
        obj["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
        sim.submit(obj)
    outcomes = list(asyncio.run(sim.run()).values())
    placed = [o.node for o in outcomes if o.node is not None]
    assert sorted(placed) == ["n0", "n1", "n2"]
    pending = [o.message for o in outcomes if o.node is None]
    assert (
        pending
        == [
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
            " preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        ]
        * 2
    )


def test_a_profile_without_interpodaffinity_refuses_anti_affine_pods() -> None:
    plugins = {
        "preFilter": [{"name": "NodeResourcesFit"}],
        "filter": [{"name": "NodeResourcesFit"}],
        "preScore": [],
        "score": [{"name": "NodeResourcesFit"}],
    }
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster, [{**DEFAULT_PROFILE_SPEC, "plugins": plugins}])
    obj = make_pod("anti", scheduler_name="gpu-scheduler", labels={"app": "a"})
    obj["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    sim.submit(obj)
    sim.submit(make_pod("plain", scheduler_name="gpu-scheduler"))
    outcomes = {o.pod: o for o in asyncio.run(sim.run()).values()}
    assert outcomes["default/plain"].node == "n1"
    assert outcomes["default/anti"].node is None
    assert (
        f"spec.affinity.podAntiAffinity.{REQ}, which this profile does not evaluate"
        " (it leaves out InterPodAffinity at filter)" in outcomes["default/anti"].message
    )


def test_a_profile_without_gpumemory_refuses_gpu_memory_pods() -> None:
    profile = {**DEFAULT_PROFILE_SPEC, "plugins": {"reserve": [{"name": "Coscheduling"}]}}
    profile["plugins"] = {
        "preFilter": [{"name": "NodeResourcesFit"}],
        "filter": [{"name": "NodeResourcesFit"}],
        "preScore": [],
        "score": [{"name": "NodeResourcesFit"}],
        "reserve": [],
    }
    profile["pluginConfig"] = [c for c in profile["pluginConfig"] if c["name"] == "NodeResourcesFit"]
    cluster = InMemoryCluster([make_node("n1", cpu="8", labels={"gpu-memory-free-gb": "40"})])
    sim = Simulation(cluster, [profile])
    sim.submit(make_pod("wants", scheduler_name="gpu-scheduler", gpu_memory_gb=10))
    sim.submit(make_pod("plain", scheduler_name="gpu-scheduler"))
    outcomes = {o.pod: o for o in asyncio.run(sim.run()).values()}
    assert outcomes["default/plain"].node == "n1"
    assert outcomes["default/wants"].node is None
    assert "it leaves out GPUMemory" in outcomes["default/wants"].message


def real_cluster() -> InMemoryCluster:
    return InMemoryCluster.from_yaml(REAL / "nodes.yaml", REAL / "pods.yaml")


def test_real_pods_get_what_their_expect_annotation_says() -> None:
    cluster = real_cluster()
    expect = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["annotations"][
            "shoal.dev/expect"
        ]
        for p in cluster.pods.values()
    }
    outcomes = {o.pod: o for o in asyncio.run(Simulation(cluster).run()).values()}
    assert set(outcomes) == set(expect)
    for key, want in expect.items():
        got = outcomes[key]
        if want == "placed":
            assert got.node is not None, (key, got.message)
        elif want == "gated":
            assert got.node is None and "waiting for scheduling gates" in got.message, (key, got.message)
        elif want.startswith("held: "):
            assert got.node is None and want.removeprefix("held: ") in got.message, (key, got.message)
        else:
            field = want.removeprefix("unschedulable: ")
            assert got.node is None and field in got.message, (key, got.message)


def test_simulate_prints_real_dumps_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--cluster", str(REAL / "nodes.yaml"), "--pods", str(REAL / "pods.yaml")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Traceback" not in out.out + out.err
    assert "ResourceClaim not created yet" in out.out
    assert len(load_objects(REAL / "pods.yaml")) == 10


def test_explain_names_the_field_and_the_gate() -> None:
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sched = Simulation(cluster).scheduler
    claims = make_pod("s", scheduler_name="gpu-scheduler")
    claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    assert (
        'pod "default/s": ResourceClaim not created yet' in sched.explain(PodInfo.from_dict(claims)).message
    )
    gated = make_pod("g", scheduler_name="gpu-scheduler")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    assert sched.explain(PodInfo.from_dict(gated)).message == (
        "0/1 nodes are available: waiting for scheduling gates: [example.com/wait]."
    )
    assert sched.explain(PodInfo.from_dict(make_pod("ok", scheduler_name="gpu-scheduler"))).best == "n1"


def test_a_filter_without_its_prefilter_state_is_an_error_not_a_pass() -> None:
    from shoal.core.framework.cyclestate import CycleState

    with pytest.raises(LookupError, match="earlier extension point did not run"):
        CycleState().require("PreFilterInterPodAffinity")


def test_kueue_topology_annotation_is_left_to_kueue_and_its_node_selector_honoured() -> None:
    """Kueue's TAS picks the domain and ungates with a nodeSelector on it: shoal honours that and
    does not pick a domain of its own; the annotation on a pod Kueue never placed is refused."""
    key = "kueue.x-k8s.io/podset-required-topology"
    nodes = [make_node(f"n{i}", cpu="8", rack=f"r{i % 2}") for i in range(4)]
    sim = Simulation(InMemoryCluster(nodes), [DEFAULT_PROFILE_SPEC])
    assigned = make_pod(
        "assigned",
        scheduler_name="gpu-scheduler",
        annotations={key: "topology.shoal.dev/rack"},
        node_selector={"topology.shoal.dev/rack": "r1", "kubernetes.io/hostname": "n3"},
    )
    stray = make_pod("stray", scheduler_name="gpu-scheduler", annotations={key: "topology.shoal.dev/rack"})
    sim.submit(assigned)
    sim.submit(stray)
    outcomes = {o.pod: o for o in asyncio.run(sim.run()).values()}
    assert outcomes["default/assigned"].node == "n3"
    assert outcomes["default/stray"].node is None
    assert (
        f"pod uses metadata.annotations[{key}], which shoal does not evaluate (Kueue assigns the topology"
        in outcomes["default/stray"].message
    )


def test_kueue_preferred_topology_is_found_only_without_a_node_selector() -> None:
    ann = {"kueue.x-k8s.io/podset-preferred-topology": "topology.shoal.dev/block"}
    used = fidelity.fields_used({}, ann)
    assert [u.path for u in used] == ["metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]"]
    assert used[0].field not in BUILTIN_EVALUATORS and used[0].why == fidelity.KUEUE_ASSIGNS
    assert fidelity.fields_used({"nodeSelector": {"kubernetes.io/hostname": "n1"}}, ann) == (
        fidelity.FieldUse("spec.nodeSelector", fidelity.NODE_SELECTOR),
    )
