"""VolumeBinding's PreScore/Score (kube-scheduler 1.37's StorageCapacityScoring, beta and on by
default): nodes whose matching PVs leave the most room win with the default shape, classes are
averaged, a pod without a static match is skipped, and ``shape`` is validated as upstream."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.scoring import class_mean_scores, shape_points
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code
from shoal.plugins.registry import DEFAULT_SCHEDULER_NAME
from shoal.plugins.volumebinding import plugin as volumebinding
from shoal.plugins.volumebinding.objects import decode_storage
from shoal.plugins.volumebinding.store import VolumeStore
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import all_rows, cache_with, handle_for, scores_by_name
from tests.unit.plugins.volumebinding.test_volumebinding import claim, local_pv, node, storage_class, trainer

LOCAL = storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
FAST = storage_class("fast", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
DYNAMIC = storage_class("dynamic", "WaitForFirstConsumer", "csi.example.com")


def pv_of(cls: str, name: str, on: str, size: str) -> dict[str, Any]:
    pv = local_pv(name, on, size)
    pv["spec"]["storageClassName"] = cls
    return pv


def scored(
    objs: list[dict[str, Any]], pod: dict[str, Any], nodes: list[str], **args: Any
) -> tuple[Code, dict[str, int]]:
    """PreFilter, Filter, PreScore and (unless skipped) Score over every node."""
    cache = cache_with([node(n) for n in nodes])
    for obj in objs:
        cache.store(VolumeStore).apply(decode_storage(obj))
    plug = volumebinding.VolumeBinding(volumebinding.Args.model_validate(args), handle_for(cache))
    info = PodInfo.from_dict(pod)
    state = CycleState()
    _, status = plug.pre_filter(state, info)
    table = cache.table
    rows = all_rows(table)
    if status.ok:
        plug.filter_nodes(state, info, table, table.valid_rows().copy())
    elif not status.is_skip:
        raise AssertionError(status)
    pre = plug.pre_score(state, info, rows, table)
    return pre.code, scores_by_name(table, plug.score_nodes(state, info, table, rows))


def test_the_pv_that_leaves_most_room_scores_higher() -> None:
    objs = [
        LOCAL,
        claim("data", size="10Gi"),
        local_pv("pv-1", "n1", "20Gi"),
        local_pv("pv-2", "n2", "100Gi"),
    ]
    code, scores = scored(objs, trainer("t", "data"), ["n1", "n2", "n3"])
    assert code is Code.SUCCESS
    # 10 of 20 Gi used: 50 % -> 50; 10 of 100 Gi: 10 % -> 90; no PV on n3 (filtered out): 0
    assert scores == {"n1": 50, "n2": 90, "n3": 0}


def test_two_classes_are_averaged_and_rounded_half_up() -> None:
    objs = [
        LOCAL,
        FAST,
        claim("a", size="50Gi"),
        claim("b", cls="fast", size="100Gi"),
        local_pv("pv-a1", "n1", "200Gi"),
        pv_of("fast", "pv-b1", "n1", "200Gi"),
        local_pv("pv-a2", "n2", "100Gi"),
        pv_of("fast", "pv-b2", "n2", "100Gi"),
    ]
    code, scores = scored(objs, trainer("t", "a", "b"), ["n1", "n2"])
    assert code is Code.SUCCESS
    # n1: local 25 % -> 75, fast 50 % -> 50: 62.5 -> 63; n2: 50, 0 -> 25
    assert scores == {"n1": 63, "n2": 25}


def test_claims_of_one_class_are_summed() -> None:
    objs = [
        LOCAL,
        claim("a", size="10Gi"),
        claim("b", size="30Gi"),
        local_pv("pv-1", "n1", "10Gi"),
        local_pv("pv-2", "n1", "90Gi"),
    ]
    code, scores = scored(objs, trainer("t", "a", "b"), ["n1"])
    assert code is Code.SUCCESS
    assert scores == {"n1": 60}  # 40 of 100 Gi


def test_a_custom_shape() -> None:
    objs = [
        LOCAL,
        claim("data", size="10Gi"),
        local_pv("pv-1", "n1", "20Gi"),
        local_pv("pv-2", "n2", "100Gi"),
    ]
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]  # pack: fullest PV wins
    code, scores = scored(objs, trainer("t", "data"), ["n1", "n2"], shape=shape)
    assert code is Code.SUCCESS
    assert scores == {"n1": 50, "n2": 10}


def test_no_capacity_or_a_short_one_is_full() -> None:
    objs = [LOCAL, claim("data", size="10Gi"), local_pv("pv-1", "n1", "20Gi")]
    del objs[2]["spec"]["capacity"]
    objs[1]["spec"]["resources"] = {}  # no request: 0 fits a PV without capacity
    code, scores = scored(objs, trainer("t", "data"), ["n1"])
    assert (code, scores) == (Code.SUCCESS, {"n1": 0})


@pytest.mark.parametrize(
    ("objs", "pod"),
    [
        pytest.param([], make_pod("t"), id="no-claims"),
        pytest.param(
            [
                LOCAL,
                {
                    **claim("data", **{"pv.kubernetes.io/bind-completed": "yes"}),
                    "spec": {"storageClassName": "local", "volumeName": "pv-1"},
                },
                local_pv("pv-1", "n1"),
            ],
            trainer("t", "data"),
            id="all-bound",
        ),
        pytest.param([DYNAMIC, claim("data", cls="dynamic")], trainer("t", "data"), id="provisioned-only"),
        pytest.param([LOCAL, claim("data")], trainer("t", "data"), id="no-pv-anywhere"),
    ],
)
def test_skipped_without_a_static_match(objs: list[dict[str, Any]], pod: dict[str, Any]) -> None:
    """Upstream (gate on) scores these 0 everywhere: provisioning counts only with a
    CSIStorageCapacity, which shoal does not watch."""
    code, scores = scored(objs, pod, ["n1", "n2"])
    assert code is Code.SKIP
    assert scores == {"n1": 0, "n2": 0}


def test_a_profile_scoring_volume_binding_picks_the_roomier_pv() -> None:
    profile = {
        "schedulerName": DEFAULT_SCHEDULER_NAME,
        "plugins": {"preScore": [{"name": "VolumeBinding"}], "score": [{"name": "VolumeBinding"}]},
    }
    objs = [
        make_node("big", cpu="64", memory="256Gi"),
        make_node("small", cpu="64", memory="256Gi"),
        LOCAL,
        claim("data", size="10Gi"),
        local_pv("pv-big", "big", "100Gi"),
        local_pv("pv-small", "small", "20Gi"),
        trainer("t", "data"),
    ]
    for obj in objs[:2]:
        obj["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = obj["metadata"]["name"]
    sim = Simulation(InMemoryCluster(objs), [profile], record_scores=True)
    out = sim.run_sync()["uid-t"]
    assert out.node == "big"
    assert [(name, total, by_plugin) for name, total, by_plugin in out.top] == [
        ("big", 90, {"VolumeBinding": 90}),
        ("small", 50, {"VolumeBinding": 50}),
    ]


def test_class_mean_scores_as_upstream_scorer_test() -> None:
    """scorer_test.go TestScore's 18 assertions, classes of 100 bytes."""
    default = shape_points(volumebinding.Args().shape)
    custom = [(50, 0), (80, 30), (100, 50)]  # already scaled, as the test builds it
    cases = [
        (default, [0], 100),
        (default, [30], 70),
        (default, [50], 50),
        (default, [100], 0),
        (default, [0, 0], 100),
        (default, [0, 30], 85),
        (default, [30, 30], 70),
        (default, [30, 60], 55),
        (default, [50, 50], 50),
        (default, [50, 100], 25),
        (default, [100, 100], 0),
        (custom, [0, 0], 0),
        (custom, [0, 30], 0),
        (custom, [30, 30], 0),
        (custom, [30, 60], 5),
        (custom, [50, 100], 25),
        (custom, [90, 90], 40),
        (custom, [100, 100], 50),
    ]
    for points, requested, want in cases:
        got = class_mean_scores(points, [0] * len(requested), requested, [100] * len(requested), 1)
        assert got.tolist() == [want], (points, requested)


def test_class_mean_scores_many_nodes_at_once() -> None:
    points = shape_points(volumebinding.Args().shape)
    got = class_mean_scores(points, [0, 2, 2, 3], [30, 0, 30, 200], [100, 100, 100, 100], 5)
    assert got.tolist() == [70, 0, 85, 0, 0]
    assert class_mean_scores(points, [], [], [], 2).tolist() == [0, 0]
    assert isinstance(got, np.ndarray) and got.dtype == np.int64


def test_args_default_shape() -> None:
    assert [(p.utilization, p.score) for p in volumebinding.Args().shape] == [(0, 10), (100, 0)]
    # an empty or null shape reads as the default, as kube-scheduler's v1 defaulting has it
    empties: list[list[Any] | None] = [[], None]
    for empty in empties:
        args = volumebinding.Args.model_validate({"shape": empty})
        assert [(p.utilization, p.score) for p in args.shape] == [(0, 10), (100, 0)]
    args = volumebinding.Args.model_validate(
        {"bindTimeoutSeconds": 30, "shape": [{"utilization": 40, "score": 3}]}
    )
    assert (args.bind_timeout_seconds, [(p.utilization, p.score) for p in args.shape]) == (30, [(40, 3)])


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        pytest.param(
            [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
            "increasing order",
            id="repeated-utilization",
        ),
        pytest.param(
            [{"utilization": 60, "score": 1}, {"utilization": 50, "score": 2}],
            "increasing order",
            id="decreasing-utilization",
        ),
        pytest.param(
            [{"utilization": -1, "score": 1}], "greater than or equal to 0", id="utilization-below-0"
        ),
        pytest.param(
            [{"utilization": 101, "score": 1}], "less than or equal to 100", id="utilization-above-100"
        ),
        pytest.param([{"utilization": 10, "score": -1}], "greater than or equal to 0", id="score-below-0"),
        pytest.param([{"utilization": 10, "score": 11}], "less than or equal to 10", id="score-above-10"),
        pytest.param([{"utilization": 10}], "Field required", id="no-score"),
        pytest.param([{"utilization": 10, "score": 1, "weight": 2}], "Extra inputs", id="unknown-key"),
        pytest.param({"utilization": 10, "score": 1}, "valid list", id="not-a-list"),
    ],
)
def test_args_refuse_bad_shapes(shape: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        volumebinding.Args.model_validate({"shape": shape})


def test_args_refuse_a_negative_bind_timeout() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        volumebinding.Args.model_validate({"bindTimeoutSeconds": -1})


def test_huge_or_malformed_storage_never_breaks_scoring() -> None:
    """A PV of 1e30 bytes (the API server takes it) scores as nearly empty instead of overflowing
    int64; a capacity or request of the wrong shape reads as absent."""
    from shoal.plugins.volumebinding.objects import PVCInfo, PVInfo

    huge = PVInfo.from_dict({"metadata": {"name": "big"}, "spec": {"capacity": {"storage": "1e30"}}})
    assert huge.capacity == 2**63 - 1
    points = ((0, 100), (100, 0))
    scores = class_mean_scores(points, [0, 1], [10 * 2**30, 2**62], [huge.capacity or 0, 2**62 + 1], 2)
    assert scores.tolist() == [100, 1]
    assert PVInfo.from_dict({"metadata": {"name": "x"}, "spec": {"capacity": "lots"}}).capacity is None
    assert PVCInfo.from_dict({"metadata": {"name": "c"}, "spec": {"resources": ["x"]}}).request == 0
    negative = {"resources": {"requests": {"storage": "-1e30"}}}
    assert PVCInfo.from_dict({"metadata": {"name": "c"}, "spec": negative}).request == 0
