from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from shoal.core.framework import scoring
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code
from shoal.plugins import noderesources
from shoal.plugins.dynamicresources.objects import DeviceClassInfo, ResourceSliceInfo
from shoal.plugins.dynamicresources.store import DraStore
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import (
    all_rows,
    cache_with,
    feasible,
    handle_for,
    pod,
    rejected_names,
    scores_by_name,
    state,
)


def plugin(**args: Any) -> noderesources.NodeResourcesFit:
    return noderesources.new(noderesources.Args.model_validate(args), handle_for(cache_with([])))


@pytest.mark.parametrize(
    ("request_kwargs", "expected_fit", "reason"),
    [
        pytest.param({"cpu": "2"}, {"big", "small"}, None, id="cpu-fits-both"),
        pytest.param({"cpu": "8"}, {"big"}, "Insufficient cpu", id="cpu-too-big-for-small"),
        pytest.param({"memory": "64Gi"}, {"big"}, "Insufficient memory", id="memory"),
        pytest.param({"gpus": 2}, {"big"}, "Insufficient nvidia.com/gpu", id="gpu-small-has-none"),
        pytest.param({"gpus": 9}, set(), "Insufficient nvidia.com/gpu", id="gpu-more-than-any-node"),
        pytest.param(
            {"extra_requests": {"example.com/fpga": "1"}},
            set(),
            "Insufficient example.com/fpga",
            id="unknown-ext",
        ),
    ],
)
def test_filter(request_kwargs: dict[str, Any], expected_fit: set[str], reason: str | None) -> None:
    cache = cache_with(
        [make_node("big", cpu="32", memory="128Gi", gpus=8), make_node("small", cpu="4", memory="8Gi")]
    )
    table = cache.table
    p = pod(**request_kwargs)
    fit = plugin()
    st = state()
    fit.pre_filter(st, p)
    rej = fit.filter_nodes(st, p, table, table.valid_rows())
    assert feasible(table, rej) == expected_fit
    if reason:
        assert reason in rejected_names(table, rej)


def test_counts_pods_of_other_schedulers_and_too_many_pods() -> None:
    other = make_pod("other", cpu="3", scheduler_name="default-scheduler", node_name="n")
    cache = cache_with([make_node("n", cpu="4", pods=2)], [other])
    table = cache.table
    rej = plugin().filter_nodes(state(), pod(cpu="2"), table, table.valid_rows())
    assert rejected_names(table, rej) == {"Insufficient cpu": {"n"}}
    cache.upsert_pod(pod("second", cpu="100m", node_name="n"))
    rej = plugin().filter_nodes(state(), pod(cpu="100m"), table, table.valid_rows())
    assert "Too many pods" in rejected_names(table, rej)


def nodes_half_and_empty() -> Any:
    busy = make_pod("busy", cpu="8", memory="32Gi", gpus=4, node_name="half")
    return cache_with(
        [
            make_node("half", cpu="16", memory="64Gi", gpus=8),
            make_node("empty", cpu="16", memory="64Gi", gpus=8),
        ],
        [busy],
    )


@pytest.mark.parametrize(
    ("strategy", "prefers"),
    [
        pytest.param("LeastAllocated", "empty", id="least-spreads"),
        pytest.param("MostAllocated", "half", id="most-packs"),
    ],
)
def test_score_strategies(strategy: str, prefers: str) -> None:
    cache = nodes_half_and_empty()
    table = cache.table
    p = pod(cpu="1", memory="1Gi", gpus=1)
    scores = plugin(scoringStrategy={"type": strategy}).score_nodes(state(), p, table, all_rows(table))
    by = scores_by_name(table, scores)
    other = "empty" if prefers == "half" else "half"
    assert by[prefers] > by[other]
    assert all(0 <= s <= 100 for s in by.values())


def test_least_allocated_formula() -> None:
    cache = cache_with([make_node("n", cpu="10", memory="10Gi")])
    p = pod(cpu="5", memory="1Gi")  # cpu 50% free, memory 90% free
    scores = plugin().score_nodes(state(), p, cache.table, all_rows(cache.table))
    assert scores.tolist() == [(50 + 90) // 2]


def test_gpu_weight_packs_gpus_and_ignores_gpu_for_cpu_pods() -> None:
    cache = nodes_half_and_empty()
    table = cache.table
    fit = plugin(
        scoringStrategy={"type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 10}]}
    )
    gpu_scores = scores_by_name(table, fit.score_nodes(state(), pod(gpus=1), table, all_rows(table)))
    assert gpu_scores["half"] == (5 * 100) // 8 and gpu_scores["empty"] == 100 // 8
    # a pod that asks for no GPU is not scored on GPUs at all (as upstream)
    cpu_scores = fit.score_nodes(state(), pod(), table, all_rows(table))
    assert np.all(cpu_scores == 0)


def test_balanced_allocation_scores_the_change_in_balance() -> None:
    """kube-scheduler 1.37 scores how much the pod evens a node out, not the balance it leaves."""
    busy = make_pod("cpu-heavy", cpu="8", memory="0", node_name="skewed")
    cache = cache_with(
        [make_node("skewed", cpu="16", memory="64Gi"), make_node("empty", cpu="16", memory="64Gi")], [busy]
    )
    table = cache.table
    fit = plugin(scoringStrategy={"type": "BalancedAllocation"})

    def scores(p: PodInfo) -> dict[str, int]:
        return scores_by_name(table, fit.score_nodes(state(), p, table, all_rows(table)))

    # memory-only pod: on `skewed` it evens 50%/0% out to 50%/50% (75 -> 100: 50 + (50 + 25) / 2);
    # on `empty` it unbalances 0%/0% to 0%/50% (100 -> 75: 50 + 25 / 2)
    evening = scores(pod(cpu="0", memory="32Gi"))
    assert evening == {"skewed": 87, "empty": 62}
    # a pod that leaves each node as (un)balanced as it was scores 75 on both: the balance the node
    # already had does not count (scoring only the balance with the pod, `empty` would win 100 to 75)
    unchanged = scores(pod(cpu="1", memory="4Gi"))
    assert unchanged == {"skewed": 75, "empty": 75}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"scoringStrategy": {"type": "Fastest"}}, id="unknown-strategy"),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": -1}]}}, id="negative-weight"
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}]},
                }
            },
            id="ratio-for-another-type",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}}, id="duplicate-resource"
        ),
        pytest.param({"bogus": 1}, id="unknown-field"),
    ],
)
def test_bad_args(args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        noderesources.Args.model_validate(args)


def test_args_default_as_kube_schedulers_v1_api() -> None:
    """An empty resource list is cpu and memory, a weight of 0 is 1 (SetDefaults_NodeResourcesFitArgs):
    a MostAllocated profile written that way keeps its strategy instead of being refused."""
    args = noderesources.Args.model_validate({"scoringStrategy": {"type": "MostAllocated", "resources": []}})
    assert args.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in args.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    zero = noderesources.Args.model_validate(
        {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}
    )
    assert [(r.name, r.weight) for r in zero.scoring_strategy.resources] == [("cpu", 1)]


def _spec_pod(spec: dict[str, Any]) -> PodInfo:
    return PodInfo.from_dict({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})


def _c(**requests: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests}}


def test_sidecar_after_init_container_is_compared_not_stacked() -> None:
    """As upstream's PodRequests: a plain init container runs beside the sidecars started before
    it only; a later sidecar adds to the app containers, not to that init container's peak."""
    p = _spec_pod(
        {
            "containers": [_c(cpu="1")],
            "initContainers": [_c(cpu="5"), {**_c(cpu="2"), "restartPolicy": "Always"}],
        }
    )
    assert p.requests["cpu"] == 5000  # max(1 + 2, 5), not max(1, 5) + 2


def test_nonzero_defaults_per_container_init_and_overhead_included() -> None:
    p = _spec_pod(
        {
            "containers": [_c(memory="1Gi"), _c(cpu="0")],
            "initContainers": [_c()],
            "overhead": {"cpu": "250m", "memory": "1Mi"},
        }
    )
    assert p.requests == {"memory": 2**30 + 2**20, "cpu": 250}
    # cpu: 100m (first container leaves it out) + 0 (explicit) vs the init container's 100m
    assert p.nonzero_cpu == 100 + 250
    assert p.nonzero_memory == 2**30 + 200 * 2**20 + 2**20


def test_ignored_resources_apply_to_extended_resources_only() -> None:
    cache = cache_with([make_node("n", cpu="1", extra_resources={"example.com/fpga": "0"})])
    table = cache.table
    p = pod(cpu="2", extra_requests={"example.com/fpga": "1"})
    fit = plugin(ignoredResources=["cpu", "example.com/fpga"])
    assert rejected_names(table, fit.filter_nodes(state(), p, table, table.valid_rows())) == {
        "Insufficient cpu": {"n"}
    }


def test_pods_is_never_scored() -> None:
    cache = cache_with([make_node("n", cpu="10", memory="10Gi", pods=2)])
    fit = plugin(scoringStrategy={"resources": [{"name": "pods"}, {"name": "cpu"}]})
    assert fit.score_nodes(state(), pod(cpu="5"), cache.table, all_rows(cache.table)).tolist() == [50]


@pytest.mark.parametrize(
    ("points", "cases"),
    [
        (
            [(10, 1), (90, 9)],
            {-10: 1, 0: 1, 9: 1, 10: 1, 15: 1, 19: 1, 20: 2, 89: 8, 90: 9, 99: 9, 100: 9, 110: 9},
        ),
        ([(0, 2), (40, 10), (100, 0)], {-10: 2, 0: 2, 20: 6, 30: 8, 40: 10, 70: 5, 100: 0, 110: 0}),
        ([(0, 2), (40, 2), (100, 2)], {-10: 2, 0: 2, 20: 2, 30: 2, 40: 2, 70: 2, 100: 2, 110: 2}),
    ],
    ids=["case_0", "case_1", "case_2"],
)
def test_broken_linear_as_upstream(points: list[tuple[int, int]], cases: dict[int, int]) -> None:
    """noderesources/requested_to_capacity_ratio_test.go TestBrokenLinearFunction, every assertion."""
    utilization = np.array(list(cases), dtype=np.int64)
    assert scoring.broken_linear(points, utilization).tolist() == list(cases.values())


def test_requested_to_capacity_ratio_needs_a_shape() -> None:
    with pytest.raises(ValidationError, match=r"needs requestedToCapacityRatio\.shape"):
        noderesources.Args.model_validate({"scoringStrategy": {"type": "RequestedToCapacityRatio"}})
    with pytest.raises(ValidationError, match="increasing order"):
        noderesources.Args.model_validate(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]
                    },
                }
            }
        )


def _by_hand(
    strategy: str,
    nodes: list[tuple[int, int, int]],
    used: list[tuple[int, int, int]],
    want: tuple[int, int, int],
) -> list[int]:
    """Upstream's per-node arithmetic: each resource the node has (allocatable > 0) and the pod is
    scored on weighs in; GPUs (weight 10) only for a pod that asks for them."""
    out = []
    for alloc, have in zip(nodes, used, strict=True):
        total = weights = 0
        for (a, u, w), weight in zip(zip(alloc, have, want, strict=True), (1, 1, 10), strict=True):
            if a == 0 or (weight == 10 and w == 0):
                continue
            r = u + w
            total += weight * (
                ((a - r) * 100 // a if r <= a else 0)
                if strategy == "LeastAllocated"
                else min(r, a) * 100 // a
            )
            weights += weight
        out.append(total // weights if weights else 0)
    return out


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("gpus_everywhere", [True, False])
def test_vector_scores_equal_upstreams_per_node_arithmetic(strategy: str, gpus_everywhere: bool) -> None:
    """Where every node has a resource the scores skip its masks and share one divisor; where some
    lack it they do not; on a subset of rows they index. Each way gives upstream's numbers."""
    rng = np.random.default_rng(7)
    nodes = [
        (
            int(rng.integers(1, 97)),
            int(rng.integers(1, 1025)),
            int(rng.integers(1 if gpus_everywhere else 0, 9)),
        )
        for _ in range(40)
    ]
    used = [
        (int(rng.integers(0, c + 1)), int(rng.integers(0, m + 1)), int(rng.integers(0, g + 1)))
        for c, m, g in nodes
    ]
    objs = [make_node(f"n{i:02d}", cpu=str(c), memory=f"{m}Gi", gpus=g) for i, (c, m, g) in enumerate(nodes)]
    placed = [
        make_pod(f"u{i}", cpu=str(c), memory=f"{m}Gi", gpus=g, node_name=f"n{i:02d}")
        for i, (c, m, g) in enumerate(used)
    ]
    cache = cache_with(objs, placed)
    table = cache.table
    fit = plugin(
        scoringStrategy={
            "type": strategy,
            "resources": [
                {"name": "cpu", "weight": 1},
                {"name": "memory", "weight": 1},
                {"name": "nvidia.com/gpu", "weight": 10},
            ],
        }
    )
    gib = 1024**3
    for want in [(3, 5, 0), (2, 7, 1)]:
        p = pod(cpu=str(want[0]), memory=f"{want[1]}Gi", gpus=want[2])
        expected = _by_hand(
            strategy,
            [(c * 1000, m * gib, g) for c, m, g in nodes],
            [(c * 1000, m * gib, g) for c, m, g in used],
            (want[0] * 1000, want[1] * gib, want[2]),
        )
        rows = all_rows(table)
        assert fit.score_nodes(state(), p, table, rows).tolist() == expected
        some = rows[::3]
        assert fit.score_nodes(state(), p, table, some).tolist() == expected[::3]


def test_an_extended_resource_a_device_class_provides_is_left_to_dra_or_named() -> None:
    """kube-scheduler 1.37 hands an extended resource that a node's allocatable lacks, and that a
    DeviceClass provides (``extendedResourceName``, or the implicit
    ``deviceclass.resource.kubernetes.io/<class>``), to DRA. With DynamicResources in the profile
    this Filter leaves such nodes alone; without it (this Filter alone here), a node that publishes
    ResourceSlices is refused, unresolvable, with a reason that says so, and a node without any
    keeps the plain Insufficient."""
    nodes = [
        make_node("device-plugin", gpus=8),  # nvidia.com/gpu in allocatable: NodeResourcesFit's
        make_node("dra-only"),  # the GPUs published as ResourceSlices only
        make_node("cpu-only"),
    ]
    cache = cache_with(nodes)
    gpu_slice = {  # as NVIDIA's DRA driver publishes a node's GPUs
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "dra-only-gpu.nvidia.com-x7k2q"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "dra-only",
            "pool": {"name": "dra-only", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"productName": {"string": "NVIDIA H100"}}}
                for i in range(8)
            ],
        },
    }
    cache.store(DraStore).apply(ResourceSliceInfo.from_dict(gpu_slice))
    fit = noderesources.new(noderesources.Args(), handle_for(cache))
    gpu_pod = pod(gpus=1)

    def verdicts(p: PodInfo) -> dict[str, set[str]]:
        return rejected_names(
            cache.table, fit.filter_nodes(state(), p, cache.table, cache.table.valid_rows())
        )

    # no DeviceClass maps it
    assert verdicts(gpu_pod) == {"Insufficient nvidia.com/gpu": {"dra-only", "cpu-only"}}
    gpu_class = {  # as NVIDIA's DRA driver installs it, with the extended-resource mapping
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }
    cache.store(DraStore).apply(DeviceClassInfo.from_dict(gpu_class))
    reason = noderesources.dra_reason("nvidia.com/gpu", "gpu.nvidia.com")
    assert verdicts(gpu_pod) == {reason: {"dra-only"}, "Insufficient nvidia.com/gpu": {"cpu-only"}}
    codes = {
        r.reason: r.code for r in fit.filter_nodes(state(), gpu_pod, cache.table, cache.table.valid_rows())
    }
    assert codes[reason] is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    name = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
    implicit = pod(extra_requests={name: "1"})
    assert verdicts(implicit) == {
        noderesources.dra_reason(name, "gpu.nvidia.com"): {"dra-only"},
        f"Insufficient {name}": {"device-plugin", "cpu-only"},
    }
    assert fit.counts_all_of(pod()) and not fit.counts_all_of(gpu_pod)  # what-ifs run every Filter
    fit.dra_allocates = True  # as attach_framework finds DynamicResources in the profile
    assert verdicts(gpu_pod) == {}  # DRA's to allocate wherever the allocatable lacks it
    assert verdicts(pod(gpus=9)) == {"Insufficient nvidia.com/gpu": {"device-plugin"}}
    assert verdicts(implicit) == {}
