"""Permit gates: the awaitable a pod waits on between its scheduling and binding cycles.

Why: Permit ``Wait`` is what makes gang scheduling possible — a gang's members are reserved but
held, and bind only when every member is admitted. A :class:`PermitGate` is an awaitable that any
plugin can ``allow`` (per waiting plugin) or ``reject`` (at once, for everyone); it closes itself
on timeout. The pod binds only when every plugin that said Wait has allowed it.

:class:`WaitingPods` is the registry plugins use to find gates (kube-scheduler's
``IterateOverWaitingPods``/``GetWaitingPod``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status

#: kube-scheduler caps a Permit wait at 15 minutes.
MAX_PERMIT_TIMEOUT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class GateResult:
    status: Status
    waited: float
    #: closed by its timeout (not allowed, nor rejected by a plugin)
    timed_out: bool = False

    @property
    def allowed(self) -> bool:
        return self.status.ok


class PermitGate:
    """One waiting pod. Resolved once: allowed (all pending plugins allowed), rejected, or timed out."""

    def __init__(self, pod: PodInfo, node: str, plugin_timeouts: dict[str, float]) -> None:
        if not plugin_timeouts:
            raise ValueError("a gate needs at least one waiting plugin")
        self.pod = pod
        self.node = node
        self._pending = {p: min(max(t, 0.0), MAX_PERMIT_TIMEOUT) for p, t in plugin_timeouts.items()}
        self.timeout = min(self._pending.values())
        self._future: asyncio.Future[Status] | None = None
        self._result: Status | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.started = time.monotonic()
        self.timed_out = False

    # -- plugins' side -------------------------------------------------------------------------
    @property
    def pending_plugins(self) -> frozenset[str]:
        return frozenset(self._pending)

    @property
    def done(self) -> bool:
        return self._result is not None

    @property
    def rejected(self) -> bool:
        return self._result is not None and not self._result.ok

    def allow(self, plugin: str) -> None:
        """``plugin`` admits the pod; the gate opens once no plugin is pending."""
        if self._result is not None:
            return
        self._pending.pop(plugin, None)
        if not self._pending:
            self._resolve(Status.success())

    def reject(self, plugin: str, message: str) -> None:
        """Close the gate: the pod is unreserved and requeued."""
        if self._result is None:
            self._resolve(Status(Code.UNSCHEDULABLE, (message,), plugin))

    # -- the binding cycle's side --------------------------------------------------------------
    def _resolve(self, status: Status) -> None:
        self._result = status
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._future is not None and not self._future.done():
            self._future.set_result(status)

    def _on_timeout(self) -> None:
        plugins = ", ".join(sorted(self._pending))
        self.timed_out = self._result is None
        self.reject(
            next(iter(sorted(self._pending)), ""),
            f"rejected due to timeout after waiting {self.timeout:g}s at plugin {plugins}",
        )

    def arm(self) -> None:
        """Start the timeout clock on the running loop (done when the gate is registered)."""
        loop = asyncio.get_running_loop()
        self.started = loop.time()
        if self._future is None:
            self._future = loop.create_future()
            if self._result is not None:
                self._future.set_result(self._result)
        if self._result is None and self._timer is None:
            self._timer = loop.call_later(self.timeout, self._on_timeout)

    async def wait(self) -> GateResult:
        self.arm()
        assert self._future is not None
        status = await asyncio.shield(self._future)
        return GateResult(status, asyncio.get_running_loop().time() - self.started, self.timed_out)

    def __await__(self) -> Generator[Any, None, GateResult]:
        return self.wait().__await__()


class WaitingPods:
    """All gates by pod uid."""

    def __init__(self) -> None:
        self._gates: dict[str, PermitGate] = {}

    def add(self, gate: PermitGate) -> None:
        self._gates[gate.pod.uid] = gate
        gate.arm()

    def get(self, uid: str) -> PermitGate | None:
        return self._gates.get(uid)

    def remove(self, uid: str) -> None:
        self._gates.pop(uid, None)

    def __iter__(self) -> Iterator[PermitGate]:
        return iter(list(self._gates.values()))

    def __len__(self) -> int:
        return len(self._gates)

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        gate = self._gates.get(uid)
        if gate is None:
            return False
        gate.reject(plugin, message)
        return True
