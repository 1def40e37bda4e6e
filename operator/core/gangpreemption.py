"""Gang preemption without I/O: victims chosen for a whole gang at once, only if it then fits whole.

kube-scheduler's per-pod preemption can evict pods for one member of a gang that still does not
fit (scheduler-plugins #581); shoal's DefaultPreemption never preempts for a single member.
Instead, when a gang's cycle fails its quorum, :func:`run_gang_post_filter` asks the profile's
PostFilter plugins that implement ``post_filter_gang`` (DefaultPreemption) for the gang as one:

1. every victim of lower priority than the gang, cluster-wide, is taken away (a victim is a pod,
   or a whole lower-priority gang: :class:`~shoal.core.preemption.Victim`);
2. the gang's pending members are placed one after another against that cache, each counted where
   it goes, until the quorum fits (:func:`place_gang`); if it does not, nothing is evicted;
3. victims are put back one at a time, most important first (those a PDB protects first), each
   kept when the quorum still fits: what stays out is a minimal set for the whole gang.

As in :mod:`shoal.core.preemption`, every what-if changes the cache's accounting for the duration
only. The cost is one placement of the quorum per victim; it is paid only when a gang of higher
priority than something running fails to fit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shoal.core.cyclestate import CycleState
from shoal.core.disruption import PDBInfo
from shoal.core.objects import PodGroupInfo, PodInfo
from shoal.core.placement import schedule_pod
from shoal.core.preemption import Evicted, Victim, split_by_pdb, victims_on
from shoal.core.runtime import Framework
from shoal.core.status import Status

log = logging.getLogger("shoal.preemption")


@runtime_checkable
class GangPostFilterPlugin(Protocol):
    name: str

    def post_filter_gang(self, group: PodGroupInfo, members: Sequence[PodInfo], need: int) -> Status:
        """When: a gang's cycle placed fewer than ``need`` of its pending ``members`` (nothing is
        held any more). Codes as PostFilter's; the message joins the members' FailedScheduling."""
        ...


def run_gang_post_filter(fw: Framework, group: PodGroupInfo, members: Sequence[PodInfo], need: int) -> str:
    """The first PostFilter plugin of the profile that handles gangs: its message (`` preemption:
    ...``, with a leading space), or ``""``. A plugin that raises costs the gang its preemption,
    never the cycle."""
    for plugin in fw.post_filter:
        if isinstance(plugin, GangPostFilterPlugin):
            try:
                status = plugin.post_filter_gang(group, members, need)
            except Exception:
                log.exception("post_filter_gang of %s for pod group %s failed", plugin.name, group.key)
                return ""
            return f" {status.message}" if status.message else ""
    return ""


def place_gang(fw: Framework, members: Sequence[PodInfo], need: int) -> dict[str, str] | None:
    """Where ``need`` of ``members`` would go now, one after another (uid -> node), or None."""
    cache = fw.handle.cache
    placed: dict[str, str] = {}
    try:
        for pod in members:
            if len(placed) >= need:
                break
            node = schedule_pod(fw, CycleState(), pod, what_if=True).node
            if node is not None:
                cache.recount(pod, node)
                placed[pod.uid] = node
        return dict(placed) if len(placed) >= need else None
    finally:
        for uid in placed:
            cache.uncount(uid)


def all_victims(fw: Framework, group: PodGroupInfo, priority: int) -> list[Victim]:
    """Every victim of lower priority than ``priority`` on any node, each once, the gang's own
    members excepted."""
    seen: set[tuple[str, ...]] = set()
    out: list[Victim] = []
    for node in list(fw.handle.cache.table.index):
        for victim in victims_on(fw, node, priority):
            key = tuple(sorted(p.uid for p in victim.pods))
            if key in seen or any(p.group_key == group.key for p in victim.pods):
                continue
            seen.add(key)
            out.append(victim)
    return out


def gang_victims(
    fw: Framework, group: PodGroupInfo, members: Sequence[PodInfo], need: int, pdbs: Sequence[PDBInfo]
) -> tuple[list[Victim], dict[str, str]] | None:
    """(the victims, where each member of the quorum then goes), or None when the gang does not
    fit even with every lower-priority pod gone."""
    potential = all_victims(fw, group, min(m.priority for m in members))
    evicted = Evicted(fw)
    try:
        for victim in potential:
            evicted.remove(victim)
        if place_gang(fw, members, need) is None:
            return None
        potential.sort(key=Victim.importance)
        violating, others = split_by_pdb(potential, pdbs)
        victims: list[Victim] = []
        for victim in [v for v, _ in violating] + others:
            evicted.add(victim)
            if place_gang(fw, members, need) is None:
                evicted.remove(victim)
                victims.append(victim)
        where = place_gang(fw, members, need)
        return (victims, where) if where is not None else None
    finally:
        evicted.restore()
