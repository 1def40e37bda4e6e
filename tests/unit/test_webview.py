"""``shoal run --web``'s routes over a real aiohttp server on loopback, fed by a simulation's
scheduler (the routes read only the scheduler's cache; the guard is tested in integration)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from shoal.operator_app.webview import FleetRoutes
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod


async def served(sim: Simulation) -> TestClient[Any, Any]:
    app = web.Application()
    for path, handler in FleetRoutes(sim.scheduler).routes():
        app.router.add_get(path, handler)
    test_client: TestClient[Any, Any] = TestClient(TestServer(app))
    await test_client.start_server()
    return test_client


async def test_the_page_its_document_and_one_pods_explanation() -> None:
    sim = Simulation(
        InMemoryCluster(
            [
                make_node("n1", gpus=8),
                make_pod("small", gpus=1),
                make_pod("huge", gpus=16),
                make_pod("other", scheduler_name="x"),
            ]
        )
    )
    await sim.run()
    http = await served(sim)
    try:
        page = await http.get("/fleet")
        assert page.status == 200 and page.headers["Cache-Control"] == "no-store"
        text = await page.text()
        assert 'data-live="1"' in text and 'data-source="/fleet/data.json"' in text

        doc = await (await http.get("/fleet/data.json")).json()
        assert doc["summary"]["gpusUsed"] == 1
        assert [p["pod"] for p in doc["pending"]] == ["default/huge"]  # not another scheduler's
        # no what-if per poll: the last attempt's message, the explanation on click (below)
        (huge,) = doc["pending"]
        assert not huge["explained"] and huge["message"].startswith("0/1 nodes are available")

        why = await (await http.get("/fleet/explain", params={"pod": "default/huge"})).json()
        assert why["node"] is None and [n["name"] for n in why["nodes"]] == ["n1"]
        bound = await (await http.get("/fleet/explain", params={"pod": "default/small"})).json()
        assert bound == {"pod": "default/small", "boundTo": "n1"}

        assert (await http.get("/fleet/explain")).status == 400
        missing = await http.get("/fleet/explain", params={"pod": "default/nope"})
        assert missing.status == 404 and "not in shoal's cache" in (await missing.json())["error"]
        other = await http.get("/fleet/explain", params={"pod": "default/other"})
        assert other.status == 404 and "'x'" in (await other.json())["error"]
    finally:
        await http.close()
