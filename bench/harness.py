"""What bench/e2e.py's ``Bench`` (one scheduler on a fresh control plane) offers the scenario
modules (bench/e2e_topology.py, e2e_preemption.py, e2e_dra.py): one Protocol for all of them."""

from __future__ import annotations

from typing import Any, Protocol


class Harness(Protocol):
    @property
    def scheduler_name(self) -> str: ...

    async def create_all(
        self, objs: list[dict[str, Any]], concurrency: int = 48, label: str = ""
    ) -> dict[str, float]: ...

    async def wait_bound(self, names: list[str], timeout: float, label: str) -> bool: ...

    def bound_times(self) -> dict[str, float]: ...

    def bound_nodes(self) -> dict[str, str]: ...

    async def pod_names(self) -> set[str]: ...
