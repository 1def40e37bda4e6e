"""Delegated authentication and authorisation for the metrics endpoint, as kube-scheduler's.

A request's bearer token is checked with a TokenReview (``authentication.k8s.io/v1``); the user it
names is then checked with a SubjectAccessReview (``authorization.k8s.io/v1``) for the request's
non-resource path and verb (``get /metrics``). Both answers are cached for 10 s, allowed and
denied alike (kube's delegating authenticator and authorizer default to 10 s), so a Prometheus
scraping every 15 s costs the API server two small requests per scrape at most. An API server
that cannot answer is not cached: the request fails (401 or 500) and the next one asks again.

Needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the chart's ClusterRole).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal.kube.rest import RawClient, message_of

log = logging.getLogger("shoal.auth")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_TTL = 10.0
CACHE_SIZE = 1024


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Decision:
    """What to answer: 200 (allowed), 401 (no valid token), 403 (not allowed) or 500 (no answer)."""

    status: int
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


class ReviewError(Exception):
    """The API server did not answer a review (unreachable, or an unexpected status)."""


class _TTLCache:
    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._items: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> Any:
        hit = self._items.get(key)
        if hit is None:
            return None
        if self.clock() - hit[0] >= self.ttl:
            del self._items[key]
            return None
        return hit[1]

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = (self.clock(), value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class DelegatedAuth:
    """TokenReview + SubjectAccessReview with a short cache of both answers."""

    def __init__(
        self,
        raw: RawClient,
        *,
        ttl: float = CACHE_TTL,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.raw = raw
        self._users = _TTLCache(ttl, size, clock)  # sha256(token) -> User | False
        self._access = _TTLCache(ttl, size, clock)  # (user, path, verb) -> (allowed, reason)
        #: reviews sent to the API server (tests check the cache with it)
        self.reviews = 0

    async def check(self, token: str, path: str, verb: str) -> Decision:
        try:
            user = await self.authenticate(token)
        except ReviewError as exc:
            log.warning("cannot authenticate a request to %s: %s", path, exc)
            return Decision(401, "Unauthorized")
        if user is None:
            return Decision(401, "Unauthorized")
        try:
            allowed, reason = await self.authorize(user, path, verb)
        except ReviewError as exc:
            log.warning("cannot authorise %s to %s %s: %s", user.name, verb, path, exc)
            return Decision(500, "Internal Server Error: authorisation failed")
        if allowed:
            return Decision(200)
        why = f": {reason}" if reason else ""
        return Decision(403, f'forbidden: User "{user.name}" cannot {verb} path "{path}"{why}')

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None:
            return cached or None
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = await self._review(TOKEN_REVIEWS, body)
        user = _user_of(status) if status.get("authenticated") else None
        self._users.put(key, user or False)
        return user

    async def authorize(self, user: User, path: str, verb: str) -> tuple[bool, str]:
        key = (user, path, verb)
        cached = self._access.get(key)
        if cached is not None:
            return bool(cached[0]), str(cached[1])
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        status = await self._review(ACCESS_REVIEWS, body)
        answer = (bool(status.get("allowed")), str(status.get("reason", "")))
        self._access.put(key, answer)
        return answer

    async def _review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        try:
            code, reply = await self.raw.request("POST", path, body, timeout=10.0)
        except Exception as exc:  # unreachable, timed out, aiohttp's client errors
            raise ReviewError(f"{type(exc).__name__}: {exc}") from exc
        if code != 201 and code != 200:
            raise ReviewError(f"HTTP {code}: {message_of(reply)}")
        status = reply.get("status") if isinstance(reply, dict) else None
        return status if isinstance(status, dict) else {}


def _user_of(status: dict[str, Any]) -> User | None:
    info = status.get("user") or {}
    name = str(info.get("username") or "")
    if not name:
        return None
    extra = {str(k): [str(x) for x in v] for k, v in (info.get("extra") or {}).items()}
    return User(name, str(info.get("uid") or ""), tuple(str(g) for g in info.get("groups") or ()), extra)
