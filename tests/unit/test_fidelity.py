"""Never silently wrong: a pod using a field its profile does not evaluate is refused, naming it.

The corpus in tests/data/real/ holds pods as their controllers write them; each says in its
``shoal.dev/expect`` annotation what a faithful scheduler does with it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.core import fidelity
from shoal.core.objects import PodInfo
from shoal.core.status import Code
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim import InMemoryCluster, Simulation, load_objects
from shoal.testing.objects import make_node, make_pod

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (
            {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}},
            "spec.affinity.podAntiAffinity",
        ),
        (
            {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]}}},
            "spec.affinity.podAffinity",
        ),
        ({"topologySpreadConstraints": [{"maxSkew": 1}]}, "spec.topologySpreadConstraints"),
        ({"resourceClaims": [{"name": "gpu"}]}, "spec.resourceClaims"),
        ({"schedulingGroup": {"podGroupName": "g"}}, "spec.schedulingGroup"),
        ({"resources": {"requests": {"cpu": "1"}}}, "spec.resources"),
        (
            {
                "volumes": [
                    {"name": "a", "emptyDir": {}},
                    {"name": "d", "persistentVolumeClaim": {"claimName": "c"}},
                ]
            },
            "spec.volumes[1].persistentVolumeClaim",
        ),
        ({"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}]}, "spec.volumes[0].ephemeral"),
        (
            {"volumes": [{"name": "g", "gcePersistentDisk": {"pdName": "x"}}]},
            "spec.volumes[0].gcePersistentDisk",
        ),
        ({"schedulingGates": [{"name": "x"}]}, "spec.schedulingGates"),
    ],
)
def test_each_field_is_found_and_named(patch: dict[str, object], field: str) -> None:
    obj = make_pod("p")
    obj["spec"].update(patch)
    info = PodInfo.from_dict(obj)
    assert field in info.fields_used
    status = fidelity.check(info.fields_used, plugins=())
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert field in status.message and status.plugin == fidelity.GUARD


def test_empty_or_harmless_fields_are_not_flagged() -> None:
    obj = make_pod("p")
    obj["spec"].update(
        {
            "affinity": {"podAntiAffinity": {}, "nodeAffinity": {}},
            "topologySpreadConstraints": [],
            "schedulingGates": [],
            "resourceClaims": [],
            "volumes": [
                {"name": "t", "projected": {"sources": []}},
                {"name": "c", "configMap": {"name": "c"}},
            ],
        }
    )
    assert PodInfo.from_dict(obj).fields_used == ()


def test_a_field_whose_plugin_the_profile_leaves_out_names_the_plugin() -> None:
    fields = ("spec.schedulingGates", "metadata.annotations[shoal.dev/gpu-memory-gb]")
    assert fidelity.check(fields, plugins={"SchedulingGates", "GPUMemory"}) is None
    status = fidelity.check(fields, plugins={"SchedulingGates"})
    assert status is not None
    assert (
        "metadata.annotations[shoal.dev/gpu-memory-gb], which this profile does not evaluate"
        " (it leaves out GPUMemory)" in status.message
    )


def test_a_claim_needs_all_four_volume_plugins_and_names_the_missing_ones() -> None:
    claim = ("spec.volumes[0].persistentVolumeClaim",)
    volume_plugins = {"VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"}
    assert fidelity.check(claim, plugins=volume_plugins) is None
    status = fidelity.check(claim, plugins={"VolumeBinding", "NodeVolumeLimits"})
    assert status is not None
    assert "(it leaves out VolumeZone, VolumeRestrictions)" in status.message
    # generic ephemeral volumes: VolumeBinding and NodeVolumeLimits, as upstream
    assert (
        fidelity.check(("spec.volumes[1].ephemeral",), plugins={"VolumeBinding", "NodeVolumeLimits"}) is None
    )
    # an in-tree disk: conflicts (VolumeRestrictions) and attach limits (NodeVolumeLimits)
    status = fidelity.check(("spec.volumes[0].gcePersistentDisk",), plugins={"VolumeRestrictions"})
    assert status is not None and "(it leaves out NodeVolumeLimits)" in status.message


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
    assert pending == ["0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."] * 2


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
        "spec.affinity.podAntiAffinity, which this profile does not evaluate (it leaves out InterPodAffinity)"
        in (outcomes["default/anti"].message)
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
        else:
            field = want.removeprefix("unschedulable: ")
            assert got.node is None and field in got.message, (key, got.message)


def test_simulate_prints_real_dumps_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--cluster", str(REAL / "nodes.yaml"), "--pods", str(REAL / "pods.yaml")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Traceback" not in out.out + out.err
    assert "spec.resourceClaims" in out.out
    assert len(load_objects(REAL / "pods.yaml")) == 8


def test_explain_names_the_field_and_the_gate() -> None:
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sched = Simulation(cluster).scheduler
    claims = make_pod("s", scheduler_name="gpu-scheduler")
    claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    assert "spec.resourceClaims" in sched.explain(PodInfo.from_dict(claims)).message
    gated = make_pod("g", scheduler_name="gpu-scheduler")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    assert sched.explain(PodInfo.from_dict(gated)).message == (
        "0/1 nodes are available: waiting for scheduling gates: [example.com/wait]."
    )
    assert sched.explain(PodInfo.from_dict(make_pod("ok", scheduler_name="gpu-scheduler"))).best == "n1"
