from typing import Any

import pytest

from shoal.core.status import Code
from shoal.plugins import nodeaffinity
from shoal.testing.objects import make_node
from tests.unit.helpers import all_rows, cache_with, feasible, pod, state

NODES = [
    make_node("a1", zone="zone-a", labels={"gpu-gen": "9", "pool": "train"}),
    make_node("a2", zone="zone-a", labels={"gpu-gen": "8"}),
    make_node("b1", zone="zone-b", labels={"gpu-gen": "x", "pool": "serve"}),
]


def required(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, {"a1", "a2", "b1"}, id="nothing-asked"),
        pytest.param({"node_selector": {ZONE: "zone-a"}}, {"a1", "a2"}, id="node-selector"),
        pytest.param({"node_selector": {ZONE: "zone-z"}}, set(), id="selector-unknown-value"),
        pytest.param(
            {"affinity": required({"key": ZONE, "operator": "In", "values": ["zone-b"]})}, {"b1"}, id="in"
        ),
        pytest.param(
            {"affinity": required({"key": "pool", "operator": "NotIn", "values": ["serve"]})},
            {"a1", "a2"},
            id="notin-absent-ok",
        ),
        pytest.param(
            {"affinity": required({"key": "pool", "operator": "Exists"})}, {"a1", "b1"}, id="exists"
        ),
        pytest.param(
            {"affinity": required({"key": "pool", "operator": "DoesNotExist"})}, {"a2"}, id="does-not-exist"
        ),
        pytest.param(
            {"affinity": required({"key": "gpu-gen", "operator": "Gt", "values": ["8"]})},
            {"a1"},
            id="gt-skips-non-int",
        ),
        pytest.param(
            {"affinity": required({"key": "gpu-gen", "operator": "Lt", "values": ["9"]})}, {"a2"}, id="lt"
        ),
        pytest.param(
            {"affinity": required(fields=({"key": "metadata.name", "operator": "In", "values": ["a2"]},))},
            {"a2"},
            id="match-fields",
        ),
        pytest.param(
            {
                "node_selector": {"pool": "train"},
                "affinity": required({"key": ZONE, "operator": "In", "values": ["zone-a"]}),
            },
            {"a1"},
            id="selector-and-affinity",
        ),
    ],
)
def test_filter(kwargs: dict[str, Any], expected: set[str]) -> None:
    cache = cache_with(NODES)
    table = cache.table
    rej = nodeaffinity.NodeAffinity().filter_nodes(state(), pod(**kwargs), table, table.valid_rows())
    assert feasible(table, rej) == expected
    for r in rej:
        assert r.reason == nodeaffinity.REASON and r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_empty_term_matches_nothing() -> None:
    cache = cache_with(NODES)
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}
    }
    rej = nodeaffinity.NodeAffinity().filter_nodes(
        state(), pod(affinity=affinity), cache.table, cache.table.valid_rows()
    )
    assert feasible(cache.table, rej) == set()


def test_preferred_terms_score_and_normalise() -> None:
    cache = cache_with(NODES)
    table = cache.table
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]
                    },
                },
                {
                    "weight": 30,
                    "preference": {
                        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]
                    },
                },
            ]
        }
    }
    p = pod(affinity=affinity)
    plugin = nodeaffinity.NodeAffinity()
    assert plugin.pre_score(state(), p, all_rows(table), table).ok
    raw = plugin.score_nodes(state(), p, table, all_rows(table))
    assert raw.tolist() == [40, 10, 0]
    assert plugin.normalize_scores(state(), p, raw).tolist() == [100, 25, 0]
    assert plugin.pre_score(state(), pod(), all_rows(table), table).code is Code.SKIP


def test_label_change_is_seen() -> None:
    cache = cache_with(NODES)
    table = cache.table
    p = pod(node_selector={"pool": "serve"})
    assert feasible(
        table, nodeaffinity.NodeAffinity().filter_nodes(state(), p, table, table.valid_rows())
    ) == {"b1"}
    from shoal.core.objects import NodeSpec

    cache.set_node(NodeSpec.from_dict(make_node("a2", zone="zone-a", labels={"pool": "serve"})))
    assert feasible(
        table, nodeaffinity.NodeAffinity().filter_nodes(state(), p, table, table.valid_rows())
    ) == {"a2", "b1"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # kube-scheduler cannot parse these requirements, so their term matches no node
        pytest.param(
            {"key": "pool", "operator": "NotIn", "values": ["not a label value!"]}, set(), id="bad-value"
        ),
        pytest.param({"key": "bad key", "operator": "DoesNotExist"}, set(), id="bad-key"),
        pytest.param({"key": "pool", "operator": "In", "values": []}, set(), id="in-without-values"),
        pytest.param({"key": "pool", "operator": "Exists", "values": ["x"]}, set(), id="exists-with-values"),
        pytest.param({"key": "gpu-gen", "operator": "Gt", "values": ["7", "8"]}, set(), id="gt-two-values"),
        pytest.param({"key": "gpu-gen", "operator": "Gt", "values": ["x"]}, set(), id="gt-not-integer"),
        pytest.param(
            {"key": "pool", "operator": "Equals", "values": ["train"]}, set(), id="unknown-operator"
        ),
        pytest.param(
            {"key": "gpu-gen", "operator": "Gt", "values": ["+7"]}, set(), id="gt-sign-is-no-label-value"
        ),
        pytest.param(
            {"key": "gpu-gen", "operator": "Gt", "values": ["07"]}, {"a1", "a2"}, id="gt-leading-zero"
        ),
    ],
)
def test_unparsable_requirement_matches_nothing(expression: dict[str, Any], expected: set[str]) -> None:
    cache = cache_with(NODES)
    table = cache.table
    p = pod(affinity=required(expression))
    rej = nodeaffinity.NodeAffinity().filter_nodes(state(), p, table, table.valid_rows())
    assert feasible(table, rej) == expected
    # the per-node form agrees with the vectorised one
    assert p.required_terms is not None
    per_node = {
        n for n in table.index if p.required_terms[0].matches(n, table.node_info(table.index[n]).labels)
    }
    assert per_node == expected


def test_match_fields_need_exactly_one_value() -> None:
    cache = cache_with(NODES)
    table = cache.table
    two = required(fields=({"key": "metadata.name", "operator": "In", "values": ["a1", "a2"]},))
    rej = nodeaffinity.NodeAffinity().filter_nodes(state(), pod(affinity=two), table, table.valid_rows())
    assert feasible(table, rej) == set()
    not_in = required(fields=({"key": "metadata.name", "operator": "NotIn", "values": ["a1"]},))
    rej = nodeaffinity.NodeAffinity().filter_nodes(state(), pod(affinity=not_in), table, table.valid_rows())
    assert feasible(table, rej) == {"a2", "b1"}


def test_conflicting_node_names_fail_pre_filter() -> None:
    affinity = required(
        fields=(
            {"key": "metadata.name", "operator": "In", "values": ["a1"]},
            {"key": "metadata.name", "operator": "In", "values": ["a2"]},
        )
    )
    _, status = nodeaffinity.NodeAffinity().pre_filter(state(), pod(affinity=affinity))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("pod affinity terms conflict",)


def test_unparsable_preferred_term_is_a_pre_score_error() -> None:
    cache = cache_with(NODES)
    table = cache.table
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}}
            ]
        }
    }
    status = nodeaffinity.NodeAffinity().pre_score(state(), pod(affinity=affinity), all_rows(table), table)
    assert status.code is Code.ERROR
    assert "bad key" in status.message
