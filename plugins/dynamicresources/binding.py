"""Binding conditions (KEP 5007, beta and on in 1.37): a device a driver must prepare before a pod
may bind to it (attach a fabric GPU, program a switch) says so in its slice with
``bindingConditions`` (and ``bindingFailureConditions``). kube-scheduler 1.37's semantics (read,
not ported):

* the allocator searches the pools without such devices first, and copies a device's two lists
  into its allocation result; a device that ``bindsToNode`` pins the allocation to its node;
* PreBind writes the allocation (with ``allocationTimestamp``), then waits until, for every such
  device of the pod's claims, the driver has set all its binding conditions True in the claim's
  ``status.devices`` (the pod binds), one of its failure conditions True (``device binding
  failed: claim=c, reason=r, message="m"``), or ``bindingTimeout`` (DynamicResourcesArgs, 600 s)
  has passed since PreBind began (``device binding timeout: context deadline exceeded``) or since
  the claim's allocation was written (``device binding timeout: claim=c``): an Error, the pod
  goes back to the queue;
* on the next attempt, Filter finds the claim failed or timed out (``resourceclaim not available
  on the node``) and PostFilter deallocates it, so another device may be chosen.

kube-scheduler polls its informer every 5 s; shoal wakes on the claim's update from the watch.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from pydantic import field_validator

from shoal.core.framework.profile import ArgsModel
from shoal.core.state.status import SUCCESS, Status
from shoal.plugins.dynamicresources.objects import ResourceClaimInfo
from shoal.plugins.dynamicresources.store import DraStore

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """A Go duration (``600s``, ``10m``, ``1h30m``) in seconds; ValueError when malformed."""
    parts = _DURATION.findall(text)
    if not text or "".join(a + u for a, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 600s or 10m")
    return sum(float(amount) * _UNIT[unit] for amount, unit in parts)


class Args(ArgsModel):
    """DynamicResourcesArgs: how long PreBind waits for a device's binding conditions."""

    binding_timeout: str = "600s"

    @field_validator("binding_timeout")
    @classmethod
    def _at_least_a_second(cls, value: str) -> str:
        if parse_duration(value) < 1:
            raise ValueError("must be at least 1 second")
        return value

    @property
    def binding_timeout_seconds(self) -> float:
        return parse_duration(self.binding_timeout)


def now() -> str:
    """An ``allocationTimestamp``: when PreBind writes the allocation (binding conditions time
    out from it)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _written_at(claim: ResourceClaimInfo) -> float | None:
    if not claim.allocated_at:
        return None
    try:
        return datetime.fromisoformat(claim.allocated_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def timed_out(claim: ResourceClaimInfo, timeout: float, now: float | None = None) -> bool:
    """Upstream's isClaimTimeout: a claim with binding conditions whose allocation was written
    more than ``timeout`` seconds ago."""
    written = _written_at(claim)
    if written is None or not claim.has_binding_conditions:
        return False
    return written + timeout < (time.time() if now is None else now)


def broken(claim: ResourceClaimInfo, timeout: float) -> bool:
    """Filter's check of an allocated claim: its binding failed, or is not done and timed out."""
    if not claim.has_binding_conditions:
        return False
    ready, failed = claim.binding_state()
    return bool(failed) or (not ready and timed_out(claim, timeout))


def verdict(claims: Sequence[ResourceClaimInfo | None], timeout: float) -> Status | None:
    """Upstream's isPodReadyForBinding over the pod's claims as the watch has them: Success when
    all are ready, an Error when one failed or timed out, None while some are not ready."""
    ready = True
    for claim in claims:
        if claim is None:
            return Status.error("a claim of the pod is gone while waiting for its binding conditions")
        done, failed = claim.binding_state()
        if failed:
            return Status.error(failed)
        if not done and timed_out(claim, timeout):
            return Status.error(f"device binding timeout: claim={claim.name}")
        ready = ready and done
    return SUCCESS if ready else None


async def wait_for_binding(store: DraStore, keys: Sequence[str], timeout: float) -> Status:
    """Wait until the claims ``keys`` are ready for binding (or failed, or timed out), woken by
    every change of a claim the watch brings."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    changed = asyncio.Event()
    wake: Callable[[], None] = changed.set
    store.watchers.append(wake)
    try:
        while True:
            changed.clear()
            claims = [store.claims.get(k) for k in keys]
            found = verdict(claims, timeout)
            if found is not None:
                return found
            left = deadline - loop.time()
            if left <= 0:
                return Status.error("device binding timeout: context deadline exceeded")
            # a claim written in an earlier attempt times out before this wait does
            written = [w for c in claims if c is not None and (w := _written_at(c)) is not None]
            if written:
                left = min(left, max(min(written) + timeout - time.time(), 0.0) + 0.01)
            try:
                await asyncio.wait_for(changed.wait(), timeout=left)
            except TimeoutError:
                continue
    finally:
        store.watchers.remove(wake)
