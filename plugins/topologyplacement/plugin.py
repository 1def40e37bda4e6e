"""TopologyPlacement (Filter, gang placement): a gang goes inside one domain of a topology level.

A PodGroup may require that its members share one value of a node label, or prefer a list of
levels, tightest first (clique -> rack -> block -> zone), falling back level by level when the
tighter one cannot hold it:

* scheduler-plugins' PodGroup: annotations ``shoal.dev/topology-required: <key>`` and / or
  ``shoal.dev/topology-preferred: <key>,<key>,...``;
* native ``scheduling.k8s.io`` PodGroup: ``spec.schedulingConstraints.topology[0].key``
  (required, as kube-scheduler's TopologyAwareWorkloadScheduling reads it);
* a PodGroup that declares neither gets this plugin's ``defaultRequired`` / ``defaultPreferred``.

The gang cycle asks :meth:`TopologyPlacement.gang_placements` for the domains to try (see
:mod:`shoal.plugins.topologyplacement.domains`: room estimated for all nodes at once, least room first,
fewest nodes inside the domain first), then places the members for real with the domain in the cycle state;
:meth:`filter_nodes` rejects every node outside it. Members already placed pin the domain, as
upstream's TopologyPlacementGenerator does. A pod that is not in a constrained gang passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from shoal.core.framework.contract import Contract, Evaluates
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gangplan import GANG_DOMAIN_STATE, GangPlan, GangTrial
from shoal.core.framework.interfaces import BoolArray, EventKind, EventRegistration, Handle, Rejection
from shoal.core.framework.profile import ArgsModel, PluginEntry
from shoal.core.state import fidelity
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.core.state.status import Code
from shoal.plugins.topologyplacement.domains import (
    DEFAULT_ACROSS_COST,
    CostModel,
    LevelCost,
    cost_model,
    default_level_costs,
    member_floor,
    member_shape,
    member_slots,
    plan_gang,
)

NAME = "TopologyPlacement"
REASON = "node(s) were outside the pod group's topology domain"


class Args(ArgsModel):
    default_required: str | None = Field(
        default=None,
        description="Node label key every gang without its own constraint must share one value of.",
    )
    default_preferred: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Node label keys, tightest first, tried for gangs without their own constraint.",
    )
    domains_per_level: int = Field(
        default=3, ge=1, le=16, description="Domains of one level tried for real before the next level."
    )
    max_trials: int = Field(default=8, ge=1, le=64, description="Placement attempts per gang cycle, at most.")
    level_costs: list[LevelCost] = Field(
        default_factory=default_level_costs,
        max_length=16,
        description="Network cost per level, tightest first (explain and events report a gang's worst pair).",
    )
    across_cost: float = Field(
        default=DEFAULT_ACROSS_COST, gt=0, description="Cost between nodes sharing no level."
    )

    def cost_model(self) -> CostModel:
        return cost_model(self.level_costs, self.across_cost)


def levels_of(group: PodGroupInfo, args: Args) -> tuple[tuple[str, ...], bool]:
    """The levels to try for ``group`` (tightest first) and whether the last one is required."""
    if group.topology_levels:
        return group.topology_levels, group.topology_required is not None
    if args.default_required:
        preferred = tuple(k for k in args.default_preferred if k != args.default_required)
        return (*preferred, args.default_required), True
    return tuple(args.default_preferred), False


class TopologyPlacement:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.cache = handle.cache
        self.costs = args.cost_model()

    def constrained(self, group: PodGroupInfo) -> bool:
        return bool(levels_of(group, self.args)[0])

    def gang_placements(
        self, group: PodGroupInfo, members: Sequence[PodInfo], feasible: BoolArray, need: int
    ) -> GangPlan:
        """Where to try the gang's ``need`` members, in order (one trial: anywhere, if unconstrained)."""
        levels, required = levels_of(group, self.args)
        if not levels:
            return GangPlan((GangTrial(None, None, ""),))
        table = self.cache.table
        slots = member_slots(table, member_shape(m.requests for m in members), feasible)
        nodes = (self.cache.placed_node(m.uid) for m in self.cache.group_members(group.key))
        placed = [r for n in nodes if n is not None and (r := table.index.get(n)) is not None]

        def plan(count: int) -> GangPlan:
            return plan_gang(
                table,
                levels,
                required=required,
                slots=slots,
                need=max(count, 1),
                placed_rows=placed,
                per_level=self.args.domains_per_level,
                max_trials=self.args.max_trials,
            )

        # a domain for every pending member first (extra members then fit beside the quorum);
        # if no domain holds them all, one for the quorum
        whole = plan(max(need, len(members)))
        if len(members) > need and not any(t.domain is not None for t in whole.trials):
            return plan(need)
        return whole

    def level_placements(
        self, level: str, members: Sequence[PodInfo], feasible: BoolArray, need: int, placed: Sequence[int]
    ) -> GangPlan:
        """A CompositePodGroup level's domains: every domain of ``level`` with room for ``need``
        of its smallest member (an estimate that never rules out a domain that could hold the
        subtree, whatever its children's shapes), least room first, each tried whole: its
        children pick their own domains inside, with their own Filters."""
        table = self.cache.table
        domains = max(len(table.label_values(level)), 1)
        return plan_gang(
            table,
            (level,),
            required=True,
            slots=member_slots(table, member_floor(m.requests for m in members), feasible),
            need=max(need, 1),
            placed_rows=placed,
            per_level=domains,
            max_trials=domains,
            packed=False,
        )

    def describe(self, group: PodGroupInfo, trial: GangTrial, rows: Sequence[int]) -> str:
        cost, level = self.costs.worst_pairwise(self.cache.table, rows)
        nodes = len(set(rows))
        where = f"pod group {group.key} {trial.note}, on {nodes} node(s)"
        return f"{where}, worst pairwise network cost {cost:g} ({level})"

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, candidates: BoolArray
    ) -> Sequence[Rejection]:
        trial: GangTrial | None = state.read(GANG_DOMAIN_STATE)
        if trial is None or trial.rows is None:
            return ()
        n = table.size
        inside = trial.rows[:n]
        if len(inside) < n:  # nodes added since the plan: outside the domain
            outside = candidates.copy()
            outside[: len(inside)] &= ~inside
        else:
            outside = ~inside
        return (Rejection(outside, REASON, Code.UNSCHEDULABLE),) if outside.any() else ()

    def events_to_register(self) -> Sequence[EventRegistration]:
        # a pod deleted or resized down frees room
        return (
            EventRegistration(
                EventKind.NODE_ADD | EventKind.NODE_UPDATE | EventKind.POD_DELETE | EventKind.POD_SCALE_DOWN
            ),
        )


def new(args: Args, handle: Handle) -> TopologyPlacement:
    return TopologyPlacement(args, handle)


#: what the core must know of this plugin (core/framework/contract.py)
CONTRACT = Contract(evaluates=(Evaluates(fidelity.GANG_TOPOLOGY),), filter_blind_to_pods=True)
ENTRY = PluginEntry(NAME, new, Args, TopologyPlacement, contract=CONTRACT)
