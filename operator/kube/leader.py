"""Leader election with a ``coordination.k8s.io/v1`` Lease, as kube-scheduler does.

Why not kopf's peering: it pauses handlers of lower-priority operators, which would also stop the
followers' caches from warming. Why not kubernetes-asyncio's ``leaderelection``: it neither
releases the Lease on shutdown (a graceful stop would cost a whole lease duration of downtime) nor
writes MicroTime with the six fractional digits the API server requires.

Semantics follow client-go: a candidate takes the Lease when it is free, held by itself, or not
renewed for ``lease_duration`` *as observed locally* (no cross-machine clock comparison); updates
carry the resourceVersion, so two candidates can never both win. The leader renews every
``retry_period``; if it cannot renew for ``renew_deadline`` it steps down. On stop it releases the
Lease so a follower takes over at its next retry.

One departure from client-go, for faster failover: a follower that will see the Lease lapse before
its next retry polls again right at that moment, not up to ``retry_period`` later. A leader
SIGKILLed is replaced ``lease_duration`` after the follower last saw it renew (plus one call),
not up to ``lease_duration + retry_period``.

Every Lease call is bounded in time and every failure (HTTP error, dropped connection, timeout,
bad JSON) counts as "not renewed": the campaign never ends on a network blip, and a leader whose
calls hang still steps down once ``renew_deadline`` has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from shoal.kube.wire import micro_time

log = logging.getLogger("shoal.leader")


class LeaseElector:
    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        #: one Lease call may take this long; a renewal attempt is never longer than the deadline
        self.call_timeout = max(1.0, renew_deadline / 3)
        self.leading = False
        #: monotonic time of the last successful renewal (the renew deadline counts from it)
        self.last_renew = 0.0
        #: set when the Lease could not be renewed in time during a graceful drain
        self.lease_lost = asyncio.Event()
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        #: seconds until the Lease another candidate holds lapses, as last observed (None: unknown)
        self._lapses_in: float | None = None
        self.transitions = 0

    # -- one attempt ---------------------------------------------------------------------------
    def _record(self, lease: dict[str, Any], acquire: bool) -> dict[str, Any]:
        spec = dict(lease.get("spec") or {})
        now = micro_time()
        if acquire:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if spec.get("holderIdentity") else 0
            )
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = int(self.lease_duration)
        spec["renewTime"] = now
        return spec

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any) -> tuple[int, dict[str, Any]]:
        """One API call with the raw response: (HTTP status, JSON body or {}); (0, {}) on failure."""
        try:
            async with asyncio.timeout(self.call_timeout):
                resp = await method(*args, _preload_content=False)
                try:
                    body: dict[str, Any] = await resp.json() if resp.status < 300 else {}
                    return int(resp.status), body
                finally:
                    resp.release()
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            log.debug("lease call failed: %s: %s", type(exc).__name__, exc)
            return 0, {}

    async def try_acquire_or_renew(self) -> bool:
        self._lapses_in = None
        code, body = await self._call(self.api.read_namespaced_lease, self.name, self.namespace)
        if code == 404:
            new = {
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._record({}, True),
            }
            code, _ = await self._call(self.api.create_namespaced_lease, self.namespace, new)
            return 200 <= code < 300
        if not 200 <= code < 300:
            return False
        spec = body.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        observed = (holder, str(spec.get("renewTime") or ""))
        now = time.monotonic()
        if observed != self._observed:
            self._observed, self._observed_at = observed, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder not in ("", self.identity) and now < self._observed_at + duration:
            self._lapses_in = self._observed_at + duration - now
            return False  # someone else holds a live lease
        new = {
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": body["metadata"]["resourceVersion"],
            },
            "spec": self._record(body, acquire=holder != self.identity),
        }
        code, _ = await self._call(self.api.replace_namespaced_lease, self.name, self.namespace, new)
        if 200 <= code < 300:
            self._observed, self._observed_at = (self.identity, new["spec"]["renewTime"]), now
            return True
        return False  # 409: another candidate won the race

    async def release(self) -> None:
        """Give the Lease up (on graceful shutdown) so a follower takes over at once."""
        if not self.leading:
            return
        self.leading = False
        code, body = await self._call(self.api.read_namespaced_lease, self.name, self.namespace)
        if code != 200 or (body.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        body["spec"].update(holderIdentity=None, leaseDurationSeconds=1, renewTime=micro_time())
        code, _ = await self._call(self.api.replace_namespaced_lease, self.name, self.namespace, body)
        if 200 <= code < 300:
            log.info("released lease %s/%s", self.namespace, self.name)

    def next_poll(self) -> float:
        """How long a candidate waits before trying again: ``retry_period``, or less when the
        Lease it saw held will lapse sooner (then just after that moment)."""
        lapses_in = self._lapses_in
        if lapses_in is None or lapses_in >= self.retry_period:
            return self.retry_period
        return max(lapses_in, 0.0) + 0.05

    # -- the loop ------------------------------------------------------------------------------
    async def run(
        self,
        on_started: Callable[[], Awaitable[None]],
        on_stopped: Callable[[bool], Awaitable[None]],
    ) -> None:
        """Campaign forever: lead while the Lease is renewed, follow otherwise.

        ``on_stopped(lost)``: ``lost`` is True when the Lease could not be renewed (another replica
        may already lead: stop at once), False on a graceful stop (the Lease is still ours until
        it is released right after).
        """
        try:
            while True:
                while not await self.try_acquire_or_renew():  # noqa: ASYNC110 - polling the Lease is the protocol
                    await asyncio.sleep(self.next_poll())
                self.leading = True
                self.last_renew = time.monotonic()
                self.lease_lost.clear()
                self.transitions += 1
                log.info("%s is now the leader (lease %s/%s)", self.identity, self.namespace, self.name)
                await on_started()
                await self._renew_loop()
                self.leading = False
                log.warning("%s lost the lease; stepping down", self.identity)
                await on_stopped(True)
        finally:
            if self.leading:
                # graceful stop: keep renewing while on_stopped drains, so the Lease never lapses
                # under bindings still in flight; then release it for a follower
                # if renewing fails past the deadline meanwhile, lease_lost tells the drain to stop
                keep = asyncio.get_running_loop().create_task(self._renew_loop(), name="renew-while-draining")
                keep.add_done_callback(lambda t: None if t.cancelled() else self.lease_lost.set())
                try:
                    await on_stopped(False)
                finally:
                    keep.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await keep
                await asyncio.shield(self.release())

    async def _renew_loop(self) -> None:
        """Renew every retry period; return once renew_deadline has passed since the last success.

        Each attempt is cut off at that deadline (as client-go bounds it with a context), so slow
        calls can never keep a leader leading past it.
        """
        while True:
            await asyncio.sleep(self.retry_period)
            left = self.last_renew + self.renew_deadline - time.monotonic()
            renewed = False
            if left > 0:
                try:
                    async with asyncio.timeout(left):
                        renewed = await self.try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
            if renewed:
                self.last_renew = time.monotonic()
            elif time.monotonic() - self.last_renew >= self.renew_deadline:
                return
