"""Reprieve by arithmetic: preemption's per-node victim choice when only resources can change.

:func:`shoal.plugins.defaultpreemption.evaluator.select_victims_on_node` asks "does the pod still
fit?" once per victim it tries to put back, each a PreFilter + Filter what-if
(:mod:`shoal.core.framework.whatif`). When the pod's PreFilter is shared (it reads nothing that
evictions change: ``whatif.shared_pre_filter``), no victim on the node holds a host port, the pod
asks for no GPU memory and every Filter of the profile is blind to the pods a node holds but for
resources (``Framework.arithmetic_what_ifs``, from the plugins' contracts), putting a victim back
can change only the node's *resources*: every other Filter's verdict is the one already taken with
every victim gone. Then each reprieve is a subtraction per requested resource (what the profile's
resource Filter checks: :class:`~shoal.core.state.room.Room`), with the nominated pods of equal or
higher priority counted as the first pass of ``RunFilterPluginsWithNominatedPods`` does. Same
victims, same order, without the what-ifs: a dry run over a hundred candidate nodes goes from
hundreds of Filter runs to one per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shoal.core.framework.interfaces import BoolArray, Diagnosis
from shoal.core.framework.runtime import Framework
from shoal.core.state.nodetable import PODS
from shoal.core.state.objects import PodInfo
from shoal.core.state.room import TOO_MANY_PODS, Room, insufficient
from shoal.core.state.status import Status


def applies(fw: Framework, pod: PodInfo, victims_on_node: Sequence[PodInfo]) -> bool:
    """May the victims on this node be reprieved by arithmetic (see the module docstring)?"""
    return (
        fw.arithmetic_for(pod)
        and pod.gpu_memory_gb is None
        and not any(v.host_ports for v in victims_on_node)
    )


def resources_only_rows(fw: Framework, diagnosis: Diagnosis) -> BoolArray | None:
    """The rows only the resource Filter rejected. Filters run in order and a row is rejected by
    the first that says no, so every Filter before it passed; for a pod this module applies to, the
    Filters after it pass whatever the node holds (no volumes, spreading, pod affinity, GPU memory
    or topology domain to check). Such a row fits once enough resources are freed."""
    return diagnosis.rejected_by.get(fw.resource_filter.name) if fw.resource_filter is not None else None


def short_of(fw: Framework, short: Sequence[str]) -> Status:
    """The pod does not fit even with every victim gone: the resource Filter's reasons."""
    plugin = fw.resource_filter.name if fw.resource_filter is not None else ""
    return Status.unschedulable(*short, plugin=plugin)


def fits_after_evictions(
    fw: Framework, pod: PodInfo, row: int, victims: Sequence[Sequence[PodInfo]], nominated: Sequence[PodInfo]
) -> tuple[list[str], Callable[[int], bool]]:
    """Without touching the cache: why the pod does not fit ``row`` even with every victim gone
    (and the ``nominated`` pods counted), in the resource Filter's words ([] when it fits); and a
    ``reprieve(i)`` that puts victim ``i`` back if the pod still fits (True) or leaves it evicted."""
    room = Room(fw.handle.cache.table, pod, row, nominated)
    uses = [room.use(pods) for pods in victims]
    for use in uses:
        room.count(use, 1)

    def reprieve(i: int) -> bool:
        return room.put_back(uses[i])

    return room.short(), reprieve


def reprieve_by_resources(
    fw: Framework,
    pod: PodInfo,
    row: int,
    ordered: Sequence[tuple[object, Sequence[PodInfo]]],
    nominated: Sequence[PodInfo],
) -> Callable[[object], bool]:
    """A ``reprieve(victim) -> kept`` for victims of ``ordered`` (victim, its pods on this node),
    starting from every victim gone (the cache as it is now) and ``nominated`` counted."""
    room = Room(fw.handle.cache.table, pod, row, nominated)
    uses = {id(victim): room.use(pods) for victim, pods in ordered}

    def reprieve(victim: object) -> bool:
        return room.put_back(uses[id(victim)])

    return reprieve


@dataclass(frozen=True)
class PlainRun:
    """What one dry run's :func:`select_plain` calls share: the resources the preemptor asks for
    (and the pod count), their table rows, and the resource Filter's words for each."""

    names: tuple[str, ...]
    need: tuple[int, ...]
    rows: tuple[int, ...]
    labels: tuple[str, ...]


def plain_run(fw: Framework, pod: PodInfo, pdbs: Sequence[object]) -> PlainRun | None:
    """The shared part of :func:`select_plain` for ``pod``'s dry run, or None when it cannot
    apply to any node (PodDisruptionBudgets exist, GPU memory asked, a Filter not victim-blind)."""
    if pdbs or pod.gpu_memory_gb is not None or not fw.arithmetic_for(pod):
        return None
    table = fw.handle.cache.table
    names = tuple(r for r, amount in pod.requests.items() if amount > 0)
    rows = tuple(table.resource_row(r) for r in names)
    return PlainRun(
        names,
        (*(pod.requests[r] for r in names), 1),
        (*rows, PODS),
        (*(insufficient(table.resources[i]) for i in rows), TOO_MANY_PODS),
    )


def select_plain(
    fw: Framework, pod: PodInfo, row: int, node: str, run: PlainRun, nominated: Sequence[PodInfo]
) -> tuple[list[PodInfo], list[str]] | None:
    """``select_victims_on_node`` for a row only the resource Filter rejected, when every candidate
    victim is a pod of its own (no gang whose PodGroup exists) and holds no host port, and no PDB
    exists: the same victims as the general arithmetic path (in ``importance`` order, each
    reprieved if the pod still fits), without Victim objects or room dicts. Returns (victims
    most important first, []), or ([], the resource Filter's reasons) when the pod does not fit even
    with them all gone; None when it does not apply (or there is nothing to evict)."""
    cache = fw.handle.cache
    pods = [p for p in cache.pods_on(node) if p.priority < pod.priority]
    if not pods:
        return None
    for p in pods:
        if p.host_ports or (p.group_key is not None and p.group_key in cache.pod_groups):
            return None
    pods.sort(key=lambda p: (-p.priority, p.start_time if p.start_time is not None else math.inf))
    table = cache.table
    free = [int(table.allocatable[i, row] - table.requested[i, row]) for i in run.rows]
    for other in nominated:
        free = [f - u for f, u in zip(free, (*(other.requests.get(r, 0) for r in run.names), 1), strict=True)]
    uses = [(*(p.requests.get(r, 0) for r in run.names), 1) for p in pods]
    for use in uses:
        free = [f + u for f, u in zip(free, use, strict=True)]
    short = [label for label, f, n in zip(run.labels, free, run.need, strict=True) if f < n]
    if short:
        return [], short
    victims: list[PodInfo] = []
    for p, use in zip(pods, uses, strict=True):
        trial = [f - u for f, u in zip(free, use, strict=True)]
        if all(t >= n for t, n in zip(trial, run.need, strict=True)):
            free = trial
        else:
            victims.append(p)
    return victims, []
