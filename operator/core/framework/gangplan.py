"""What a gang-placement plugin answers the gang cycle: the domains to try a gang in, in order.

A :class:`GangPlacementPlugin <shoal.core.framework.interfaces.GangPlacementPlugin>` (TopologyPlacement)
plans the trials; the gang cycle (:mod:`shoal.core.scheduling.gangs`) places the members inside each
trial's rows in turn, and whole-gang preemption (DefaultPreemption) searches inside one. How the
domains are found and costed is the plugin's (plugins/topologyplacement/domains.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Domain:
    """One domain of a level: its rows, its room (members), and the fewest rows that hold ``need``."""

    level: str
    value: str
    rows: BoolArray
    room: int
    nodes: int
    #: the fewest nodes (most room first) that hold the members needed; None if the domain cannot
    packed: BoolArray | None = None

    def describe(self) -> str:
        return f"{self.value} ({self.level})"


#: where the gang cycle puts the domain its members are being placed in (TopologyPlacement's Filter)
GANG_DOMAIN_STATE = "shoal.dev/gang-domain"


@dataclass(frozen=True)
class GangTrial:
    """One attempt at placing a gang: inside ``rows`` (None: anywhere), said as ``note``."""

    domain: Domain | None
    rows: BoolArray | None
    note: str


@dataclass(frozen=True)
class GangPlan:
    """The attempts to make, in order; ``failure`` says why there are none (a required level)."""

    trials: tuple[GangTrial, ...]
    failure: str = ""


@dataclass(frozen=True)
class PlacementProgress:
    """Where a gang's placement in one trial stands, for PlacementFeasible plugins (kube-scheduler
    1.38's ``PlacementProgress``): members placed (those placed before the cycle included),
    members that fit nowhere in the trial, members not tried yet."""

    scheduled: int
    unschedulable: int
    remaining: int


def rows_within(rows: BoolArray | None, domain: BoolArray | None) -> BoolArray | None:
    """``rows`` inside ``domain`` (None: no limit on either side); arrays of other lengths (nodes
    added since one was made) are compared on their common prefix."""
    if domain is None:
        return rows
    if rows is None:
        return domain
    n = min(len(rows), len(domain))
    inside: BoolArray = np.zeros(max(len(rows), len(domain)), dtype=bool)
    inside[:n] = rows[:n] & domain[:n]
    return inside


def intersect_plans(plans: list[tuple[str, GangPlan]], limit: int = 16) -> GangPlan:
    """Several gang placers' plans as one (kube-scheduler 1.38 intersects its PlacementGenerate
    plugins' placements): every pair of trials whose node sets overlap, in the first plan's order,
    at most ``limit``. A plan without trials, or no overlap at all, makes a plan without trials
    whose failure names the placer(s)."""
    name, combined = plans[0]
    if not combined.trials:
        return GangPlan((), f"{name}: {combined.failure}")
    for other, plan in plans[1:]:
        if not plan.trials:
            return GangPlan((), f"{other}: {plan.failure}")
        trials: list[GangTrial] = []
        for a in combined.trials:
            for b in plan.trials:
                rows = rows_within(a.rows, b.rows)
                if rows is not None and not rows.any():
                    continue
                note = "; ".join(n for n in (a.note, b.note) if n)
                trials.append(GangTrial(a.domain or b.domain, rows, note))
        if not trials:
            return GangPlan((), f"no placement of {name} overlaps one of {other}")
        combined, name = GangPlan(tuple(trials[:limit])), f"{name} and {other}"
    return combined
