"""DefaultPreemption's effects in a simulation: nominations stored, victims deleted in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shoal.core.state.objects import PodInfo

if TYPE_CHECKING:
    from shoal.sim.cluster import Simulation


@dataclass
class Preemption:
    preemptor: str
    node: str
    victims: list[str]


class MemoryPreemptionExecutor:
    """DefaultPreemption's API effects in memory: the preemptor's ``nominatedNodeName`` is stored,
    victims are deleted at once (no kubelet, no grace period), after the cycle that chose them."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.preemptions: list[Preemption] = []

    def preempt(
        self,
        preemptor: PodInfo,
        node: str,
        victims: Sequence[PodInfo],
        unnominate: Sequence[PodInfo],
        done: Callable[[bool], None],
    ) -> None:
        self.preemptions.append(Preemption(preemptor.key, node, [v.key for v in victims]))

        def carry_out() -> None:
            self.nominate(preemptor, node)
            for pod in unnominate:
                self.nominate(pod, "")
            for victim in victims:
                self.sim.delete_pod(victim.uid)
            done(True)

        asyncio.get_running_loop().call_soon(carry_out)

    def nominate(self, pod: PodInfo, node: str) -> None:
        stored = self.sim.cluster.pods.get(pod.uid)
        if stored is not None and not (stored.get("spec") or {}).get("nodeName"):
            stored.setdefault("status", {})["nominatedNodeName"] = node or None
            self.sim.scheduler.on_pod(PodInfo.from_dict(stored))
