"""Reprieve by arithmetic: preemption's per-node victim choice when only resources can change.

:func:`shoal.plugins.defaultpreemption.evaluator.select_victims_on_node` asks "does the pod still fit?" once
per victim it tries to put back, each a PreFilter + Filter what-if (:mod:`shoal.core.framework.whatif`). When
the pod's PreFilter is shared (it reads nothing that evictions change: ``whatif.shared_pre_filter``),
no victim on the node holds a host port, the pod asks for no GPU memory and the profile's Filters
are shoal's own, putting a victim back can change only the node's *resources*: every other
Filter's verdict is the one already taken with every victim gone. Then each reprieve is a
subtraction per requested resource (what NodeResourcesFit's Filter checks), with the nominated
pods of equal or higher priority counted as the first pass of
``RunFilterPluginsWithNominatedPods`` does. Same victims, same order, without the what-ifs: a dry
run over a hundred candidate nodes goes from hundreds of Filter runs to one per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shoal.core.framework.interfaces import BoolArray, Diagnosis
from shoal.core.framework.runtime import Framework
from shoal.core.state.nodetable import PODS
from shoal.core.state.objects import PodInfo

#: Filters whose verdict, for a pod whose PreFilter is shared, does not depend on which other pods
#: are on the node, besides NodeResourcesFit (resources: the arithmetic) and NodePorts (ports:
#: checked per victim) and GPUMemory (the pod asks for none)
VICTIM_BLIND_FILTERS = frozenset(
    {
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "GPUMemory",
        "PodTopologySpread",
        "InterPodAffinity",
        "TopologyPlacement",
        "NodeDeclaredFeatures",
        # a pod with claims never gets here (its PreFilter is not shared: whatif.shared_pre_filter);
        # for one without, DynamicResources' Filter passes every node whatever it holds
        "DynamicResources",
    }
)


def applies(fw: Framework, pod: PodInfo, victims_on_node: Sequence[PodInfo]) -> bool:
    """May the victims on this node be reprieved by arithmetic (see the module docstring)?"""
    return pod.gpu_memory_gb is None and not any(v.host_ports for v in victims_on_node) and profile_allows(fw)


def profile_allows(fw: Framework) -> bool:
    """Every Filter of the profile is blind to which other pods a node holds but for resources
    (and NodeResourcesFit counts every resource): the profile's half of :func:`applies`,
    asked per node of every dry run, so kept per Framework (a profile change builds a new one)."""
    hit = _ALLOWS.get(id(fw))
    if hit is None or hit[0] is not fw:
        if len(_ALLOWS) > 64:
            _ALLOWS.clear()
        allows = all(p.name in VICTIM_BLIND_FILTERS for p in fw.filter) and not _ignores_resources(fw)
        hit = _ALLOWS[id(fw)] = (fw, allows)
    return hit[1]


_ALLOWS: dict[int, tuple[Framework, bool]] = {}


def _ignores_resources(fw: Framework) -> bool:
    """NodeResourcesFit configured to ignore some extended resources: the arithmetic would not."""
    fit = fw.plugins.get("NodeResourcesFit")
    return bool(getattr(fit, "ignored", None) or getattr(fit, "ignored_groups", None))


def resources_only_rows(diagnosis: Diagnosis) -> BoolArray | None:
    """The rows only NodeResourcesFit rejected. Filters run in order and a row is rejected by the
    first that says no, so every Filter before it passed; for a pod this module applies to, the
    Filters after it pass whatever the node holds (no volumes, spreading, pod affinity, GPU
    memory or topology domain to check). Such a row fits once enough resources are freed."""
    return diagnosis.rejected_by.get("NodeResourcesFit")


class _Room:
    """The room one node has for what the pod asks (each resource it requests, and the pod count),
    with pods counted in or out by their requests: each victim's use is summed once."""

    def __init__(self, fw: Framework, pod: PodInfo, row: int, nominated: Sequence[PodInfo]) -> None:
        table = fw.handle.cache.table
        self.names = [r for r, amount in pod.requests.items() if amount > 0]
        self.need = [pod.requests[r] for r in self.names] + [1]
        rows = [table.resource_row(r) for r in self.names]
        self.labels = [f"Insufficient {table.resources[i]}" for i in rows] + ["Too many pods"]
        self.free = [int(table.allocatable[i, row] - table.requested[i, row]) for i in [*rows, PODS]]
        for other in nominated:
            self.count(self.use((other,)), -1)

    def use(self, pods: Sequence[PodInfo]) -> list[int]:
        return [sum(p.requests.get(r, 0) for p in pods) for r in self.names] + [len(pods)]

    def count(self, use: Sequence[int], sign: int) -> None:
        """``sign`` -1: pods that take room here (nominated); +1: pods evicted."""
        self.free = [f + sign * u for f, u in zip(self.free, use, strict=True)]

    def put_back(self, use: Sequence[int]) -> bool:
        """Count an evicted victim in again if the pod still fits (True); else leave it out."""
        trial = [f - u for f, u in zip(self.free, use, strict=True)]
        if all(t >= n for t, n in zip(trial, self.need, strict=True)):
            self.free = trial
            return True
        return False

    def short(self) -> list[str]:
        """Why the pod does not fit, in NodeResourcesFit's words ([] when it fits)."""
        return [label for label, f, n in zip(self.labels, self.free, self.need, strict=True) if f < n]


def fits_after_evictions(
    fw: Framework, pod: PodInfo, row: int, victims: Sequence[Sequence[PodInfo]], nominated: Sequence[PodInfo]
) -> tuple[list[str], Callable[[int], bool]]:
    """Without touching the cache: why the pod does not fit ``row`` even with every victim gone
    (and the ``nominated`` pods counted), in NodeResourcesFit's words ([] when it fits); and a
    ``reprieve(i)`` that puts victim ``i`` back if the pod still fits (True) or leaves it evicted."""
    room = _Room(fw, pod, row, nominated)
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
    room = _Room(fw, pod, row, nominated)
    uses = {id(victim): room.use(pods) for victim, pods in ordered}

    def reprieve(victim: object) -> bool:
        return room.put_back(uses[id(victim)])

    return reprieve


@dataclass(frozen=True)
class PlainRun:
    """What one dry run's :func:`select_plain` calls share: the resources the preemptor asks for
    (and the pod count), their table rows, and NodeResourcesFit's words for each."""

    names: tuple[str, ...]
    need: tuple[int, ...]
    rows: tuple[int, ...]
    labels: tuple[str, ...]


def plain_run(fw: Framework, pod: PodInfo, pdbs: Sequence[object]) -> PlainRun | None:
    """The shared part of :func:`select_plain` for ``pod``'s dry run, or None when it cannot
    apply to any node (PodDisruptionBudgets exist, GPU memory asked, a Filter not victim-blind)."""
    if pdbs or pod.gpu_memory_gb is not None or not profile_allows(fw):
        return None
    table = fw.handle.cache.table
    names = tuple(r for r, amount in pod.requests.items() if amount > 0)
    rows = tuple(table.resource_row(r) for r in names)
    return PlainRun(
        names,
        (*(pod.requests[r] for r in names), 1),
        (*rows, PODS),
        (*(f"Insufficient {table.resources[i]}" for i in rows), "Too many pods"),
    )


def select_plain(
    fw: Framework, pod: PodInfo, row: int, node: str, run: PlainRun, nominated: Sequence[PodInfo]
) -> tuple[list[PodInfo], list[str]] | None:
    """``select_victims_on_node`` for a row only NodeResourcesFit rejected, when every candidate
    victim is a pod of its own (no gang whose PodGroup exists) and holds no host port, and no PDB
    exists: the same victims as the general arithmetic path (in ``importance`` order, each
    reprieved if the pod still fits), without Victim objects or room dicts. Returns (victims
    most important first, []), or ([], NodeResourcesFit's reasons) when the pod does not fit even
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
