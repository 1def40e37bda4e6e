"""Gang preemption without I/O: victims chosen for a whole gang at once, only if it then fits whole.

kube-scheduler's per-pod preemption can evict pods for one member of a gang that still does not
fit (scheduler-plugins #581); shoal's DefaultPreemption never preempts for a single member.
Instead, when a gang's cycle fails its quorum, the framework (``Framework.run_gang_post_filter``)
asks DefaultPreemption's ``post_filter_gang`` for the gang as one:

1. every victim of lower priority than the gang, cluster-wide, is taken away (a victim is a pod,
   or a whole lower-priority gang: :class:`~shoal.plugins.defaultpreemption.evaluator.Victim`);
2. the gang's pending members are placed one after another against that cache, each counted where
   it goes, until the quorum fits (:func:`place_gang`); if it does not, nothing is evicted;
3. victims are put back one at a time, most important first (those a PDB protects first), each
   kept when the quorum still fits: what stays out is a minimal set for the whole gang. The pass
   runs twice, the second time with victims on crowded nodes put back first among equals, and the
   set with fewer PDB violations, then fewer pods, is kept: greedy reprieve alone can clear many
   crowded nodes where clearing a few sparse ones would do.

As in :mod:`shoal.plugins.defaultpreemption.evaluator`, every what-if changes the cache's accounting for the
duration only. The cost is one placement of the quorum per victim; it is paid only when a gang of higher
priority than something running fails to fit.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gangplan import GANG_DOMAIN_STATE, GangTrial
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.schedule_one import schedule_pod
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.objects import PodGroupInfo, PodInfo
from shoal.plugins.defaultpreemption.evaluator import Evicted, Victim, split_by_pdb, victims_on

log = logging.getLogger("shoal.preemption")


def place_gang(
    fw: Framework, members: Sequence[PodInfo], need: int, domain: GangTrial | None = None
) -> dict[str, str] | None:
    """Where ``need`` of ``members`` would go now, one after another (uid -> node), or None;
    inside ``domain`` when given (TopologyPlacement's Filter reads it from the cycle state)."""
    cache = fw.handle.cache
    placed: dict[str, str] = {}
    try:
        for pod in members:
            if len(placed) >= need:
                break
            state = CycleState()
            if domain is not None:
                state.write(GANG_DOMAIN_STATE, domain)
            node = schedule_pod(fw, state, pod, what_if=True).node
            if node is not None:
                cache.recount(pod, node)
                placed[pod.uid] = node
        return dict(placed) if len(placed) >= need else None
    finally:
        for uid in placed:
            cache.uncount(uid)


def all_victims(
    fw: Framework, group: PodGroupInfo, priority: int, domain: GangTrial | None = None
) -> list[Victim]:
    """Every victim of lower priority than ``priority`` on any node (of ``domain``, when given),
    each once, the gang's own members excepted."""
    seen: set[tuple[str, ...]] = set()
    out: list[Victim] = []
    table = fw.handle.cache.table
    rows = domain.rows if domain is not None else None
    for node, row in list(table.index.items()):
        if rows is not None and (row >= len(rows) or not rows[row]):
            continue
        for victim in victims_on(fw, node, priority):
            key = tuple(sorted(p.uid for p in victim.pods))
            if key in seen or any(p.group_key == group.key for p in victim.pods):
                continue
            seen.add(key)
            out.append(victim)
    return out


def gang_victims(
    fw: Framework,
    group: PodGroupInfo,
    members: Sequence[PodInfo],
    need: int,
    pdbs: Sequence[PDBInfo],
    domain: GangTrial | None = None,
) -> tuple[list[Victim], dict[str, str]] | None:
    """(the victims, where each member of the quorum then goes), or None when the gang does not
    fit even with every lower-priority pod gone; victims and members inside ``domain`` if given."""
    potential = all_victims(fw, group, min(m.priority for m in members), domain)
    crowded = _crowded_first(fw, potential)  # before anything is counted off its node
    evicted = Evicted(fw)
    try:
        for victim in potential:
            evicted.remove(victim)
        if place_gang(fw, members, need, domain) is None:
            return None
        best: list[Victim] | None = None
        for order in (Victim.importance, crowded):
            for victim in potential:  # every pass starts with every potential victim gone
                evicted.remove(victim)
            victims = _reprieve(fw, members, need, domain, sorted(potential, key=order), pdbs, evicted)
            if best is None or _cost(victims, pdbs) < _cost(best, pdbs):
                best = victims
        assert best is not None
        evicted.restore()
        for victim in best:
            evicted.remove(victim)
        where = place_gang(fw, members, need, domain)
        return (best, where) if where is not None else None
    finally:
        evicted.restore()


def _cost(victims: Sequence[Victim], pdbs: Sequence[PDBInfo]) -> tuple[int, int]:
    """PDB violations first, then pods evicted: the smaller the better."""
    violating, _ = split_by_pdb(victims, pdbs)
    return sum(n for _, n in violating), sum(len(v.pods) for v in victims)


def _crowded_first(fw: Framework, potential: Sequence[Victim]) -> Callable[[Victim], tuple[Any, ...]]:
    """Importance, but among equals the victims on the most crowded nodes first: reprieving them
    first clears the nodes that cost fewest evictions (a gang of whole-node members on nodes with
    one or two small pods each should evict the singles)."""
    cache = fw.handle.cache
    node = {p.uid: cache.placed_node(p.uid) for v in potential for p in v.pods}
    crowd = Counter(node.values())

    def key(victim: Victim) -> tuple[Any, ...]:
        most = max(crowd[node[p.uid]] for p in victim.pods)
        prio, group, size, start = victim.importance()
        return (prio, group, size, -most, start)

    return key


def _reprieve(
    fw: Framework,
    members: Sequence[PodInfo],
    need: int,
    domain: GangTrial | None,
    ordered: list[Victim],
    pdbs: Sequence[PDBInfo],
    evicted: Evicted,
) -> list[Victim]:
    """Victims put back in ``ordered`` order (PDB-protected ones first), each kept back when the
    quorum still fits: the ones that must go."""
    violating, others = split_by_pdb(ordered, pdbs)
    victims: list[Victim] = []
    for victim in [v for v, _ in violating] + others:
        evicted.add(victim)
        if place_gang(fw, members, need, domain) is None:
            evicted.remove(victim)
            victims.append(victim)
    return victims


def preemption_domains(
    fw: Framework, group: PodGroupInfo, members: Sequence[PodInfo], need: int, limit: int = 3
) -> list[GangTrial | None]:
    """Where a gang may preempt: anywhere (``[None]``) unless the profile's gang placer constrains
    it; then the domains that could hold it with every lower-priority pod gone, in the placer's
    order (at most ``limit``), and anywhere last only if its constraint is preferred, not required.
    So a topology constraint keeps every victim inside the one domain the gang then goes to."""
    placer = fw.gang_placer
    if placer is None or not placer.constrained(group):
        return [None]
    evicted = Evicted(fw)
    try:
        for victim in all_victims(fw, group, min(m.priority for m in members)):
            evicted.remove(victim)
        table = fw.handle.cache.table
        plan = placer.gang_placements(group, members, table.valid_rows().copy(), need)
    finally:
        evicted.restore()
    domains: list[GangTrial | None] = []
    seen: set[tuple[str, str]] = set()
    for trial in plan.trials:
        dom = trial.domain
        if dom is None:
            domains.append(None)  # preferred: anywhere, last
        elif (dom.level, dom.value) not in seen and len(seen) < limit:
            seen.add((dom.level, dom.value))
            domains.append(GangTrial(dom, dom.rows, trial.note))  # the whole domain
    return domains


def best_gang_victims(
    fw: Framework, group: PodGroupInfo, members: Sequence[PodInfo], need: int, pdbs: Sequence[PDBInfo]
) -> tuple[list[Victim], dict[str, str]] | None:
    """The fewest victims over :func:`preemption_domains` (the earlier domain on a tie); a domain
    that needs no victim at all wins at once."""
    best: tuple[list[Victim], dict[str, str]] | None = None
    for domain in preemption_domains(fw, group, members, need):
        if domain is None and best is not None:
            break  # anywhere only when no domain works
        found = gang_victims(fw, group, members, need, pdbs, domain)
        if found is None:
            continue
        count = sum(len(v.pods) for v in found[0])
        if best is None or count < sum(len(v.pods) for v in best[0]):
            best = found
        if count == 0:
            break
    return best
