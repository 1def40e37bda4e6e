"""DefaultPreemption's reprieve by arithmetic gives the victims the Filter what-ifs give; the
nominated-pods pass by arithmetic gives the verdict of every Filter run."""

from __future__ import annotations

import random

import pytest

from shoal.core.framework import whatif
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.objects import PodInfo
from shoal.plugins.defaultpreemption import evaluator as preemption
from shoal.plugins.defaultpreemption import reprieve
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod


def cluster(rng: random.Random) -> tuple[Simulation, PodInfo]:
    nodes = [make_node(f"n{i}", cpu="4", memory="8Gi", pods=rng.choice([3, 5, 110])) for i in range(6)]
    pods = []
    for i in range(6):
        for j in range(rng.randint(1, 4)):
            pod = make_pod(
                f"p{i}-{j}",
                cpu=f"{rng.choice([300, 900, 1500])}m",
                memory=f"{rng.choice([256, 1024, 3072])}Mi",
                priority=rng.choice([0, 5, 10, 2000]),
                node_name=f"n{i}",
            )
            pod["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:00:{rng.randint(10, 59)}Z"}
            pods.append(pod)
    sim = Simulation(InMemoryCluster([*nodes, *pods]))
    high = make_pod("high", cpu=f"{rng.choice([1, 2, 3])}", memory=f"{rng.choice([1, 4])}Gi", priority=1000)
    return sim, PodInfo.from_dict(high)


@pytest.mark.parametrize("seed", range(40))
def test_arithmetic_victims_are_the_what_if_victims(seed: int) -> None:
    sim, pod = cluster(random.Random(seed))
    fw = sim.scheduler.profiles["gpu-scheduler"]
    state = whatif.shared_pre_filter(fw, pod)
    assert state is not None
    for row in range(fw.handle.cache.table.n):
        by_filters = preemption.select_victims_on_node(fw, pod, row, [], state, resources_only=False)
        by_arithmetic = preemption.select_victims_on_node(fw, pod, row, [], state, resources_only=True)
        # the same victims (ties in importance come in the cache's order, which a what-if reshuffles)
        assert sorted(p.name for p in by_arithmetic[0]) == sorted(p.name for p in by_filters[0])
        assert by_arithmetic[1] == by_filters[1]
        assert by_arithmetic[2].ok == by_filters[2].ok
        if not by_filters[2].ok:
            assert set(by_arithmetic[2].reasons) <= set(by_filters[2].reasons) | {"Too many pods"}


def test_a_victim_with_a_host_port_is_reprieved_by_the_filters() -> None:
    sim = Simulation(
        InMemoryCluster(
            [
                make_node("n", cpu="2"),
                {**make_pod("low", cpu="2", priority=0, node_name="n", host_ports=[80])},
            ]
        )
    )
    fw = sim.scheduler.profiles["gpu-scheduler"]
    pod = PodInfo.from_dict(make_pod("high", cpu="1", priority=10, host_ports=[80]))
    assert whatif.shared_pre_filter(fw, pod) is not None
    victims, _, status = preemption.select_victims_on_node(
        fw, pod, 0, [], whatif.shared_pre_filter(fw, pod), True
    )
    assert status.ok and [v.name for v in victims] == ["low"]  # the port, not cpu, makes it go


def test_the_default_profile_is_reprieved_by_arithmetic() -> None:
    """Every Filter of the default profile declares itself blind to the pods a node holds: a
    plugin added to the defaults without its contract would silently slow preemption down."""
    sim = Simulation(InMemoryCluster([make_node("n", cpu="2")]))
    fw = sim.scheduler.profiles["gpu-scheduler"]
    pod = PodInfo.from_dict(make_pod("high", cpu="1", priority=10))
    assert fw.arithmetic_what_ifs and reprieve.applies(fw, pod, [])


class _Undeclared:
    """A third-party Filter that declares nothing: it may look at the pods a node holds."""

    name = "Undeclared"

    def filter(self, state: object, pod: PodInfo, node: object) -> object:
        from shoal.core.state.status import Status

        return Status()


def test_a_filter_without_a_contract_turns_the_arithmetic_off() -> None:
    entry = PluginEntry("Undeclared", lambda args, handle: _Undeclared(), None, _Undeclared)
    registry = load_registry(third_party=False, extra=[entry])
    filters = [{"name": "NodeResourcesFit"}, {"name": "Undeclared"}]
    spec = {**DEFAULT_PROFILE_SPEC, "plugins": {"filter": filters}}
    sim = Simulation(InMemoryCluster([make_node("n", cpu="2")]), [spec], registry=registry)
    fw = sim.scheduler.profiles["gpu-scheduler"]
    pod = PodInfo.from_dict(make_pod("high", cpu="1", priority=10))
    assert not fw.arithmetic_what_ifs and not reprieve.applies(fw, pod, [])
    # NodeResourcesFit ignoring a resource turns it off too: its arithmetic would count it
    fit = {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}}
    spec = {**DEFAULT_PROFILE_SPEC, "pluginConfig": [fit]}
    sim = Simulation(InMemoryCluster([make_node("n", cpu="2")]), [spec])
    assert not sim.scheduler.profiles["gpu-scheduler"].arithmetic_what_ifs


@pytest.mark.parametrize("seed", range(40))
def test_the_nominated_pass_by_arithmetic_is_the_what_if_pass(seed: int) -> None:
    """kube's first pass with nominated pods counted, decided by resources when only resources
    can differ: the same verdict and reasons as PreFilter and every Filter run with the
    nominated pods counted on the node."""
    rng = random.Random(seed)
    sim, pod = cluster(rng)
    fw = sim.scheduler.profiles["gpu-scheduler"]
    table = fw.handle.cache.table
    for row in range(table.n):
        node = table.name(row)
        nominated = [
            PodInfo.from_dict(
                make_pod(
                    f"nom{row}-{k}", cpu=f"{rng.choice([200, 700, 1900])}m", memory="512Mi", priority=1000
                )
            )
            for k in range(rng.randint(1, 3))
        ]
        fast = whatif._nominated_verdict(fw, pod, row, node, nominated)
        slow = whatif.with_nominated(fw, pod, row, node, nominated)
        assert fast.fits == slow.fits
        if not slow.fits:
            assert fast.status.plugin == slow.status.plugin == "NodeResourcesFit"
            assert set(fast.status.reasons) == set(slow.status.reasons)


def test_a_nominated_pod_with_a_host_port_is_counted_by_the_filters() -> None:
    sim = Simulation(InMemoryCluster([make_node("n", cpu="8")]))
    fw = sim.scheduler.profiles["gpu-scheduler"]
    pod = PodInfo.from_dict(make_pod("p", cpu="1", priority=10, host_ports=[80]))
    nominated = [PodInfo.from_dict(make_pod("nom", cpu="1", priority=10, host_ports=[80]))]
    verdict = whatif._nominated_verdict(fw, pod, 0, "n", nominated)
    assert not verdict.fits and verdict.status.plugin == "NodePorts"


@pytest.mark.parametrize("seed", range(40))
def test_the_plain_path_chooses_the_victims_of_the_arithmetic_path(seed: int) -> None:
    """reprieve.select_plain (no Victim objects, no PDBs, no gangs) against the general
    arithmetic path, row by row, with nominated pods on some nodes."""
    rng = random.Random(seed)
    sim, pod = cluster(rng)
    fw = sim.scheduler.profiles["gpu-scheduler"]
    cache = fw.handle.cache
    for row in range(cache.table.n):
        if rng.random() < 0.4:
            nominated = PodInfo.from_dict(make_pod(f"nom{row}", cpu="500m", memory="256Mi", priority=1000))
            cache.nominator.nominate(nominated, cache.table.name(row))
    state = whatif.shared_pre_filter(fw, pod)
    run = reprieve.plain_run(fw, pod, [])
    assert state is not None and run is not None
    compared = 0
    for row in range(cache.table.n):
        node = cache.table.name(row)
        plain = preemption._plain_on_node(fw, pod, row, node, run)
        general = preemption.select_victims_on_node(fw, pod, row, [], state, resources_only=True)
        if plain is None:
            assert not [p for p in cache.pods_on(node) if p.priority < pod.priority]
            continue
        compared += 1
        assert [p.name for p in plain[0]] == [p.name for p in general[0]]
        assert plain[2].ok == general[2].ok and set(plain[2].reasons) == set(general[2].reasons)
    assert compared
