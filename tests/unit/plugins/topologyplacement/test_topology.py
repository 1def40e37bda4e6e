"""plugins/topologyplacement/domains.py: domain room, bin-packing order, fewest nodes, pinning, and the cost
model."""

from __future__ import annotations

import numpy as np

from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.plugins.topologyplacement.domains import (
    HOSTNAME,
    RACK,
    ZONE,
    CostModel,
    IntArray,
    member_shape,
    member_slots,
    pinned_value,
    plan_gang,
    plan_level,
)
from shoal.testing.objects import make_node, make_pod


def table_of(layout: dict[str, tuple[str, str, int]]) -> NodeTable:
    """node -> (zone, rack, free GPUs of 8)."""
    table = NodeTable()
    for name, (zone, rack, free) in layout.items():
        row = table.set_node(NodeSpec.from_dict(make_node(name, gpus=8, zone=zone, rack=rack)))
        if free < 8:
            table.account(row, PodInfo.from_dict(make_pod(f"busy-{name}", gpus=8 - free)))
    return table


LAYOUT = {
    "a1": ("za", "ra", 8),
    "a2": ("za", "ra", 8),
    "a3": ("za", "ra", 8),  # rack ra: 24 free GPUs
    "b1": ("za", "rb", 8),
    "b2": ("za", "rb", 2),  # rack rb: 10 free
    "c1": ("zb", "rc", 4),
    "c2": ("zb", "rc", 4),  # rack rc: 8 free
}


def slots_for(table: NodeTable, gpus: int) -> IntArray:
    return member_slots(table, {"nvidia.com/gpu": gpus}, np.ones(table.size, dtype=bool))


def test_member_slots_count_the_scarcest_resource_and_skip_ineligible_nodes() -> None:
    table = table_of(LAYOUT)
    slots = slots_for(table, 2)
    assert dict(zip(table.names, slots.tolist(), strict=True)) == {
        "a1": 4, "a2": 4, "a3": 4, "b1": 4, "b2": 1, "c1": 2, "c2": 2,
    }  # fmt: skip
    eligible = np.ones(table.size, dtype=bool)
    eligible[table.index["a1"]] = False
    big_cpu = member_slots(table, {"nvidia.com/gpu": 1, "cpu": 16_000}, eligible)
    assert big_cpu[table.index["a1"]] == 0 and big_cpu[table.index["a2"]] == 2  # 32 cpus / 16


def test_member_shape_is_the_largest_request_per_resource() -> None:
    assert member_shape([{"cpu": 100, "nvidia.com/gpu": 1}, {"cpu": 500, "memory": 0}]) == {
        "cpu": 500,
        "nvidia.com/gpu": 1,
    }


def test_plan_level_bin_packs_least_room_first_and_names_the_best_when_none_fits() -> None:
    table = table_of(LAYOUT)
    slots = slots_for(table, 1)
    plan = plan_level(table, RACK, slots, need=8)
    assert [d.value for d in plan.fits] == ["rc", "rb", "ra"]  # 8, 10, 24 free: tightest first
    too_big = plan_level(table, RACK, slots, need=30)
    assert too_big.fits == () and too_big.best is not None and too_big.best.value == "ra"
    assert "ra, has room for 24 of the 30 member(s) needed (short 6)" in too_big.shortfall()
    assert "no node has the label" in plan_level(table, "example.com/none", slots, 1).shortfall()


def test_packed_rows_are_the_fewest_nodes_that_hold_the_gang() -> None:
    table = table_of(LAYOUT)
    dom = next(d for d in plan_level(table, RACK, slots_for(table, 1), need=9).fits if d.value == "rb")
    assert dom.packed is not None
    assert sorted(table.name(int(r)) for r in np.flatnonzero(dom.packed)) == ["b1", "b2"]
    dom = next(d for d in plan_level(table, RACK, slots_for(table, 1), need=8).fits if d.value == "ra")
    assert dom.packed is not None and int(dom.packed.sum()) == 1  # one whole node holds 8


def test_members_already_placed_pin_the_domain() -> None:
    table = table_of(LAYOUT)
    rows = [table.index["a1"], table.index["a2"]]
    assert pinned_value(table, RACK, rows) == ("ra", True)
    assert pinned_value(table, RACK, []) == (None, True)
    assert pinned_value(table, RACK, [table.index["a1"], table.index["b1"]]) == (None, False)
    plan = plan_level(table, RACK, slots_for(table, 1), need=4, pinned="ra")
    assert [d.value for d in plan.fits] == ["ra"]


def test_plan_gang_falls_back_level_by_level_and_ends_anywhere_when_preferred() -> None:
    table = table_of(LAYOUT)
    slots = slots_for(table, 1)
    plan = plan_gang(table, (RACK, ZONE), required=False, slots=slots, need=30)
    assert [t.domain.value if t.domain else None for t in plan.trials] == ["za", "za", None]  # packed, whole
    assert "preferred topology.shoal.dev/rack could not hold it" in plan.trials[0].note
    anywhere = plan.trials[-1]
    assert anywhere.rows is None and "anywhere" in anywhere.note


def test_plan_gang_required_level_that_cannot_hold_has_no_trial_and_says_why() -> None:
    table = table_of(LAYOUT)
    plan = plan_gang(table, (RACK,), required=True, slots=slots_for(table, 1), need=30)
    assert plan.trials == ()
    assert plan.failure.startswith("no topology.shoal.dev/rack domain can hold its members (required)")
    assert "short 6" in plan.failure


def test_cost_model_sums_cost_to_peers_by_the_tightest_shared_level() -> None:
    table = table_of(LAYOUT)
    model = CostModel(((HOSTNAME, 1.0), (RACK, 4.0), (ZONE, 16.0)), across=32.0)
    peers = {table.index["a1"]: 2, table.index["c1"]: 1}
    cost = model.cost_to(table, peers)
    by_name = dict(zip(table.names, cost.tolist(), strict=True))
    assert by_name["a1"] == 2 * 1 + 32  # same node as two peers, other zone than the third
    assert by_name["a2"] == 2 * 4 + 32  # same rack
    assert by_name["b1"] == 2 * 16 + 32  # same zone
    assert by_name["c2"] == 2 * 32 + 4  # same rack as c1
    assert model.pair_cost(table, table.index["a1"], table.index["b1"]) == 16.0


def test_worst_pairwise_cost_is_the_tightest_level_holding_every_member() -> None:
    table = table_of(LAYOUT)
    model = CostModel()
    i = table.index
    assert model.worst_pairwise(table, [i["a1"], i["a1"]]) == (1.0, HOSTNAME)
    assert model.worst_pairwise(table, [i["a1"], i["a2"]]) == (4.0, RACK)
    assert model.worst_pairwise(table, [i["a1"], i["b1"]]) == (16.0, ZONE)
    assert model.worst_pairwise(table, [i["a1"], i["c1"]]) == (32.0, "across zones")
