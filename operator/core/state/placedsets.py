"""Placed pods grouped by what inter-pod plugins look at: namespace, labels, terminating, affinity.

Why: InterPodAffinity and PodTopologySpread match every placed pod against selectors, once per
cycle. Pods of one Deployment, Job or StatefulSet share their labels and terms, so a cluster of
thousands of pods holds only a few dozen distinct *sets*; matching a selector once per set and
adding the set's per-node counts makes a cycle O(sets + nodes), not O(pods). The cache keeps the
sets up to date as pods are counted on and off nodes (bound or assumed).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import PodAffinity


@dataclass(frozen=True, slots=True)
class SetKey:
    namespace: str
    labels: frozenset[tuple[str, str]]
    terminating: bool
    affinity: PodAffinity


@dataclass(slots=True)
class PlacedSet:
    """Pods alike for inter-pod plugins, and how many of them each node holds."""

    key: SetKey
    labels: dict[str, str]
    nodes: dict[str, int] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.key.namespace

    @property
    def affinity(self) -> PodAffinity:
        return self.key.affinity


def _key(pod: PodInfo) -> SetKey:
    return SetKey(pod.namespace, frozenset(pod.labels.items()), pod.terminating, pod.pod_affinity)


class PlacedSets:
    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[SetKey, PlacedSet]] = {}
        self._affine: dict[SetKey, PlacedSet] = {}

    def add(self, pod: PodInfo, node: str) -> None:
        key = _key(pod)
        sets = self._by_namespace.setdefault(pod.namespace, {})
        placed = sets.get(key)
        if placed is None:
            placed = sets[key] = PlacedSet(key, dict(pod.labels))
            if not pod.pod_affinity.empty:
                self._affine[key] = placed
        placed.nodes[node] = placed.nodes.get(node, 0) + 1

    def remove(self, pod: PodInfo, node: str) -> None:
        key = _key(pod)
        sets = self._by_namespace.get(pod.namespace)
        placed = sets.get(key) if sets is not None else None
        if placed is None or sets is None:
            return
        left = placed.nodes.get(node, 0) - 1
        if left > 0:
            placed.nodes[node] = left
        else:
            placed.nodes.pop(node, None)
        if not placed.nodes:
            del sets[key]
            self._affine.pop(key, None)
            if not sets:
                del self._by_namespace[pod.namespace]

    def sets(self, namespaces: Iterable[str] | None = None) -> Iterator[PlacedSet]:
        """Every set, or those of ``namespaces``."""
        if namespaces is None:
            for sets in self._by_namespace.values():
                yield from sets.values()
            return
        for ns in namespaces:
            yield from self._by_namespace.get(ns, {}).values()

    def with_affinity(self, *, required_anti_only: bool = False) -> Iterator[PlacedSet]:
        """Sets whose pods have pod affinity or anti-affinity terms (only required anti-affinity)."""
        for placed in self._affine.values():
            if not required_anti_only or placed.affinity.required_anti:
                yield placed
