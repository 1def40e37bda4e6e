"""Where each scheduling attempt's outcome goes: events and conditions in the operator
(``kube/reporter.py``), a log in the simulator. The core itself does no I/O."""

from __future__ import annotations

from typing import Protocol

from shoal.core.objects import PodInfo


class Reporter(Protocol):
    """Where the outcome of each attempt goes (one call per pod per attempt, at most)."""

    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None: ...

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None: ...


class NullReporter:
    def scheduled(self, pod: PodInfo, node: str, profile: str, *, note: str = "") -> None:
        pass

    def unschedulable(self, pod: PodInfo, message: str, profile: str, *, error: bool = False) -> None:
        pass
