"""DynamicResources' Score (kube-scheduler 1.37, DRAPrioritizedList GA): a ``firstAvailable``
request allocated by its subrequest ``i`` scores ``8 - i`` on that node, normalised by the best
node; ``exactly`` requests and pods without claims score 0. NVIDIA-shaped objects (driver
``gpu.nvidia.com``, productName / memory as the DRA driver publishes them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import IntArray
from shoal.core.state.objects import PodInfo
from shoal.plugins.dynamicresources.objects import DRA_DECODERS
from shoal.plugins.dynamicresources.plugin import STATE_KEY, DynamicResources
from shoal.plugins.dynamicresources.store import DraStore
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node
from tests.unit.dra_objects import GPU, allocated, claim, claim_pod, device_class, gpu, node_slice
from tests.unit.helpers import cache_with, handle_for

BIG = f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'


def node(name: str) -> dict[str, Any]:
    obj = make_node(name)
    obj["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = name
    return obj


def h100(node_name: str, n: int = 8) -> dict[str, Any]:
    return node_slice(node_name, n, product="NVIDIA H100 80GB HBM3", memory="80Gi")


def a10(node_name: str, n: int = 8) -> dict[str, Any]:
    return node_slice(node_name, n, product="NVIDIA A10", memory="24Gi")


def first_available(name: str, *subrequests: tuple[str, tuple[str, ...]], count: int = 1) -> dict[str, Any]:
    """A claim with one request ``gpu`` whose ``firstAvailable`` lists ``(name, selectors)``."""
    obj = claim(name)
    obj["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": sub,
                    "deviceClassName": GPU,
                    "allocationMode": "ExactCount",
                    "count": count,
                    **({"selectors": [{"cel": {"expression": s}} for s in sels]} if sels else {}),
                }
                for sub, sels in subrequests
            ],
        }
    ]
    return obj


def big_or_small(name: str) -> dict[str, Any]:
    return first_available(name, ("big-gpu", (BIG,)), ("small-gpu", ()))


def user(name: str, *claim_names: str) -> PodInfo:
    return PodInfo.from_dict(
        claim_pod(name, [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claim_names)])
    )


class Scored:
    """PreFilter, Filter over every node, then Score and NormalizeScore over the nodes that fit."""

    def __init__(self, nodes: list[str], objects: list[dict[str, Any]], pod: PodInfo) -> None:
        cache = cache_with([node(n) for n in nodes])
        for obj in [device_class(), *objects]:
            cache.store(DraStore).apply(DRA_DECODERS[obj["kind"]](obj))
        self.plugin = DynamicResources(handle_for(cache))
        self.table, self.pod, self.state = cache.table, pod, CycleState()
        _, self.pre_filter = self.plugin.pre_filter(self.state, pod)
        rejected = np.zeros(self.table.n, dtype=bool)
        if not self.pre_filter.is_skip:
            assert self.pre_filter.ok, self.pre_filter
            candidates = self.table.valid_rows().copy()
            for rej in self.plugin.filter_nodes(self.state, pod, self.table, candidates):
                rejected |= rej.mask
        self.rows: IntArray = np.array(
            sorted(r for r in self.table.index.values() if not rejected[r]), dtype=np.int64
        )

    def raw(self) -> dict[str, int]:
        got = self.plugin.score_nodes(self.state, self.pod, self.table, self.rows)
        return {self.table.name(int(r)): int(s) for r, s in zip(self.rows, got, strict=True)}

    def normalised(self) -> dict[str, int]:
        raw = self.plugin.score_nodes(self.state, self.pod, self.table, self.rows)
        got = self.plugin.normalize_scores(self.state, self.pod, raw)
        return {self.table.name(int(r)): int(s) for r, s in zip(self.rows, got, strict=True)}


def no_search_at_score(monkeypatch: pytest.MonkeyPatch, plugin: DynamicResources) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("Score searched an allocation Filter already had (or did not need)")

    monkeypatch.setattr(plugin, "_allocate", refuse)


def test_the_node_where_the_first_alternative_fits_scores_100_the_other_87(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = Scored(["big", "small"], [h100("big"), a10("small"), big_or_small("c")], user("p", "c"))
    no_search_at_score(monkeypatch, s.plugin)  # Filter kept both nodes' allocations
    assert s.raw() == {"big": 8, "small": 7}
    assert s.normalised() == {"big": 100, "small": 87}  # (8 - 1) * 100 // 8


def test_exactly_only_claims_and_pods_without_claims_score_0_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = Scored(["big", "small"], [h100("big"), a10("small"), claim("c", count=2)], user("p", "c"))
    no_search_at_score(monkeypatch, s.plugin)
    assert s.normalised() == {"big": 0, "small": 0}
    s = Scored(["big", "small"], [h100("big"), a10("small")], PodInfo.from_dict(claim_pod("p", [])))
    assert s.pre_filter.is_skip  # no claims: no state at all
    assert s.normalised() == {"big": 0, "small": 0}


def test_two_claims_add_up() -> None:
    mixed = a10("mixed")
    mixed["spec"]["devices"][0] = gpu("mixed", 0, product="NVIDIA H100 80GB HBM3", memory="80Gi")
    objs = [h100("big"), a10("small"), mixed, big_or_small("a"), big_or_small("b")]
    s = Scored(["big", "small", "mixed"], objs, user("p", "a", "b"))
    assert s.raw() == {"big": 16, "small": 14, "mixed": 15}
    assert s.normalised() == {"big": 100, "small": 87, "mixed": 93}


def test_a_node_filter_did_not_keep_is_searched_at_score() -> None:
    objs = [h100("big"), a10("small"), big_or_small("c")]
    s = Scored(["big", "small"], objs, user("p", "c"))
    s.state.require(STATE_KEY).by_node.clear()  # as if Filter had run elsewhere
    assert s.raw() == {"big": 8, "small": 7}


def test_one_subrequest_scores_the_same_everywhere_without_a_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # one ExactCount alternative: Filter only counts free devices and keeps no allocation; the
    # only subrequest is what every fitting node's allocation uses, so Score needs none either
    only = first_available("c", ("small-gpu", ()), count=2)
    s = Scored(["big", "small", "full"], [h100("big"), a10("small"), a10("full", 1), only], user("p", "c"))
    no_search_at_score(monkeypatch, s.plugin)
    assert s.raw() == {"big": 8, "small": 8}
    assert s.normalised() == {"big": 100, "small": 100}


def test_a_claim_allocated_before_adds_by_its_recorded_request_names() -> None:
    held = big_or_small("held")
    held = allocated(held, "big", ["gpu-7"], reserved=("uid-other",))
    held["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/small-gpu"
    s = Scored(["big", "small"], [h100("big"), a10("small"), held, big_or_small("c")], user("p", "held", "c"))
    assert s.raw() == {"big": 7 + 8}  # held: small-gpu (7), c: big-gpu (8); small is not its node
    # only allocated claims: upstream keeps no per-node allocation, every node scores 0
    s = Scored(["big", "small"], [h100("big"), a10("small"), held], user("p", "held"))
    assert s.raw() == {"big": 0}


def test_the_simulator_places_first_available_pods_on_the_big_gpus_when_scored() -> None:
    profile = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "gpu-scheduler"},
        "spec": {
            "schedulerName": "gpu-scheduler",
            "plugins": {"score": [{"name": "DynamicResources", "weight": 2}]},
        },
    }
    objs: list[dict[str, Any]] = [
        profile,
        node("small"),
        node("big"),
        device_class(),
        a10("small"),
        h100("big"),
    ]
    for i in range(4):
        objs += [big_or_small(f"c{i}"), claim_pod(f"p{i}", [{"name": "gpu", "resourceClaimName": f"c{i}"}])]
    sim = Simulation(InMemoryCluster(objs))
    out = sim.run_sync()
    assert {o.node for o in out.values()} == {"big"}
    got = [a.request for c in sim.scheduler.cache.store(DraStore).claims.values() for a in c.allocated or ()]
    assert got == ["gpu/big-gpu"] * 4
