"""Reprieve by arithmetic: preemption's per-node victim choice when only resources can change.

:func:`shoal.core.preemption.select_victims_on_node` asks "does the pod still fit?" once per
victim it tries to put back, each a PreFilter + Filter what-if (:mod:`shoal.core.whatif`). When
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

from collections.abc import Callable, Sequence

from shoal.core.interfaces import BoolArray, Diagnosis
from shoal.core.nodetable import PODS
from shoal.core.objects import PodInfo
from shoal.core.runtime import Framework

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
        # a pod with claims never gets here (its PreFilter is not shared: whatif.shared_pre_filter);
        # for one without, DynamicResources' Filter passes every node whatever it holds
        "DynamicResources",
    }
)


def applies(fw: Framework, pod: PodInfo, victims_on_node: Sequence[PodInfo]) -> bool:
    """May the victims on this node be reprieved by arithmetic (see the module docstring)?"""
    return (
        pod.gpu_memory_gb is None
        and not any(v.host_ports for v in victims_on_node)
        and all(p.name in VICTIM_BLIND_FILTERS for p in fw.filter)
        and not _ignores_resources(fw)
    )


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


def fits_after_evictions(
    fw: Framework, pod: PodInfo, row: int, victims: Sequence[Sequence[PodInfo]], nominated: Sequence[PodInfo]
) -> tuple[list[str], Callable[[int], bool]]:
    """Without touching the cache: why the pod does not fit ``row`` even with every victim gone
    (and the ``nominated`` pods counted), in NodeResourcesFit's words ([] when it fits); and a
    ``reprieve(i)`` that puts victim ``i`` back if the pod still fits (True) or leaves it evicted."""
    table = fw.handle.cache.table
    wanted = [(table.resource_row(r), amount) for r, amount in pod.requests.items() if amount > 0]
    wanted.append((PODS, 1))
    free = {i: int(table.allocatable[i, row] - table.requested[i, row]) for i, _ in wanted}
    for other in nominated:
        _take(free, table.resource_index, other, 1)
    for pods in victims:
        for p in pods:
            _take(free, table.resource_index, p, -1)

    def reprieve(i: int) -> bool:
        for p in victims[i]:
            _take(free, table.resource_index, p, 1)
        if all(free[r] >= amount for r, amount in wanted):
            return True
        for p in victims[i]:
            _take(free, table.resource_index, p, -1)
        return False

    short = [
        "Too many pods" if r == PODS else f"Insufficient {table.resources[r]}"
        for r, amount in wanted
        if free[r] < amount
    ]
    return short, reprieve


def reprieve_by_resources(
    fw: Framework,
    pod: PodInfo,
    row: int,
    ordered: Sequence[tuple[object, Sequence[PodInfo]]],
    nominated: Sequence[PodInfo],
) -> Callable[[object], bool]:
    """A ``reprieve(victim) -> kept`` for victims of ``ordered`` (victim, its pods on this node),
    starting from every victim gone (the cache as it is now) and ``nominated`` counted."""
    table = fw.handle.cache.table
    wanted = [(table.resource_row(r), amount) for r, amount in pod.requests.items() if amount > 0]
    wanted.append((PODS, 1))
    free = {i: int(table.allocatable[i, row] - table.requested[i, row]) for i, _ in wanted}
    for other in nominated:
        _take(free, table.resource_index, other, 1)
    on_node = {id(victim): pods for victim, pods in ordered}

    def reprieve(victim: object) -> bool:
        pods = on_node[id(victim)]
        for p in pods:
            _take(free, table.resource_index, p, 1)
        if all(free[i] >= amount for i, amount in wanted):
            return True
        for p in pods:
            _take(free, table.resource_index, p, -1)
        return False

    return reprieve


def _take(free: dict[int, int], index: dict[str, int], pod: PodInfo, sign: int) -> None:
    free[PODS] = free.get(PODS, 0) - sign
    for resource, amount in pod.requests.items():
        i = index.get(resource)
        if i is not None and i in free:
            free[i] -= sign * amount
