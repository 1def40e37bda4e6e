"""NodeDeclaredFeatures: what a pod's spec needs, what a node declares, and the events between."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.core.state.declaredfeatures import (
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
    declared_features,
    inferred_features,
)
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Code
from shoal.plugins import nodedeclaredfeatures
from shoal.plugins.nodedeclaredfeatures import REASON, STATE_KEY, NodeDeclaredFeatures
from shoal.plugins.registry import DEFAULT_PLUGINS_SPEC
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import KUBELET_1_37_DECLARED_FEATURES, make_node, make_pod
from tests.unit.helpers import cache_with, feasible, refusal, state

JSON = dict[str, Any]

#: as the API server accepts it: a container-level restartPolicy, then the rule
RESTART_ALL_RULE = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}


def restart_all(pod: JSON, kind: str = "containers") -> JSON:
    container: JSON = {"name": "c", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Never"}
    container["restartPolicyRules"] = [RESTART_ALL_RULE]
    if kind == "containers":
        pod["spec"]["containers"][0].update(container, name="main")
    else:
        pod["spec"].setdefault(kind, []).append(container)
    return pod


def userns_host_network(pod: JSON) -> JSON:
    pod["spec"].update(hostNetwork=True, hostUsers=False)
    return pod


def bind_mount_options(pod: JSON, kind: str = "containers") -> JSON:
    mount = {"name": "data", "mountPath": "/data", "bindMountOptions": ["noexec", "nosuid"]}
    pod["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    if kind == "containers":
        pod["spec"]["containers"][0]["volumeMounts"] = [mount]
    else:
        pod["spec"][kind] = [{"name": "x", "image": "registry.k8s.io/pause:3.10", "volumeMounts": [mount]}]
    return pod


def needs(obj: JSON) -> frozenset[str]:
    return PodInfo.from_dict(obj).required_features


# -- what a pod needs -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "expected"),
    [
        pytest.param(lambda p: p, set(), id="plain-pod"),
        pytest.param(restart_all, {RESTART_ALL_CONTAINERS}, id="restart-all-container"),
        pytest.param(
            lambda p: restart_all(p, "initContainers"), {RESTART_ALL_CONTAINERS}, id="restart-all-init"
        ),
        # upstream does not look at ephemeral containers for restart rules
        pytest.param(lambda p: restart_all(p, "ephemeralContainers"), set(), id="restart-all-ephemeral"),
        pytest.param(userns_host_network, {USER_NAMESPACES_HOST_NETWORK}, id="userns-host-network"),
        pytest.param(bind_mount_options, {VOLUME_BIND_MOUNT_OPTIONS}, id="bind-mount-options"),
        pytest.param(
            lambda p: bind_mount_options(p, "initContainers"), {VOLUME_BIND_MOUNT_OPTIONS}, id="bind-init"
        ),
        pytest.param(
            lambda p: bind_mount_options(p, "ephemeralContainers"),
            {VOLUME_BIND_MOUNT_OPTIONS},
            id="bind-ephemeral",
        ),
        pytest.param(
            lambda p: bind_mount_options(userns_host_network(restart_all(p))),
            {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS},
            id="all-three",
        ),
    ],
)
def test_inferred_from_the_spec(build: Any, expected: set[str]) -> None:
    assert needs(build(make_pod("p"))) == expected


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"hostNetwork": True}, id="host-network-alone"),
        pytest.param({"hostNetwork": True, "hostUsers": True}, id="host-users-true"),
        pytest.param({"hostNetwork": False, "hostUsers": False}, id="userns-without-host-network"),
        pytest.param({"hostUsers": False}, id="userns-alone"),
        pytest.param(
            {
                "containers": [
                    {"name": "c", "restartPolicy": "Never", "restartPolicyRules": [{"action": "Restart"}]}
                ]
            },
            id="restart-action-is-not-restart-all",
        ),
        pytest.param(
            {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "bindMountOptions": []}]}]},
            id="empty-bind-mount-options",
        ),
    ],
)
def test_needs_nothing(spec: JSON) -> None:
    assert inferred_features(spec) == {}


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            {"containers": [{"restartPolicyRules": {"action": "RestartAllContainers"}}]}, id="rules-map"
        ),
        pytest.param({"containers": [{"restartPolicyRules": ["RestartAllContainers"]}]}, id="rules-strings"),
        pytest.param({"initContainers": [{"restartPolicyRules": "RestartAllContainers"}]}, id="rules-string"),
        pytest.param({"hostNetwork": "true", "hostUsers": "false"}, id="booleans-as-strings"),
        pytest.param({"hostNetwork": 1, "hostUsers": 0}, id="booleans-as-numbers"),
        pytest.param({"containers": [{"volumeMounts": {"bindMountOptions": ["noexec"]}}]}, id="mounts-map"),
        pytest.param({"containers": [{"volumeMounts": ["data"]}]}, id="mounts-strings"),
        pytest.param(
            {"containers": [{"volumeMounts": [{"bindMountOptions": "noexec"}]}]}, id="options-string"
        ),
    ],
)
def test_malformed_pod_fields_need_nothing_and_never_raise(spec: JSON) -> None:
    assert inferred_features(spec) == {}
    info = PodInfo.from_dict({"metadata": {"name": "p"}, "spec": spec})
    assert info.required_features == frozenset()


@pytest.mark.parametrize(
    "containers", [pytest.param("main", id="not-a-list"), pytest.param(["main", None, 3], id="not-objects")]
)
def test_malformed_container_lists_need_nothing(containers: Any) -> None:
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        assert inferred_features({kind: containers}) == {}


def test_the_fields_that_need_a_feature_are_named() -> None:
    """For messages (the fidelity guard): the first field found for each feature."""
    obj = bind_mount_options(userns_host_network(restart_all(make_pod("p"), "initContainers")))
    assert inferred_features(obj["spec"]) == {
        RESTART_ALL_CONTAINERS: "spec.initContainers[0].restartPolicyRules",
        USER_NAMESPACES_HOST_NETWORK: "spec.hostUsers",
        VOLUME_BIND_MOUNT_OPTIONS: "spec.containers[0].volumeMounts[0].bindMountOptions",
    }


# -- what a node declares ---------------------------------------------------------------------------
def test_a_kubelet_node_declares_its_features_as_a_set() -> None:
    obj = make_node("n", declared_features=KUBELET_1_37_DECLARED_FEATURES)
    assert obj["status"]["declaredFeatures"] == sorted(KUBELET_1_37_DECLARED_FEATURES)
    assert NodeSpec.from_dict(obj).declared_features == frozenset(KUBELET_1_37_DECLARED_FEATURES)
    assert NodeSpec.from_dict(make_node("old")).declared_features == frozenset()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, set(), id="absent"),
        pytest.param("RestartAllContainersOnContainerExits", set(), id="a-string"),
        pytest.param({"RestartAllContainersOnContainerExits": True}, set(), id="a-map"),
        pytest.param(
            [RESTART_ALL_CONTAINERS, 7, None, ["x"]], {RESTART_ALL_CONTAINERS}, id="non-strings-dropped"
        ),
        pytest.param([VOLUME_BIND_MOUNT_OPTIONS, RESTART_ALL_CONTAINERS], None, id="unsorted"),
        pytest.param(
            [RESTART_ALL_CONTAINERS, RESTART_ALL_CONTAINERS], {RESTART_ALL_CONTAINERS}, id="repeated"
        ),
    ],
)
def test_malformed_declared_features_never_raise(value: Any, expected: set[str] | None) -> None:
    node = make_node("n")
    node["status"]["declaredFeatures"] = value
    got = NodeSpec.from_dict(node).declared_features
    assert set(got) == (set(value) if expected is None else expected)
    assert got == declared_features(value)


# -- PreFilter and Filter ---------------------------------------------------------------------------
NODES = [
    make_node("kubelet", declared_features=KUBELET_1_37_DECLARED_FEATURES),
    make_node("none"),
    make_node(
        "all",
        declared_features=(
            *KUBELET_1_37_DECLARED_FEATURES,
            USER_NAMESPACES_HOST_NETWORK,
            VOLUME_BIND_MOUNT_OPTIONS,
            "SomeFeatureOfALaterRelease",  # unknown names are ignored
        ),
    ),
    make_node(
        "lowercase", declared_features=[RESTART_ALL_CONTAINERS.lower(), "userNamespacesHostNetworkSupport"]
    ),
    make_node("userns", declared_features=[USER_NAMESPACES_HOST_NETWORK]),
]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        pytest.param(restart_all, {"kubelet", "all"}, id="one-feature"),
        pytest.param(userns_host_network, {"all", "userns"}, id="another-feature"),
        pytest.param(lambda p: userns_host_network(restart_all(p)), {"all"}, id="two-features-subset"),
        pytest.param(lambda p: bind_mount_options(userns_host_network(restart_all(p))), {"all"}, id="three"),
    ],
)
def test_filter_keeps_the_nodes_that_declare_every_feature(build: Any, expected: set[str]) -> None:
    table = cache_with(NODES).table
    plugin, st = NodeDeclaredFeatures(), state()
    pod = PodInfo.from_dict(build(make_pod("p")))
    _, status = plugin.pre_filter(st, pod)
    assert status.ok
    assert st.read(STATE_KEY) == pod.required_features
    rejections = plugin.filter_nodes(st, pod, table, table.valid_rows().copy())
    assert feasible(table, rejections) == expected
    for rej in rejections:
        assert rej.reason == "node(s) didn't match Pod's required features"
        assert rej.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_filter_looks_only_at_the_candidates() -> None:
    table = cache_with(NODES).table
    plugin, st = NodeDeclaredFeatures(), state()
    pod = PodInfo.from_dict(restart_all(make_pod("p")))
    plugin.pre_filter(st, pod)
    candidates = table.valid_rows().copy()
    candidates[table.index["none"]] = False  # rejected by an earlier Filter
    (rej,) = plugin.filter_nodes(st, pod, table, candidates)
    assert not rej.mask[table.index["none"]]
    assert rej.mask[table.index["lowercase"]]


def test_a_pod_that_needs_nothing_skips_the_plugin() -> None:
    st = state()
    _, status = NodeDeclaredFeatures().pre_filter(st, PodInfo.from_dict(make_pod("p")))
    assert status.is_skip
    assert STATE_KEY not in st


def test_filter_without_pre_filter_is_an_error() -> None:
    """As upstream's getPreFilterState: the runtime turns the raise into an Error status."""
    table = cache_with(NODES).table
    pod = PodInfo.from_dict(restart_all(make_pod("p")))
    with pytest.raises(LookupError):
        NodeDeclaredFeatures().filter_nodes(state(), pod, table, table.valid_rows().copy())


# -- the profile -------------------------------------------------------------------------------------
def test_in_the_default_profile_last_at_pre_filter_and_filter() -> None:
    assert DEFAULT_PLUGINS_SPEC["preFilter"][-1] == {"name": "NodeDeclaredFeatures"}
    assert DEFAULT_PLUGINS_SPEC["filter"][-1] == {"name": "NodeDeclaredFeatures"}
    assert all(ref["name"] != "NodeDeclaredFeatures" for ref in DEFAULT_PLUGINS_SPEC["score"])


def test_a_profile_without_it_refuses_the_pods_that_need_a_feature() -> None:
    """The fidelity guard: placed as if its needs did not exist, the kubelet would reject it."""
    pod = PodInfo.from_dict(userns_host_network(make_pod("p")))
    without = {"filter": ["NodeUnschedulable", "NodeResourcesFit"]}
    status = refusal(pod.fields_used, without)
    assert status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "spec.hostUsers" in status.message and "NodeDeclaredFeatures at filter" in status.message
    assert refusal(pod.fields_used, {"filter": [*without["filter"], "NodeDeclaredFeatures"]}) is None
    assert PodInfo.from_dict(make_pod("q")).fields_used == ()


# -- events ------------------------------------------------------------------------------------------
def test_hint_asks_whether_the_node_now_declares_what_the_pod_needs() -> None:
    hint = nodedeclaredfeatures.declares_what_it_needs
    (reg,) = NodeDeclaredFeatures().events_to_register()
    assert reg.kind == EventKind.NODE_ADD | EventKind.NODE_UPDATE and reg.hint is hint
    pod = PodInfo.from_dict(userns_host_network(restart_all(make_pod("p"))))
    node = NodeSpec.from_dict(make_node("n", declared_features=KUBELET_1_37_DECLARED_FEATURES))
    assert not hint(pod, ClusterEvent(EventKind.NODE_ADD, node))
    upgraded = make_node(
        "n", declared_features=(*KUBELET_1_37_DECLARED_FEATURES, USER_NAMESPACES_HOST_NETWORK)
    )
    assert hint(pod, ClusterEvent(EventKind.NODE_UPDATE, NodeSpec.from_dict(upgraded)))


def test_a_node_that_comes_to_declare_the_feature_takes_the_parked_pod() -> None:
    """upstream's TestEnqueueExtensionsNodeUpdate, through shoal's informer path: an unchanged node
    raises no event; declaredFeatures changing does, and the parked pod is retried and bound."""
    cluster = InMemoryCluster([make_node("n1")])  # an old kubelet: no declaredFeatures
    sim = Simulation(cluster)
    stored = sim.submit(restart_all(make_pod("p")))
    asyncio.run(sim.run())
    assert not stored["spec"].get("nodeName")
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    node = cluster.nodes["n1"]
    sim.scheduler.on_node(NodeSpec.from_dict(copy.deepcopy(node)))  # features unchanged
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    node["status"]["declaredFeatures"] = [USER_NAMESPACES_HOST_NETWORK]  # changed, still lacking
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert sim.scheduler.queue.counts()["unschedulable"] == 1
    node["status"]["declaredFeatures"] = sorted(KUBELET_1_37_DECLARED_FEATURES)  # the kubelet upgraded
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert sim.scheduler.queue.counts()["unschedulable"] == 0
    asyncio.run(sim.run())
    assert stored["spec"]["nodeName"] == "n1"


def test_a_node_whose_declared_features_change_raises_a_node_update(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = InMemoryCluster([make_node("n1", declared_features=[RESTART_ALL_CONTAINERS])])
    sim = Simulation(cluster)
    seen: list[EventKind] = []
    on_event = sim.scheduler.queue.on_event

    def record(event: ClusterEvent) -> int:
        seen.append(event.kind)
        return on_event(event)

    monkeypatch.setattr(sim.scheduler.queue, "on_event", record)
    node = cluster.nodes["n1"]
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert seen == []
    node["status"]["declaredFeatures"] = [RESTART_ALL_CONTAINERS, RESTART_ALL_CONTAINERS]  # the same set
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert seen == []
    node["status"]["declaredFeatures"] = sorted([RESTART_ALL_CONTAINERS, VOLUME_BIND_MOUNT_OPTIONS])
    sim.scheduler.on_node(NodeSpec.from_dict(node))
    assert seen == [EventKind.NODE_UPDATE]


def test_the_failure_reads_as_kube_scheduler_s() -> None:
    cluster = InMemoryCluster(
        [make_node("n1"), make_node("n2", declared_features=[USER_NAMESPACES_HOST_NETWORK])]
    )
    sim = Simulation(cluster)
    sim.submit(restart_all(make_pod("p")))
    outcomes = asyncio.run(sim.run())
    (outcome,) = outcomes.values()
    assert outcome.node is None
    assert outcome.message.startswith(f"0/2 nodes are available: 2 {REASON}.")
