"""The metrics the core reports, as a Protocol: the operator backs it with prometheus-client.

Names follow kube-scheduler's (see shoal.operator_app.metrics); the core only calls these hooks.
"""

from __future__ import annotations

from typing import Protocol


class Metrics(Protocol):
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt: result is scheduled, unschedulable or error."""

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        """Time spent in one extension point during one attempt."""

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        """Time one plugin took at one extension point (sampled: one cycle in ten)."""

    def permit_wait(self, result: str, seconds: float) -> None:
        """Time a pod waited at its Permit gate: result is allowed or rejected."""

    def pending(self, queue: str, count: int) -> None:
        """Pods pending in a queue: active, backoff, unschedulable, gated."""

    def preemption(self, victims: int) -> None:
        """One preemption attempt (DefaultPreemption's PostFilter); ``victims`` chosen, 0 if none."""

    def pod_scheduled(self, attempts: int, seconds: float) -> None:
        """A pod bound after ``attempts`` attempts, ``seconds`` after its first one (the SLI)."""

    def gang_timeout(self, profile: str) -> None:
        """A gang's members timed out waiting at Permit for their quorum (counted once a gang)."""


class NullMetrics:
    def attempt(self, result: str, profile: str, seconds: float) -> None:
        pass

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        pass

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        pass

    def permit_wait(self, result: str, seconds: float) -> None:
        pass

    def pending(self, queue: str, count: int) -> None:
        pass

    def preemption(self, victims: int) -> None:
        pass

    def pod_scheduled(self, attempts: int, seconds: float) -> None:
        pass

    def gang_timeout(self, profile: str) -> None:
        pass
