"""Gang plans (core/framework/gangplan.py): several placers' trials intersected, as kube-scheduler
1.38 intersects its PlacementGenerate plugins' placements."""

from __future__ import annotations

import numpy as np

from shoal.core.framework.gangplan import BoolArray, GangPlan, GangTrial, intersect_plans, rows_within


def rows(*on: int, n: int = 6) -> BoolArray:
    out = np.zeros(n, dtype=bool)
    out[list(on)] = True
    return out


def test_rows_within_keeps_the_common_nodes_and_treats_none_as_no_limit() -> None:
    assert rows_within(None, None) is None
    inside = rows_within(rows(0, 1, 2), rows(1, 2, 3))
    assert inside is not None and list(np.flatnonzero(inside)) == [1, 2]
    only = rows_within(None, rows(4))
    assert only is not None and list(np.flatnonzero(only)) == [4]
    longer = rows_within(rows(0, 5), rows(0, n=3))  # a node added since the shorter was made
    assert longer is not None and len(longer) == 6 and list(np.flatnonzero(longer)) == [0]


def test_trials_are_every_overlapping_pair_in_the_first_plans_order() -> None:
    racks = GangPlan((GangTrial(None, rows(0, 1), "rack a"), GangTrial(None, rows(2, 3), "rack b")))
    gpus = GangPlan((GangTrial(None, rows(1, 2, 3), "nvlink"),))
    plan = intersect_plans([("Topology", racks), ("Devices", gpus)])
    assert [t.note for t in plan.trials] == ["rack a; nvlink", "rack b; nvlink"]
    assert [list(np.flatnonzero(t.rows)) for t in plan.trials if t.rows is not None] == [[1], [2, 3]]
    anywhere = GangPlan((GangTrial(None, None, ""),))
    assert [t.note for t in intersect_plans([("Topology", racks), ("Any", anywhere)]).trials] == [
        "rack a",
        "rack b",
    ]


def test_no_overlap_or_a_refusing_placer_leaves_no_trial_and_says_which() -> None:
    a = GangPlan((GangTrial(None, rows(0), "rack a"),))
    b = GangPlan((GangTrial(None, rows(5), "rack z"),))
    plan = intersect_plans([("Topology", a), ("Devices", b)])
    assert not plan.trials and plan.failure == "no placement of Topology overlaps one of Devices"
    refused = GangPlan((), "no rack holds 9")
    assert intersect_plans([("Topology", refused), ("Devices", b)]).failure == "Topology: no rack holds 9"
    assert intersect_plans([("Topology", a), ("Devices", refused)]).failure == "Devices: no rack holds 9"
