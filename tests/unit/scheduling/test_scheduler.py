"""Scheduling and binding cycles end to end on the in-memory cluster."""

from __future__ import annotations

import asyncio
from typing import Any

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Status
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


def sim(
    objects: list[dict[str, Any]], profiles: list[dict[str, Any]] | None = None, **kwargs: Any
) -> Simulation:
    kwargs.setdefault("initial_backoff", 0.01)
    kwargs.setdefault("max_backoff", 0.05)
    return Simulation(InMemoryCluster(objects), profiles or [], **kwargs)


def uid_of(s: Simulation, name: str) -> str:
    return next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == name)


async def test_binds_own_pods_and_leaves_others_alone() -> None:
    s = sim(
        [
            make_node("n1", gpus=8),
            make_pod("mine", gpus=1),
            make_pod("theirs", scheduler_name="default-scheduler"),
        ]
    )
    await s.run()
    placements = s.placements()
    assert placements["default/mine"] == "n1"
    assert placements["default/theirs"] is None


async def test_failed_scheduling_message_in_kube_wording() -> None:
    nodes = [make_node(f"g{i}", gpus=1) for i in range(2)] + [
        make_node(f"t{i}", gpus=8, taints=[TAINT]) for i in range(3)
    ]
    s = sim([*nodes, make_pod("big", gpus=4)])
    outcomes = await s.run()
    (outcome,) = outcomes.values()
    assert outcome.node is None
    assert outcome.message == (
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint(s)."
        " preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    )
    assert [e[1] for e in s.reporter.events] == ["FailedScheduling"]  # one event per attempt


async def test_other_schedulers_pods_are_not_overcommitted() -> None:
    filler = [make_pod(f"o{i}", gpus=1, scheduler_name="default-scheduler", node_name="n1") for i in range(8)]
    s = sim(
        [
            make_node("n1", gpus=8),
            make_node("n2", gpus=8),
            *filler,
            *[make_pod(f"m{i}", gpus=1) for i in range(8)],
        ]
    )
    await s.run()
    mine = {k: v for k, v in s.placements().items() if "/m" in k}
    assert set(mine.values()) == {"n2"}


async def test_binding_error_requeues_with_backoff_then_binds() -> None:
    s = sim([make_node("n1"), make_pod("p")])
    s.binder.fail[uid_of(s, "p")] = Status.error("apiserver hiccup")
    outcomes = await s.run()
    assert s.placements()["default/p"] == "n1"
    assert [e[1] for e in s.reporter.events] == ["FailedScheduling", "Scheduled"]
    assert next(iter(outcomes.values())).attempts == 2


async def test_conflict_forgets_without_retry() -> None:
    s = sim([make_node("n1", cpu="1"), make_pod("p", cpu="1")])
    uid = uid_of(s, "p")
    s.binder.fail[uid] = Status.error("409 Conflict: already bound", requeue=False)
    await s.run()
    assert s.reporter.events == []
    assert not s.scheduler.cache.is_assumed(uid)
    assert uid not in s.scheduler.queue
    assert int(s.scheduler.cache.table.requested[0, 0]) == 0  # nothing held


class Approval:
    """A Permit plugin that parks every pod at its gate until approved (or it times out)."""

    name = "Approval"
    timeout = 0.1

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return Status.wait("needs approval"), self.timeout


def approval_registry() -> dict[str, PluginEntry]:
    plugin = Approval()
    return load_registry(
        third_party=False, extra=[PluginEntry("Approval", lambda a, h: plugin, None, Approval)]
    )


def approval_profile(name: str = "gpu-scheduler") -> dict[str, Any]:
    return {
        **DEFAULT_PROFILE_SPEC,
        "schedulerName": name,
        "plugins": {"permit": [{"name": "Coscheduling"}, {"name": "Approval"}]},
    }


async def test_permit_timeout_releases_and_requeues() -> None:
    s = sim(
        [make_node("n1", cpu="1"), make_pod("p", cpu="1")], [approval_profile()], registry=approval_registry()
    )
    await s.run()
    uid = uid_of(s, "p")
    assert s.placements()["default/p"] is None
    assert not s.scheduler.cache.is_assumed(uid)
    queued = s.scheduler.queue.get(uid)
    assert queued is not None and queued.where == "backoff"  # requeued with backoff, not lost
    assert queued.backoff_until > s.scheduler.clock()
    assert any("rejected due to timeout" in e[2] for e in s.reporter.events)


async def test_permit_gate_allowed_by_a_plugin_binds() -> None:
    s = sim([make_node("n1"), make_pod("p")], [approval_profile()], registry=approval_registry())
    uid = uid_of(s, "p")
    s.scheduler.schedule_one(s.scheduler.queue.pop_nowait())  # type: ignore[arg-type]
    gate = s.scheduler.waiting.get(uid)
    assert gate is not None and gate.pending_plugins == {"Approval"}
    gate.allow("Approval")
    await s.run()
    assert s.placements()["default/p"] == "n1"


async def test_pod_deleted_while_waiting_at_permit_releases_everything() -> None:
    s = sim(
        [make_node("n1", cpu="1"), make_pod("p", cpu="1")], [approval_profile()], registry=approval_registry()
    )
    uid = uid_of(s, "p")
    s.scheduler.schedule_one(s.scheduler.queue.pop_nowait())  # type: ignore[arg-type]
    assert s.scheduler.cache.is_assumed(uid)
    s.delete_pod(uid)
    await s.run()
    assert not s.scheduler.cache.is_assumed(uid)
    assert uid not in s.scheduler.queue
    assert int(s.scheduler.cache.table.requested[0, 0]) == 0


async def test_profile_edit_changes_next_placement() -> None:
    nodes = [make_node("busy", gpus=8), make_node("idle", gpus=8)]
    s = sim([*nodes, make_pod("seed", gpus=4, node_name="busy", scheduler_name="x")])
    s.submit(make_pod("a", gpus=1))
    await s.run()
    assert s.placements()["default/a"] == "busy"  # default profile packs GPUs
    spread = {
        **DEFAULT_PROFILE_SPEC,
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "LeastAllocated",
                        "resources": [{"name": "nvidia.com/gpu", "weight": 1}],
                    }
                },
            }
        ],
    }
    s.scheduler.set_profile(spread)
    s.submit(make_pod("b", gpus=1))
    await s.run()
    assert s.placements()["default/b"] == "idle"


async def test_malformed_inputs_never_crash_a_cycle() -> None:
    nodes = [
        make_node("bad", gpu_memory_free_gb="40Gi", gfd_labels=False, gpus=1),
        make_node("neg", gpu_memory_free_gb="-5", gfd_labels=False, gpus=1),
    ]
    pods = [
        make_pod("wants", gpus=1, gpu_memory_gb=10),
        make_pod("weird", gpu_memory_gb="abc"),
        make_pod("cpu", cpu="lots"),
    ]
    s = sim([*nodes, *pods])
    outcomes = {o.pod: o for o in (await s.run()).values()}
    assert outcomes["default/wants"].node is None
    assert "2 node(s) had an invalid gpu-memory-free-gb label" in outcomes["default/wants"].message
    assert outcomes["default/weird"].node is not None
    assert "is not a plain decimal number of GB" in outcomes["default/weird"].message
    assert outcomes["default/cpu"].node is not None  # bad quantity ignored, reported
    assert "invalid quantity" in outcomes["default/cpu"].message


async def test_absurd_request_is_reported_clearly() -> None:
    s = sim([make_node("n1"), make_pod("huge", cpu="100000", memory="1Pi")])
    (outcome,) = (await s.run()).values()
    assert outcome.message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
        " preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


async def test_unschedulable_pod_retried_when_node_added() -> None:
    s = sim([make_node("small", gpus=1), make_pod("p", gpus=4)])
    await s.run()
    assert s.placements()["default/p"] is None
    s.submit(make_node("big", gpus=8))
    await s.run(settle=0.05)
    assert s.placements()["default/p"] == "big"


async def test_node_deleted_before_bind_is_not_bound_to() -> None:
    s = sim(
        [make_node("n1"), make_node("n2"), make_pod("p")], [approval_profile()], registry=approval_registry()
    )
    uid = uid_of(s, "p")
    s.scheduler.schedule_one(s.scheduler.queue.pop_nowait())  # type: ignore[arg-type]
    node = s.scheduler.cache.assumed_node(uid)
    assert node is not None
    s.cluster.nodes.pop(node)
    s.scheduler.on_node_deleted(node)
    gate = s.scheduler.waiting.get(uid)
    assert gate is not None
    gate.allow("Approval")
    await s.run(settle=0.05)
    assert s.cluster.pods[uid]["spec"].get("nodeName") != node
    assert any(f"node {node} was deleted before the pod was bound" in e[2] for e in s.reporter.events)


class Overscore:
    """A broken Score plugin: returns a score outside 0..100 for every node."""

    name = "Overscore"

    def score(self, state: CycleState, pod: PodInfo, node: Any) -> tuple[int, Status]:
        return 1000, Status()


async def test_a_plugin_that_always_errors_is_reported_and_the_run_ends() -> None:
    registry = load_registry(
        third_party=False, extra=[PluginEntry("Overscore", lambda a, h: Overscore(), None, Overscore)]
    )
    profile = {**DEFAULT_PROFILE_SPEC, "plugins": {"score": [{"name": "Overscore"}]}}
    s = sim([make_node("n1"), make_pod("p")], [profile], registry=registry)
    outcomes = await s.run()  # returned: the pod was given up after a few attempts
    out = outcomes[uid_of(s, "p")]
    assert out.node is None and "Overscore" in out.message and "outside 0..100" in out.message
    assert 1 < out.attempts <= 8
    assert s.placements()["default/p"] is None


async def test_the_loop_survives_a_cycle_that_raises() -> None:
    s = sim([make_node("n1", cpu="4"), make_pod("a", cpu="1"), make_pod("b", cpu="1")])
    sched = s.scheduler
    real_place = sched.cycles.place
    crashed: list[str] = []

    def place_once_broken(fw: Any, state: CycleState, pod: PodInfo, **kw: Any) -> Any:
        if not crashed:
            crashed.append(pod.key)
            raise KeyError("cache bug")
        return real_place(fw, state, pod, **kw)

    sched.cycles.place = place_once_broken  # type: ignore[method-assign]
    loop = asyncio.create_task(sched.run())
    try:
        for _ in range(200):
            if all(s.placements().values()):
                break
            await asyncio.sleep(0.02)
    finally:
        loop.cancel()
    assert crashed  # the first cycle did raise
    assert all(s.placements().values())  # ...and both pods were placed anyway, one after a backoff
    failed = [e for e in s.reporter.events if e[1] == "FailedScheduling"]
    assert failed and "internal error: KeyError" in failed[0][2]


def test_a_bound_pod_relabelled_requeues_the_pods_its_labels_kept_out() -> None:
    """kube-scheduler requeues on an assigned pod's update: anti-affinity to app=x lifts when x
    becomes app=y."""
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster)
    x = sim.submit(make_pod("x", cpu="1", node_name="n1", labels={"app": "x"}))
    anti = make_pod("p", cpu="1", scheduler_name="gpu-scheduler")
    anti["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    stored = sim.submit(anti)
    asyncio.run(sim.run())
    assert not stored["spec"].get("nodeName")
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    x["metadata"]["labels"] = {"app": "y"}
    sim.scheduler.on_pod(PodInfo.from_dict(x))
    assert sim.scheduler.queue.counts()["unschedulable"] == 0
    asyncio.run(sim.run())
    assert stored["spec"]["nodeName"] == "n1"


def test_a_node_whose_images_alone_change_requeues_nothing() -> None:
    cluster = InMemoryCluster([make_node("n1", cpu="2")])
    sim = Simulation(cluster)
    sim.submit(make_pod("big", cpu="4", scheduler_name="gpu-scheduler"))
    asyncio.run(sim.run())
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    node = cluster.nodes["n1"]
    node["status"]["images"] = [{"names": ["registry.example/app:1"], "sizeBytes": 100}]
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert sim.scheduler.queue.counts()["unschedulable"] == 1  # an image pull helps no parked pod
    assert "registry.example/app:1" in sim.scheduler.cache.table.image_rows  # ImageLocality sees it
    node["status"]["allocatable"]["cpu"] = "8"
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert sim.scheduler.queue.counts()["unschedulable"] == 0


def test_a_bound_pod_resized_down_requeues_the_pods_it_crowded_out() -> None:
    """kube-scheduler requeues on UpdatePodScaleDown: once the kubelet reports a bound pod's resize
    from 6 to 2 CPUs done, a 4-CPU pod parked for Insufficient cpu fits, without waiting for the
    periodic flush."""
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster)
    held = sim.submit(make_pod("held", cpu="6", node_name="n1", labels={"app": "x"}))
    stored = sim.submit(make_pod("p", cpu="4", scheduler_name="gpu-scheduler"))
    anti = make_pod("anti", cpu="1", scheduler_name="gpu-scheduler")
    anti["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    sim.submit(anti)  # kept out by anti-affinity, which a resize does not change
    asyncio.run(sim.run())
    assert sim.scheduler.queue.counts()["unschedulable"] == 2
    held["metadata"]["annotations"] = {"seen": "yes"}  # an update that frees nothing requeues nothing
    sim.scheduler.on_pod(PodInfo.from_dict(held))
    assert sim.scheduler.queue.counts()["unschedulable"] == 2
    held["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # resize asked: still holds 6
    name = held["spec"]["containers"][0]["name"]
    six = {"name": name, "allocatedResources": {"cpu": "6"}, "resources": {"requests": {"cpu": "6"}}}
    held["status"] = {"phase": "Running", "containerStatuses": [six]}
    sim.scheduler.on_pod(PodInfo.from_dict(held))
    assert sim.scheduler.queue.counts()["unschedulable"] == 2
    two = {"name": name, "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}}
    held["status"]["containerStatuses"] = [two]  # the kubelet actuated it
    sim.scheduler.on_pod(PodInfo.from_dict(held))
    assert sim.scheduler.queue.counts()["unschedulable"] == 1  # the anti-affine pod stays parked
    asyncio.run(sim.run())
    assert stored["spec"]["nodeName"] == "n1"


def test_a_namespace_relabelled_requeues_pods_whose_affinity_selects_namespaces() -> None:
    cluster = InMemoryCluster([make_node("n1", cpu="8")])
    sim = Simulation(cluster)
    sim.submit(make_pod("x", cpu="1", node_name="n1", namespace="other", labels={"app": "x"}))
    near = make_pod("near", cpu="1", scheduler_name="gpu-scheduler")
    near["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "namespaceSelector": {"matchLabels": {"team": "b"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    stored = sim.submit(near)
    asyncio.run(sim.run())
    assert sim.scheduler.queue.counts()["unschedulable"] == 1  # no namespace is team=b yet
    sim.scheduler.on_node(NodeSpec.from_dict(cluster.nodes["n1"]))  # unchanged node: no event
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    sim.scheduler.on_namespace("other", {"team": "b"})
    assert sim.scheduler.queue.counts()["unschedulable"] == 0
    asyncio.run(sim.run())
    assert stored["spec"]["nodeName"] == "n1"
