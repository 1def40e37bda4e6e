"""NetworkLatency: a pod goes close, by network cost, to the pods it talks to and to its gang."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import SelectorError, parse_equality_selector
from shoal.plugins import networklatency
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

JSON = dict[str, Any]


def fleet() -> list[JSON]:
    nodes = [make_node(f"ra-{i}", gpus=8, zone="za", rack="ra") for i in range(3)]
    nodes += [make_node(f"rb-{i}", gpus=8, zone="za", rack="rb") for i in range(3)]
    nodes += [make_node(f"rc-{i}", gpus=8, zone="zb", rack="rc") for i in range(3)]
    return nodes


def talker(name: str, talks_to: str) -> JSON:
    pod = make_pod(name, gpus=8)
    pod["metadata"]["annotations"] = {"shoal.dev/talks-to": talks_to}
    return pod


@pytest.mark.parametrize(
    ("text", "labels", "match"),
    [
        ("app=ps", {"app": "ps"}, True),
        ("app==ps, role=db", {"app": "ps", "role": "db"}, True),
        ("app=ps,role=db", {"app": "ps"}, False),
        ("gpu", {"gpu": "x"}, True),
    ],
)
def test_talks_to_is_equality_terms(text: str, labels: dict[str, str], match: bool) -> None:
    assert parse_equality_selector(text).matches(labels) is match


@pytest.mark.parametrize("bad", ["", "app=", " , ", "bad key!=x"])
def test_malformed_talks_to_is_refused(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_equality_selector(bad)


async def test_pod_lands_next_to_the_pods_it_talks_to() -> None:
    ps = make_pod("ps", gpus=8, labels={"app": "ps"})
    ps["spec"]["nodeName"] = "rc-1"  # bound elsewhere: a full node in rack rc
    s = Simulation(InMemoryCluster([*fleet(), ps, talker("worker", "app=ps")]), [])
    await s.run()
    assert s.placements()["default/worker"] in {"rc-0", "rc-2"}  # same rack: cost 4, not 16 or 32
    scores = s.last_scores[next(u for u, p in s.cluster.pods.items() if p["metadata"]["name"] == "worker")]
    assert scores[0][2]["NetworkLatency"] == 100


async def test_selector_in_args_applies_to_every_pod() -> None:
    profile = copy.deepcopy(DEFAULT_PROFILE_SPEC)
    profile["pluginConfig"] = [
        *profile["pluginConfig"],
        {"name": "NetworkLatency", "args": {"peerSelector": {"matchLabels": {"app": "ps"}}}},
    ]
    ps = make_pod("ps", gpus=8, labels={"app": "ps"})
    ps["spec"]["nodeName"] = "rb-0"
    s = Simulation(InMemoryCluster([*fleet(), ps, make_pod("worker", gpus=8)]), [profile])
    await s.run()
    assert s.placements()["default/worker"] in {"rb-1", "rb-2"}


async def test_malformed_annotation_is_ignored_and_said() -> None:
    s = Simulation(InMemoryCluster([*fleet(), talker("worker", "app=")]), [])
    outcomes = await s.run()
    (outcome,) = outcomes.values()
    assert outcome.node is not None
    assert "ignored: annotation shoal.dev/talks-to: 'app=' is not key=value or key" in outcome.message


async def test_profile_without_the_plugin_at_score_refuses_a_talking_pod() -> None:
    profile = copy.deepcopy(DEFAULT_PROFILE_SPEC)
    profile["plugins"] = {"score": [{"name": "NodeResourcesFit", "weight": 1}]}
    s = Simulation(InMemoryCluster([*fleet(), talker("worker", "app=ps")]), [profile])
    outcomes = await s.run()
    (outcome,) = outcomes.values()
    assert outcome.node is None
    assert "metadata.annotations[shoal.dev/talks-to]" in outcome.message
    assert "NetworkLatency at score" in outcome.message


def test_no_peer_placed_is_a_skip_and_equal_costs_score_zero() -> None:
    s = Simulation(InMemoryCluster(fleet()), [])
    plugin = networklatency.new(networklatency.Args(), s.scheduler.handle)
    pod = PodInfo.from_dict(talker("w", "app=ps"))
    rows = np.arange(s.scheduler.cache.table.size)
    assert plugin.pre_score(CycleState(), pod, rows, s.scheduler.cache.table).code.name == "SKIP"
    assert networklatency.closeness(np.array([3.0, 3.0])).tolist() == [0, 0]
    assert networklatency.closeness(np.array([4.0, 16.0, 10.0])).tolist() == [100, 0, 50]
