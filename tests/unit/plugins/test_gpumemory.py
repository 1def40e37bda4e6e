from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from shoal.core.state.status import Code
from shoal.plugins import gpumemory
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


def plugin(cache: Any, **args: Any) -> gpumemory.GPUMemory:
    return gpumemory.new(gpumemory.Args.model_validate(args), handle_for(cache))


@pytest.mark.parametrize(
    ("label", "expected_free"),
    [
        pytest.param("40", 40.0, id="integer"),
        pytest.param("12.5", 12.5, id="decimal"),
        pytest.param("40Gi", None, id="quantity-suffix-malformed"),
        pytest.param("-5", None, id="negative-malformed"),
        pytest.param("abc", None, id="text-malformed"),
        pytest.param("nan", None, id="nan-malformed"),
        # parse as Python floats but are no plain decimal number of GB (the fidelity issue)
        pytest.param("1e9", None, id="exponent-malformed"),
        pytest.param("1E9", None, id="upper-exponent-malformed"),
        pytest.param("1_000", None, id="underscore-malformed"),
        pytest.param("1e308", None, id="huge-exponent-malformed"),
        pytest.param("inf", None, id="infinity-malformed"),
        pytest.param("0x10", None, id="hex-malformed"),
        pytest.param("+40", None, id="signed-malformed"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param(".5", 0.5, id="leading-dot"),
        pytest.param("80.", 80.0, id="trailing-dot"),
    ],
)
def test_label_parsing_never_crashes(label: str, expected_free: float | None) -> None:
    cache = cache_with([make_node("n", gpu_memory_free_gb=label)])
    free, malformed = plugin(cache, gfdFallback=False).free(cache.table)
    if expected_free is None:
        assert np.isnan(free[0]) and malformed[0]
    else:
        assert free[0] == expected_free and not malformed[0]


def test_filter_reasons() -> None:
    cache = cache_with(
        [
            make_node("roomy", gpus=1, gpu_memory_free_gb=40, gfd_labels=False),
            make_node("tight", gpus=1, gpu_memory_free_gb=5, gfd_labels=False),
            make_node("bad", gpus=1, gpu_memory_free_gb="40Gi", gfd_labels=False),
            make_node("none", gpus=1, gfd_labels=False),
        ]
    )
    table = cache.table
    p = pod(gpus=1, gpu_memory_gb=10)
    rej = plugin(cache).filter_nodes(state(), p, table, table.valid_rows())
    assert feasible(table, rej) == {"roomy"}
    assert rejected_names(table, rej) == {
        "Insufficient GPU memory": {"tight"},
        "node(s) had an invalid gpu-memory-free-gb label": {"bad"},
        "node(s) had no GPU memory information": {"none"},
    }
    codes = {r.reason: r.code for r in rej}
    assert codes["Insufficient GPU memory"] is Code.UNSCHEDULABLE


def test_gfd_fallback_and_configurable_key() -> None:
    gfd_only = make_node("gfd", gpus=2, gpu_memory_mib=40960)  # 2 x 40 GiB = 80 GB
    custom = make_node("custom", gpus=1, gfd_labels=False, labels={"example.com/free-gb": "30"})
    cache = cache_with([gfd_only, custom])
    free, _ = plugin(cache).free(cache.table)
    assert free[cache.table.index["gfd"]] == 80.0
    assert np.isnan(free[cache.table.index["custom"]])
    free2, _ = plugin(cache, labelKey="example.com/free-gb", gfdFallback=False).free(cache.table)
    assert free2[cache.table.index["custom"]] == 30.0
    assert np.isnan(free2[cache.table.index["gfd"]])


def test_malformed_label_is_not_papered_over_by_gfd() -> None:
    # GFD says 2 x 40 GiB, but the budget someone set is unreadable: no GPU information, reported
    cache = cache_with([make_node("typo", gpus=2, gpu_memory_mib=40960, gpu_memory_free_gb="40Gi")])
    gm = plugin(cache)
    free, malformed = gm.free(cache.table)
    assert np.isnan(free[0]) and malformed[0]
    rej = gm.filter_nodes(state(), pod(gpus=1, gpu_memory_gb=10), cache.table, cache.table.valid_rows())
    assert rejected_names(cache.table, rej) == {"node(s) had an invalid gpu-memory-free-gb label": {"typo"}}


@pytest.mark.parametrize(
    ("gpus", "request_gb", "fits"),
    [
        pytest.param(1, 16, True, id="one-gpu-exactly-full"),
        pytest.param(1, 20, False, id="one-gpu-too-small"),
        pytest.param(2, 30, True, id="two-gpus-hold-it"),
        pytest.param(0, 20, False, id="no-gpu-request-counts-as-one"),
    ],
)
def test_request_larger_than_the_gpus_it_gets_does_not_fit(gpus: int, request_gb: int, fits: bool) -> None:
    # 8 x 16 GiB = 128 GB in total: the budget is ample, one GPU is not
    cache = cache_with([make_node("small-gpus", gpus=8, gpu_memory_mib=16384)])
    rej = plugin(cache).filter_nodes(
        state(), pod(gpus=gpus, gpu_memory_gb=request_gb), cache.table, cache.table.valid_rows()
    )
    assert (feasible(cache.table, rej) == {"small-gpus"}) is fits
    if not fits:
        assert rejected_names(cache.table, rej) == {gpumemory.TOO_SMALL: {"small-gpus"}}


def test_reservations_subtract_bound_and_assumed_pods() -> None:
    bound = make_pod("bound", gpu_memory_gb=15, node_name="n")
    cache = cache_with([make_node("n", gpu_memory_free_gb=40)], [bound])
    gm = plugin(cache)
    free, _ = gm.free(cache.table)
    assert free[0] == 25
    cache.assume(pod("assumed", gpu_memory_gb=20), "n")
    free, _ = gm.free(cache.table)
    assert free[0] == 5
    rej = gm.filter_nodes(state(), pod("next", gpu_memory_gb=10), cache.table, cache.table.valid_rows())
    assert feasible(cache.table, rej) == set()
    cache.forget("uid-assumed")
    assert gm.free(cache.table)[0][0] == 25


def test_seed_score_and_normalise_without_division_by_zero() -> None:
    assert gpumemory.seed_score(np.array([0.0, 10.0, 20.0, 40.0, np.nan, -3.0])).tolist() == [
        0,
        50,
        100,
        100,
        0,
        0,
    ]
    cache = cache_with([make_node("a", gpu_memory_free_gb=0), make_node("b", gpu_memory_free_gb=0)])
    gm = plugin(cache)
    p = pod(gpus=1, gpu_memory_gb=1)
    raw = gm.score_nodes(state(), p, cache.table, all_rows(cache.table))
    assert gm.normalize_scores(state(), p, raw).tolist() == [0, 0]
    cache2 = cache_with([make_node("a", gpu_memory_free_gb=5), make_node("b", gpu_memory_free_gb=10)])
    gm2 = plugin(cache2)
    norm = gm2.normalize_scores(state(), p, gm2.score_nodes(state(), p, cache2.table, all_rows(cache2.table)))
    assert scores_by_name(cache2.table, norm) == {"a": 50, "b": 100}


def test_only_gpu_pods_are_scored_and_filtered() -> None:
    cache = cache_with([make_node("a", gpu_memory_free_gb=5)])
    gm = plugin(cache)
    assert gm.pre_score(state(), pod(), all_rows(cache.table), cache.table).code is Code.SKIP
    assert gm.pre_score(state(), pod(gpus=1), all_rows(cache.table), cache.table).ok
    assert gm.pre_filter(state(), pod())[1].code is Code.SKIP
    assert gm.filter_nodes(state(), pod(), cache.table, cache.table.valid_rows()) == ()


@pytest.mark.parametrize("value", ["40Gi", "-5", "abc"])
def test_malformed_annotation_means_no_request(value: str) -> None:
    p = pod(gpu_memory_gb=value)
    assert p.gpu_memory_gb is None
    assert "shoal.dev/gpu-memory-gb" in p.problems


def test_reserve_detects_overflow() -> None:
    cache = cache_with([make_node("n", gpu_memory_free_gb=10)])
    gm = plugin(cache)
    p = pod("big", gpu_memory_gb=12)
    cache.assume(p, "n")
    assert gm.reserve(state(), p, "n").code is Code.UNSCHEDULABLE
    small = pod("small", gpu_memory_gb=1)
    assert gm.reserve(state(), small, "missing").code is Code.UNSCHEDULABLE


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"labelKey": ""}, id="empty-key"),
        pytest.param({"labelKey": "not a label"}, id="spaces"),
        pytest.param({"scorePerGb": 0}, id="zero-multiplier"),
        pytest.param({"gfdFallback": "maybe"}, id="not-bool"),
    ],
)
def test_bad_args(args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        gpumemory.Args.model_validate(args)


def test_a_malformed_label_is_logged_once_per_node_and_value(caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_with([make_node("bad", gpus=1, gpu_memory_free_gb="40Gi", gfd_labels=False)])
    gm = plugin(cache)
    for _ in range(3):  # three cycles
        gm.filter_nodes(state(), pod(gpus=1, gpu_memory_gb=10), cache.table, cache.table.valid_rows())
    warnings = [r.getMessage() for r in caplog.records if r.name == "shoal.plugins.gpumemory"]
    assert len(warnings) == 1
    assert "node bad" in warnings[0] and "gpu-memory-free-gb" in warnings[0] and "40Gi" in warnings[0]


def test_a_budget_above_what_the_gpus_hold_is_reported_not_used() -> None:
    """GFD says one 40 GB GPU: a label of 80 GB is no real budget (nor 1e3); 40 and 12.5 are."""
    cache = cache_with(
        [
            make_node("over", gpus=1, gpu_memory_mib=40960, gpu_memory_free_gb="80"),
            make_node("exact", gpus=1, gpu_memory_mib=40960, gpu_memory_free_gb="40"),
            make_node("under", gpus=1, gpu_memory_mib=40960, gpu_memory_free_gb="12.5"),
            make_node("no-gfd", gpus=1, gpu_memory_free_gb="80", gfd_labels=False),
        ]
    )
    gm = plugin(cache)
    free, malformed = gm.free(cache.table)
    by_name = {cache.table.name(r): (free[r], bool(malformed[r])) for r in cache.table.rows()}
    assert np.isnan(by_name["over"][0]) and by_name["over"][1]
    assert by_name["exact"] == (40.0, False) and by_name["under"] == (12.5, False)
    assert by_name["no-gfd"] == (80.0, False)  # nothing says what its GPUs hold
    rej = gm.filter_nodes(state(), pod("p", gpu_memory_gb=10), cache.table, all_rows(cache.table))
    assert rejected_names(cache.table, rej) == {"node(s) had an invalid gpu-memory-free-gb label": {"over"}}


def test_dra_devices_memory_is_the_budget_when_the_label_and_gfd_are_absent() -> None:
    from shoal.plugins.dynamicresources.objects import ResourceSliceInfo
    from tests.unit.dra_objects import node_slice

    labelled = make_node("labelled", gpus=0, labels={"gpu-memory-free-gb": "10"})
    cache = cache_with([make_node("dra", gpus=0), make_node("bare", gpus=0), labelled])
    row = cache.table.index["labelled"]
    cache.store(DraStore).apply(ResourceSliceInfo.from_dict(node_slice("dra", 8, memory="80Gi")))
    cache.store(DraStore).apply(ResourceSliceInfo.from_dict(node_slice("labelled", 8, memory="80Gi")))
    p = plugin(cache)
    free, _ = p.free(cache.table)
    assert free[cache.table.index["dra"]] == 640.0
    assert np.isnan(free[cache.table.index["bare"]])
    assert free[row] == 10.0  # the label wins over the devices
    off = plugin(cache, draFallback=False)
    assert np.isnan(off.free(cache.table)[0][cache.table.index["dra"]])
    cache.store(DraStore).apply(
        ResourceSliceInfo.from_dict(node_slice("dra", 8, memory="80Gi")), deleted=True
    )
    assert np.isnan(p.free(cache.table)[0][cache.table.index["dra"]])


def test_devices_that_claims_hold_leave_the_dra_budget_and_explain_names_each_source() -> None:
    """The three sources alike: a label is what is free, GFD and DRA what the GPUs hold, minus
    what pods on the node asked for; from DRA also minus the devices claims hold (allocated by
    anyone, or assumed by shoal), and back when a claim lets go. Explain says which source."""
    from shoal.plugins.dynamicresources.objects import ResourceClaimInfo, ResourceSliceInfo
    from tests.unit.dra_objects import allocated, claim, node_slice

    labelled = make_node("labelled", gpus=0, labels={"gpu-memory-free-gb": "10"})
    gfd = make_node("gfd", gpus=0, labels={"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.count": "2"})
    cache = cache_with([make_node("dra", gpus=0), labelled, gfd, make_node("bare", gpus=0)])
    cache.store(DraStore).apply(ResourceSliceInfo.from_dict(node_slice("dra", 8, memory="80Gi")))
    gm = plugin(cache)
    row = cache.table.index["dra"]
    assert gm.free(cache.table)[0][row] == 640.0
    two = ResourceClaimInfo.from_dict(allocated(claim("two"), "dra", ["gpu-0", "gpu-1"]))
    cache.store(DraStore).apply(two)
    assert gm.free(cache.table)[0][row] == 480.0
    assumed = ResourceClaimInfo.from_dict(allocated(claim("held"), "dra", ["gpu-2"]))
    cache.store(DraStore).assume(assumed)
    assert gm.free(cache.table)[0][row] == 400.0
    cache.store(DraStore).forget(assumed.key)
    cache.store(DraStore).apply(two, deleted=True)
    assert gm.free(cache.table)[0][row] == 640.0

    rows = [cache.table.index[n] for n in ("dra", "labelled", "gfd", "bare")]
    notes = gm.explain_nodes(pod("p", gpu_memory_gb=10), rows)
    assert [notes[r] for r in rows] == [
        "GPU memory from DRA devices' memory capacity: 640 GB free",
        "GPU memory from label gpu-memory-free-gb: 10 GB free",
        "GPU memory from GFD labels nvidia.com/gpu.memory x nvidia.com/gpu.count: 80 GB free",
        "GPU memory from none",
    ]
    assert gm.explain_nodes(pod("cpu-only"), rows) == {}


def test_a_gpu_counts_its_memory_once_however_a_dra_driver_describes_it() -> None:
    """The seed's GPU memory meets DRA: a GPU split by MIG (the full GPU and its partitions all
    consuming the GPU's counter set) holds the counter set's memory, not the sum of its
    partitions'; an allocated partition takes its share. A shared GPU (consumable capacity) holds
    its memory capacity; each share takes what it consumed."""
    from decimal import Decimal

    from shoal.plugins.dynamicresources.objects import AllocatedDevice, DeviceId, ResourceClaimInfo
    from tests.unit.helpers import store_objects

    def consumes(memory: str) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]

    mig = [
        {"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}, "consumesCounters": consumes("80Gi")},
        *(
            {
                "name": f"mig-3g-{i}",
                "capacity": {"memory": {"value": "40Gi"}},
                "consumesCounters": consumes("40Gi"),
            }
            for i in range(2)
        ),
        *(
            {
                "name": f"mig-1g-{i}",
                "capacity": {"memory": {"value": "10Gi"}},
                "consumesCounters": consumes("10Gi"),
            }
            for i in range(7)
        ),
    ]
    pool = {"name": "m", "generation": 1, "resourceSliceCount": 2}
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    shared = {"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "80Gi"}}}
    slices = [
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "m-counters"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "m", "pool": pool, "sharedCounters": counters},
        },
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "m-devices"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "m", "pool": pool, "devices": mig},
        },
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "s",
                "pool": {"name": "s", "generation": 1, "resourceSliceCount": 1},
                "devices": [shared],
            },
        },
    ]
    cache = cache_with([make_node("m", gpus=0), make_node("s", gpus=0)])
    store_objects(cache, *slices)
    gm = plugin(cache)
    m, s = cache.table.index["m"], cache.table.index["s"]
    assert (gm.free(cache.table)[0][m], gm.free(cache.table)[0][s]) == (80.0, 80.0)
    store = cache.store(DraStore)
    part = ResourceClaimInfo.from_dict({"metadata": {"name": "p", "namespace": "default"}})
    part.allocated = (AllocatedDevice("gpu", DeviceId("gpu.nvidia.com", "m", "mig-3g-0")),)
    store.assume(part)
    assert gm.free(cache.table)[0][m] == 40.0
    for i in range(2):
        share = ResourceClaimInfo.from_dict({"metadata": {"name": f"share-{i}", "namespace": "default"}})
        consumed = {"memory": Decimal(30 * 2**30)}
        share.allocated = (
            AllocatedDevice(
                "gpu", DeviceId("gpu.nvidia.com", "s", "gpu-0"), share_id=f"id-{i}", consumed=consumed
            ),
        )
        store.assume(share)
    assert gm.free(cache.table)[0][s] == 20.0
    store.forget("default/share-0")
    assert gm.free(cache.table)[0][s] == 50.0
