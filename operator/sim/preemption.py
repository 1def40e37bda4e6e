"""DefaultPreemption's effects in a simulation: nominations stored, victims deleted in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.core.state.objects import PodInfo


@dataclass
class Preemption:
    preemptor: str
    node: str
    victims: list[str]


class MemoryPreemptionExecutor:
    """DefaultPreemption's API effects in memory: the preemptor's ``nominatedNodeName`` is stored,
    victims are deleted at once (no kubelet, no grace period), after the cycle that chose them."""

    def __init__(
        self,
        pods: MutableMapping[str, dict[str, Any]],
        on_pod: Callable[[PodInfo], None],
        delete_pod: Callable[[str], None],
    ) -> None:
        """``pods``: the simulated cluster's stored pods by uid; ``on_pod`` tells the scheduler of
        a changed pod; ``delete_pod`` deletes one (and tells the scheduler)."""
        self.pods = pods
        self.on_pod = on_pod
        self.delete_pod = delete_pod
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
                self.delete_pod(victim.uid)
            done(True)

        asyncio.get_running_loop().call_soon(carry_out)

    def nominate(self, pod: PodInfo, node: str) -> None:
        stored = self.pods.get(pod.uid)
        if stored is not None and not (stored.get("spec") or {}).get("nodeName"):
            stored.setdefault("status", {})["nominatedNodeName"] = node or None
            self.on_pod(PodInfo.from_dict(stored))
