"""Small builders shared by the unit tests (no server, no event loop needed)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from shoal.core.framework.contract import evaluators
from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.gates import WaitingPods
from shoal.core.framework.interfaces import Handle
from shoal.core.state import fidelity
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.status import Status
from shoal.plugins.registry import load_registry
from shoal.sim.cluster import STORE_DECODERS, decode
from shoal.testing.objects import make_pod

#: field -> (plugin, point): what the built-in plugins declare they evaluate
BUILTIN_EVALUATORS = evaluators((e.name, e.contract) for e in load_registry(third_party=False).values())


#: every store class a built-in plugin reads
BUILTIN_STORES = tuple(
    dict.fromkeys(cls for e in load_registry(third_party=False).values() for cls in e.stores)
)


def store_objects(cache: ClusterCache, *objs: Mapping[str, Any], deleted: bool = False) -> None:
    """Give each API dict, decoded, to the store that takes it (as ``Scheduler.on_object`` does)."""
    for obj in objs:
        typed = decode(STORE_DECODERS, dict(obj))
        store = next(cls for cls in BUILTIN_STORES if isinstance(typed, cls.kinds))
        cache.store(store).apply(typed, deleted)


def refusal(fields: Collection[fidelity.FieldUse], at: Mapping[str, Collection[str]]) -> Status | None:
    """The never-silently-wrong check of a profile running the plugins ``at`` each point, with
    the built-in plugins' declarations."""
    return fidelity.check(fields, at, BUILTIN_EVALUATORS)


class NoBinder:
    async def bind(self, pod: PodInfo, node: str) -> Status:
        return Status()


def cache_with(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> ClusterCache:
    cache = ClusterCache()
    for node in nodes:
        cache.set_node(NodeSpec.from_dict(node))
    for i, pod in enumerate(pods):
        info = PodInfo.from_dict(pod)
        if info.uid == f"{info.namespace}/{info.name}":
            info.uid = f"uid-{i}-{info.name}"
        cache.upsert_pod(info)
    return cache


def handle_for(cache: ClusterCache) -> Handle:
    return Handle(cache, WaitingPods(), NoBinder(), lambda: 0.0)


def pod(name: str = "p", **kwargs: Any) -> PodInfo:
    info = PodInfo.from_dict(make_pod(name, **kwargs))
    info.uid = f"uid-{name}"
    return info


def rejected_names(table: NodeTable, rejections: Iterable[Any]) -> dict[str, set[str]]:
    """reason -> node names, over live rows."""
    out: dict[str, set[str]] = {}
    for rej in rejections:
        for row, hit in enumerate(rej.mask):
            if hit and table.names[row] is not None:
                out.setdefault(rej.reason, set()).add(table.name(row))
    return {k: v for k, v in out.items() if v}


def feasible(table: NodeTable, rejections: Iterable[Any]) -> set[str]:
    bad: set[str] = set()
    for names in rejected_names(table, rejections).values():
        bad |= names
    return set(table.index) - bad


def scores_by_name(table: NodeTable, scores: Any) -> dict[str, int]:
    rows = sorted(table.index.values())
    return {table.name(r): int(s) for r, s in zip(rows, scores, strict=True)}


def all_rows(table: NodeTable) -> Any:
    import numpy as np

    return np.array(sorted(table.index.values()), dtype=np.int64)


def state() -> CycleState:
    return CycleState()
