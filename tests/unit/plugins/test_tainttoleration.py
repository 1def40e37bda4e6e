import pytest

from shoal.core.state.objects import Taint, Toleration
from shoal.core.state.status import Code
from shoal.plugins import tainttoleration
from shoal.testing.objects import make_node
from tests.unit.helpers import all_rows, cache_with, feasible, pod, rejected_names, state

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param((), {"plain", "soft"}, id="no-toleration"),
        pytest.param(
            ({"key": "nvidia.com/gpu", "operator": "Exists"},), {"plain", "soft", "gpu"}, id="exists"
        ),
        pytest.param(({"key": "nvidia.com/gpu", "value": "present"},), {"plain", "soft", "gpu"}, id="equal"),
        pytest.param(({"key": "nvidia.com/gpu", "value": "absent"},), {"plain", "soft"}, id="wrong-value"),
        pytest.param(
            ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},),
            {"plain", "soft"},
            id="wrong-effect",
        ),
        pytest.param(({"operator": "Exists"},), {"plain", "soft", "gpu"}, id="wildcard"),
    ],
)
def test_filter(tolerations: tuple[dict[str, str], ...], expected: set[str]) -> None:
    cache = cache_with(
        [
            make_node("plain"),
            make_node("gpu", taints=[GPU_TAINT]),
            make_node("soft", taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]),
        ]
    )
    table = cache.table
    rej = tainttoleration.TaintToleration().filter_nodes(
        state(), pod(tolerations=tolerations), table, table.valid_rows()
    )
    assert feasible(table, rej) == expected
    if "gpu" not in expected:
        assert rejected_names(table, rej) == {"node(s) had untolerated taint(s)": {"gpu"}}
        assert all(r.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in rej)


def test_score_prefers_fewer_prefer_no_schedule_taints() -> None:
    soft = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}
    cache = cache_with([make_node("clean"), make_node("soft", taints=[soft])])
    table = cache.table
    plugin = tainttoleration.TaintToleration()
    p = pod()
    raw = plugin.score_nodes(state(), p, table, all_rows(table))
    norm = plugin.normalize_scores(state(), p, raw)
    assert dict(zip(["clean", "soft"], norm.tolist(), strict=True)) == {"clean": 100, "soft": 0}
    tolerant = pod(tolerations=({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},))
    assert plugin.normalize_scores(
        state(), tolerant, plugin.score_nodes(state(), tolerant, table, all_rows(table))
    ).tolist() == [100, 100]


def test_first_untolerated_helper() -> None:
    taints = [Taint("a", "1", "PreferNoSchedule"), Taint("b", "2", "NoExecute")]
    assert tainttoleration.first_untolerated(taints, []) == Taint("b", "2", "NoExecute")
    assert tainttoleration.first_untolerated(taints, [Toleration("b", "Exists")]) is None


def test_many_nodes_share_one_taint_set() -> None:
    nodes = [make_node(f"n{i}", taints=[GPU_TAINT] if i % 2 else []) for i in range(100)]
    cache = cache_with(nodes)
    assert len(cache.table.taint_sets) == 2
    rej = tainttoleration.TaintToleration().filter_nodes(
        state(), pod(), cache.table, cache.table.valid_rows()
    )
    assert len(feasible(cache.table, rej)) == 50


def test_nodes_with_different_taints_share_one_reason() -> None:
    # 1.37 names no taint in the reason, so every tainted node counts under one reason
    cache = cache_with(
        [
            make_node("gpu", taints=[GPU_TAINT]),
            make_node("infra", taints=[{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
            make_node("plain"),
        ]
    )
    table = cache.table
    rej = tainttoleration.TaintToleration().filter_nodes(state(), pod(), table, table.valid_rows())
    assert rejected_names(table, rej) == {tainttoleration.REASON: {"gpu", "infra"}}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        pytest.param(Toleration("k", "Equal", "v"), True, id="equal"),
        pytest.param(Toleration("k", "", "v"), True, id="empty-operator-is-equal"),
        pytest.param(Toleration("k", "Exists"), True, id="exists"),
        pytest.param(Toleration("", "Exists"), True, id="empty-key-exists-matches-all"),
        # the API forbids an empty key without Exists, but ToleratesTaint itself matches every key
        pytest.param(Toleration("", "Equal", "v"), True, id="empty-key-equal-compares-value"),
        pytest.param(Toleration("k", "Equal", "v", "NoExecute"), False, id="other-effect"),
        # unknown operators tolerate nothing; Gt/Lt too while their alpha gate is off (1.37 default)
        pytest.param(Toleration("k", "Gt", "v"), False, id="gt-gate-off"),
        pytest.param(Toleration("k", "Lt", "v"), False, id="lt-gate-off"),
        pytest.param(Toleration("k", "Equals", "v"), False, id="unknown-operator-is-not-equal"),
    ],
)
def test_toleration_semantics(toleration: Toleration, tolerated: bool) -> None:
    assert toleration.tolerates(Taint("k", "v", "NoSchedule")) is tolerated
