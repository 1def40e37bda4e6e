"""Topology domains for gangs, and the network cost between nodes: pure functions over the node table.

A *level* is a node label key (``nvidia.com/gpu.clique``, a rack key, ``topology.kubernetes.io/zone``);
a *domain* is one value of it. A gang constrained to a level is placed inside one domain of that
level, so its members talk over the fastest links they can share.

How a domain is chosen (:func:`plan_level`), vectorised over every node at once:

1. ``slots[row]``: how many members fit on each node now, by the resources a member asks for (the
   largest request among the members, per resource, so the estimate never overstates room), on the
   nodes a member passes every Filter of the profile on;
2. per domain, the sum of its nodes' slots (one ``bincount``);
3. the domains whose sum holds the members still needed, **least room first** (bin-packing: a gang
   takes the tightest domain that holds it, so big domains stay whole for big gangs); and inside a
   domain the fewest nodes that hold it (most slots first), so members share nodes and links.

The estimate only orders the candidates; the scheduler then places the members for real (every
Filter and Score) inside the domain and tries the next one if that fails.

The cost model (:class:`CostModel`): a cost per level, from the tightest (same node) to the loosest
(same zone), and a cost across zones; the cost between two nodes is the cost of the tightest level
whose label they share. :meth:`CostModel.cost_to` gives, for every node at once, the summed cost to
a set of peer nodes (NetworkLatency scores with it), and :meth:`CostModel.worst_pairwise` the worst
cost between any two members of a placed gang (what explain and the ``Scheduled`` event report).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field

from shoal.core.framework.gangplan import Domain, GangPlan, GangTrial
from shoal.core.framework.profile import ArgsModel
from shoal.core.state.nodetable import PODS, NodeTable

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

HOSTNAME = "kubernetes.io/hostname"
CLIQUE = "nvidia.com/gpu.clique"
RACK = "topology.shoal.dev/rack"
BLOCK = "topology.shoal.dev/block"
ZONE = "topology.kubernetes.io/zone"

#: the cost of each level, tightest first, and across zones (relative units: only the order and
#: ratios matter; an NVLink clique is cheaper than a rack's top-of-rack switch, and so on)
DEFAULT_LEVEL_COSTS: tuple[tuple[str, float], ...] = (
    (HOSTNAME, 1.0),
    (CLIQUE, 2.0),
    (RACK, 4.0),
    (BLOCK, 8.0),
    (ZONE, 16.0),
)
DEFAULT_ACROSS_COST = 32.0


class LevelCost(ArgsModel):
    """One level of a profile's cost model (plugin args of TopologyPlacement and NetworkLatency)."""

    key: str = Field(min_length=1, max_length=317, description="A node label key: one topology level.")
    cost: float = Field(gt=0, description="The network cost between two nodes that share this label's value.")


def default_level_costs() -> list[LevelCost]:
    return [LevelCost(key=k, cost=c) for k, c in DEFAULT_LEVEL_COSTS]


def cost_model(levels: Sequence[LevelCost], across: float) -> CostModel:
    return CostModel(tuple((lc.key, lc.cost) for lc in levels), across)


_NO_LIMIT = np.iinfo(np.int64).max // 4


def member_shape(requests: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The largest request per resource among the members (so a slot holds any member)."""
    shape: dict[str, int] = {}
    for req in requests:
        for resource, amount in req.items():
            if amount > 0 and amount > shape.get(resource, 0):
                shape[resource] = amount
    return shape


def member_floor(requests: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The smallest request per resource among the members (0 for a resource one of them does not
    ask): slots of this shape overstate room, so a domain is never ruled out that could hold them."""
    floor: dict[str, int] | None = None
    for req in requests:
        asked = {r: a for r, a in req.items() if a > 0}
        floor = asked if floor is None else {r: min(a, asked[r]) for r, a in floor.items() if r in asked}
    return floor or {}


def member_slots(table: NodeTable, shape: Mapping[str, int], eligible: BoolArray) -> IntArray:
    """How many members of ``shape`` fit on each node now (0 where not ``eligible``)."""
    n = table.size
    slots: IntArray = np.full(n, _NO_LIMIT, dtype=np.int64)
    pods_free = table.allocatable[PODS, :n] - table.requested[PODS, :n]
    np.minimum(slots, pods_free, out=slots)
    for resource, amount in shape.items():
        if amount <= 0 or resource == "pods":
            continue
        np.minimum(slots, table.free(resource) // amount, out=slots)
    np.clip(slots, 0, None, out=slots)
    slots[~(eligible[:n] & table.valid_rows())] = 0
    return slots


@dataclass(frozen=True)
class LevelPlan:
    """The domains of one level that can hold the gang, tightest fit first, and the roomiest one."""

    level: str
    fits: tuple[Domain, ...]
    best: Domain | None
    need: int
    #: why no domain of this level applies at all ("" if some node carries the label)
    absent: str = ""

    def shortfall(self) -> str:
        """Why this level cannot hold the gang, naming the best domain's shortfall."""
        if self.absent:
            return self.absent
        if self.best is None:
            return f"no node with label {self.level} can run a member"
        short = self.need - self.best.room
        return (
            f"the best {self.level} domain, {self.best.value}, has room for {self.best.room} "
            f"of the {self.need} member(s) needed (short {short})"
        )


def _packed(rows: IntArray, slots: IntArray, need: int) -> BoolArray | None:
    """The fewest of ``rows`` whose slots hold ``need`` (most slots first, then row order)."""
    order = rows[np.lexsort((rows, -slots[rows]))]
    total = np.cumsum(slots[order])
    if len(total) == 0 or total[-1] < need:
        return None
    k = int(np.searchsorted(total, need)) + 1
    mask: BoolArray = np.zeros(len(slots), dtype=bool)
    mask[order[:k]] = True
    return mask


def plan_level(
    table: NodeTable, key: str, slots: IntArray, need: int, pinned: str | None = None, limit: int = 3
) -> LevelPlan:
    """The domains of level ``key`` that hold ``need`` members by ``slots``, least room first (at
    most ``limit``), and the roomiest domain. ``pinned``: members already placed share this value,
    so only it may be chosen."""
    col = table.label_column(key)
    codes = table.label_values(key)
    if not codes or not (col >= 0).any():
        return LevelPlan(key, (), None, need, absent=f"no node has the label {key}")
    names = {code: value for value, code in codes.items()}
    has = col >= 0
    if pinned is not None:
        has &= col == table.label_code(key, pinned)
    room = np.bincount(col[has], weights=slots[has], minlength=len(codes)).astype(np.int64)
    present = np.bincount(col[has], minlength=len(codes)) > 0
    if not present.any():
        return LevelPlan(key, (), None, need)
    best_code = int(np.argmax(np.where(present, room, -1)))
    fitting = np.flatnonzero(present & (room >= max(need, 1)))
    fitting = fitting[np.lexsort((fitting, room[fitting]))][:limit]  # least room first
    all_rows = np.arange(len(col))
    fits = []
    for code in fitting:
        rows = has & (col == code)
        fits.append(
            Domain(
                key,
                names[int(code)],
                rows,
                int(room[code]),
                int(rows.sum()),
                _packed(all_rows[rows], slots, need),
            )
        )
    best_rows = has & (col == best_code)
    best = Domain(key, names[best_code], best_rows, int(room[best_code]), int(best_rows.sum()))
    return LevelPlan(key, tuple(fits), best, need)


def pinned_value(table: NodeTable, key: str, rows: Sequence[int]) -> tuple[str | None, bool]:
    """The value of ``key`` the already-placed members' ``rows`` share: ``(value, True)``;
    ``(None, True)`` when none is placed; ``(None, False)`` when they span domains (or lack it)."""
    if not rows:
        return None, True
    col = table.label_column(key)
    values = {int(col[r]) for r in rows}
    if len(values) != 1 or -1 in values:
        return None, False
    code = values.pop()
    value = next(v for v, c in table.label_values(key).items() if c == code)
    return value, True


@dataclass(frozen=True)
class CostModel:
    """The network cost between nodes, by the tightest topology level they share."""

    levels: tuple[tuple[str, float], ...] = DEFAULT_LEVEL_COSTS
    across: float = DEFAULT_ACROSS_COST

    def pair_cost(self, table: NodeTable, a: int, b: int) -> float:
        if a == b:
            return min((c for k, c in self.levels if k == HOSTNAME), default=0.0)
        for key, cost in self.levels:
            col = table.label_column(key)
            if col[a] >= 0 and col[a] == col[b]:
                return cost
        return self.across

    def cost_to(self, table: NodeTable, peers: Mapping[int, int]) -> FloatArray:
        """For every row, the summed cost to ``peers`` (row -> how many peer pods on it).

        Levels are taken as nested (a rack inside one block inside one zone): the peers sharing a
        row's domain at a level, minus those already counted at a tighter level, cost that level's
        price; the rest cost ``across``. One ``bincount`` per level: no loop over peers."""
        n = table.size
        total_peers = sum(peers.values())
        cost: FloatArray = np.zeros(n, dtype=np.float64)
        if total_peers == 0:
            return cost
        counted: FloatArray = np.zeros(n, dtype=np.float64)
        peer_rows = np.fromiter(peers.keys(), dtype=np.int64, count=len(peers))
        weights = np.fromiter(peers.values(), dtype=np.float64, count=len(peers))
        for key, price in self.levels:
            if key == HOSTNAME:
                near: FloatArray = np.zeros(n, dtype=np.float64)
                np.add.at(near, peer_rows, weights)
            else:
                col = table.label_column(key)
                codes = col[peer_rows]
                keep = codes >= 0
                per_code = np.bincount(
                    codes[keep], weights=weights[keep], minlength=int(col.max(initial=-1)) + 1
                )
                near = np.where(col >= 0, per_code[np.clip(col, 0, None)] if len(per_code) else 0.0, 0.0)
            near = np.maximum(near, counted)  # nested levels: never fewer than at a tighter level
            cost += (near - counted) * price
            counted = near
        cost += (total_peers - counted) * self.across
        return cost

    def worst_pairwise(self, table: NodeTable, rows: Sequence[int]) -> tuple[float, str]:
        """The worst cost between two of ``rows`` and the tightest level holding them all."""
        unique = sorted(set(rows))
        if len(unique) <= 1:
            return self.pair_cost(table, unique[0], unique[0]) if unique else 0.0, HOSTNAME
        for key, cost in self.levels:
            if key == HOSTNAME:
                continue
            col = table.label_column(key)
            values = {int(col[r]) for r in unique}
            if len(values) == 1 and -1 not in values:
                return cost, key
        return self.across, "across zones"


def plan_gang(
    table: NodeTable,
    levels: Sequence[str],
    *,
    required: bool,
    slots: IntArray,
    need: int,
    placed_rows: Sequence[int] = (),
    per_level: int = 3,
    max_trials: int = 8,
    packed: bool = True,
) -> GangPlan:
    """The domains to try for a gang, tightest level first (see the module docstring); a preferred
    constraint ends with "anywhere", a required one with its level's domains only. ``packed``:
    try a domain's fewest nodes before the whole domain."""
    trials: list[GangTrial] = []
    skipped: list[tuple[str, str]] = []
    for key in levels:
        pin, ok = pinned_value(table, key, placed_rows)
        if not ok:
            skipped.append((key, f"the members already placed are not in one {key} domain"))
            continue
        plan = plan_level(table, key, slots, need, pin, per_level)
        if not plan.fits:
            skipped.append((key, plan.shortfall()))
            continue
        fell = "; ".join(f"{k} could not hold it: {why}" for k, why in skipped)
        for dom in plan.fits:
            note = f"in {dom.level} domain {dom.value}" + (f" (preferred {fell})" if fell else "")
            if packed and dom.packed is not None and int(dom.packed.sum()) < dom.nodes:
                trials.append(GangTrial(dom, dom.packed, note))
            trials.append(GangTrial(dom, dom.rows, note))
    trials = trials[:max_trials]
    if required:
        failure = ""
        if not trials:
            key, why = skipped[-1] if skipped else (levels[-1], "")
            failure = f"no {key} domain can hold its members (required): {why}"
        return GangPlan(tuple(trials), failure)
    why = "; ".join(f"{k}: {w}" for k, w in skipped) or "no domain's members could all be placed"
    trials.append(GangTrial(None, None, f"anywhere: no domain of {', '.join(levels)} could hold it ({why})"))
    return GangPlan(tuple(trials))
