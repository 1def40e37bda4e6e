"""The fleet page served by ``shoal run --web`` (off by default; the chart's ``web.enabled``).

``/fleet`` is the page (:mod:`shoal.views.page`, live: it polls), ``/fleet/data.json`` the
document it draws (:mod:`shoal.views.fleet`), ``/fleet/explain?pod=NAMESPACE/NAME`` one pending
pod's whole explanation (every node, as ``shoal explain -o json``). They are served on the ports
that serve ``/metrics``, behind the same guard: on the secure port a bearer token the API server
authenticates and allows to ``get`` the path (401 / 403 otherwise); on the plain-HTTP port, if
one is asked for, to anyone who reaches it. Everything comes from the scheduler's own cache: no
viewer makes an API call, and the document is built again at most every ``ttl`` seconds however
many viewers poll it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from shoal.core.scheduling.scheduler import Scheduler
from shoal.views.explanation import explanation_doc
from shoal.views.fleet import FleetSnapshots
from shoal.views.page import POLL_MS, render

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: no caching by browsers or proxies, and no framing by other sites
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}


class FleetRoutes:
    def __init__(self, sched: Scheduler, *, ttl: float = POLL_MS / 1000, explain: int = 0) -> None:
        """``explain``: pending pods explained in each document; none by default, as the page
        asks ``/fleet/explain`` for the pod a viewer clicks (each is a what-if over every node)."""
        self.sched = sched
        self.snapshots = FleetSnapshots(sched, ttl=ttl, explain=explain)

    def routes(self) -> list[tuple[str, Handler]]:
        return [
            ("/fleet", self.page),
            ("/fleet/data.json", self.data),
            ("/fleet/explain", self.explain),
        ]

    async def page(self, request: web.Request) -> web.Response:
        text = render(self.snapshots.get(), live=True, source="/fleet/data.json", explain="/fleet/explain")
        return web.Response(text=text, content_type="text/html", headers=HEADERS)

    async def data(self, request: web.Request) -> web.Response:
        return web.Response(body=self.snapshots.body(), content_type="application/json", headers=HEADERS)

    async def explain(self, request: web.Request) -> web.Response:
        ref = request.query.get("pod", "")
        namespace, _, name = ref.partition("/")
        if not namespace or not name:
            return _problem(400, "give ?pod=NAMESPACE/NAME")
        pod = next(
            (p for p in self.sched.cache.pods.values() if p.namespace == namespace and p.name == name), None
        )
        if pod is None:
            return _problem(404, f"pod {ref} is not in shoal's cache")
        if pod.bound:
            return web.json_response({"pod": pod.key, "boundTo": pod.node_name}, headers=HEADERS)
        try:
            result = self.sched.explain(pod)
        except KeyError:
            return _problem(
                404, f"pod {ref} has schedulerName {pod.scheduler_name!r}, which shoal does not serve"
            )
        return web.json_response(explanation_doc(self.sched, pod, result), headers=HEADERS)


def _problem(status: int, message: str) -> web.Response:
    body: dict[str, Any] = {"error": message}
    return web.json_response(body, status=status, headers=HEADERS)
