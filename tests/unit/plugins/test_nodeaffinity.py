from typing import Any

import pytest

from shoal.core.state.status import Code
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
    from shoal.core.state.objects import NodeSpec

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


# -- addedAffinity (NodeAffinityArgs) --------------------------------------------------------------
POOL_TRAIN = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train", "serve"]}]}


def added(**affinity: Any) -> nodeaffinity.NodeAffinity:
    return nodeaffinity.NodeAffinity(nodeaffinity.ENTRY.parse_args({"addedAffinity": affinity}))


def test_added_required_affinity_is_checked_first_and_named() -> None:
    """A profile that keeps its pods on labelled pools: a node outside them is refused with the
    scheduler's own reason, whatever the pod asks; the pod's own terms then narrow further."""
    cache = cache_with(NODES)
    table = cache.table
    plugin = added(requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [POOL_TRAIN]})
    plain = pod()
    assert plugin.pre_filter(state(), plain)[1].ok  # no longer skipped: the profile asks
    rej = plugin.filter_nodes(state(), plain, table, table.valid_rows())
    assert feasible(table, rej) == {"a1", "b1"}
    assert [(r.reason, r.code) for r in rej] == [
        (nodeaffinity.REASON_ENFORCED, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    ]
    zone_a = pod(node_selector={ZONE: "zone-a"})
    by_reason = {
        r.reason: {table.names[i] for i in r.mask.nonzero()[0]}
        for r in plugin.filter_nodes(state(), zone_a, table, table.valid_rows())
    }
    assert by_reason == {nodeaffinity.REASON_ENFORCED: {"a2"}, nodeaffinity.REASON: {"b1"}}


def test_added_preferred_affinity_scores_every_pod() -> None:
    cache = cache_with(NODES)
    table = cache.table
    plugin = added(preferredDuringSchedulingIgnoredDuringExecution=[{"weight": 5, "preference": POOL_TRAIN}])
    plain = pod()
    assert plugin.pre_score(state(), plain, all_rows(table), table).ok
    assert plugin.score_nodes(state(), plain, table, all_rows(table)).tolist() == [5, 0, 5]
    assert plugin.pre_filter(state(), plain)[1].is_skip  # nothing required: Filter has nothing to do


@pytest.mark.parametrize(
    ("affinity", "message"),
    [
        pytest.param(  # upstream's TestValidateNodeAffinityArgs "invalid added affinity" (its first error)
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "invalid/label/key", "operator": "In", "values": ["v"]}
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}
                            ]
                        },
                    }
                ],
            },
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: 'invalid/label/key'",
            id="invalid-key",
        ),
        pytest.param(
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}
                            ]
                        },
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution[0].preference:",
            id="match-fields-two-values",
        ),
        pytest.param(
            {"requiredDuringSchedulingRequiredDuringExecution": {}}, "unknown field(s)", id="unknown"
        ),
        # shapes no API server checked (args are free-form in the CRD): refused, never a crash
        pytest.param(
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["x"]}},
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: not a node selector term",
            id="term-not-a-mapping",
        ),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": "x"}]
                }
            },
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions: not a list",
            id="expressions-not-a-list",
        ),
        pytest.param(
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": "x"}]},
            "preferredDuringSchedulingIgnoredDuringExecution[0].preference: not a node selector term",
            id="preference-not-a-mapping",
        ),
        pytest.param(
            {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1}},
            "preferredDuringSchedulingIgnoredDuringExecution: not a list",
            id="preferred-not-a-list",
        ),
        pytest.param(
            {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": "high", "preference": POOL_TRAIN}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution[0].weight: an int32",
            id="weight",
        ),
    ],
)
def test_added_affinity_kube_scheduler_would_refuse_refuses_the_profile(
    affinity: dict[str, Any], message: str
) -> None:
    from shoal.core.framework.profile import ProfileError, validate_profile
    from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry

    spec = {
        "schedulerName": "s",
        "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": affinity}}],
    }
    with pytest.raises(ProfileError) as err:
        validate_profile(spec, load_registry(), DEFAULT_PLUGINS)
    assert "spec.pluginConfig[0].args.addedAffinity: " + message in str(err.value), str(err.value)


def test_a_weight_zero_added_preference_is_left_out_unread() -> None:
    """As upstream's NewPreferredSchedulingTerms: a term of weight 0 (or an empty one) is skipped
    before it is parsed, so even an unparsable one does not refuse the profile."""
    bad = {"matchExpressions": [{"key": "invalid/label/key", "operator": "In", "values": ["v"]}]}
    plugin = added(
        preferredDuringSchedulingIgnoredDuringExecution=[
            {"weight": 0, "preference": bad},
            {"weight": 4, "preference": {}},
            {"weight": 2, "preference": POOL_TRAIN},
        ]
    )
    assert [w for w, _ in plugin.added_preferred] == [2]
