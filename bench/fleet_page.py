"""make bench-fleet: what the fleet page costs at 5,000 nodes, and how fast its first view draws.

A 5,000-node fleet (zones, blocks of 256, racks of 32, 8 GPUs a node, a seeded 30 % of the
nodes partly used), 20 placed gangs of 8 and 40 pods pending that fit nowhere. Measured:

* *document*: building the fleet document from the scheduler's cache
  (:func:`shoal.views.fleet.fleet_doc`): the live one (no explanations: the page asks for one on
  click), what viewers cost the scheduler at most once per poll interval (2 s) however many they
  are, and its JSON size; the offline one (twenty pending pods explained per node);
* *first view*: the offline page opened in Debian's Chromium (headless, through Playwright),
  from the start of navigation to the end of the first draw (``data-first-draw-ms``, set by the
  page), the median of a few loads.

Writes bench/results/fleet_page.json and the "fleet-page" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.report import revision, write_section
from bench.topology_core import background, fleet, gang
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.browser import CHROMIUM, CHROMIUM_ARGS, chromium_installed
from shoal.testing.objects import make_pod
from shoal.views.fleet import fleet_doc
from shoal.views.page import render

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "fleet_page.json"


def cluster(nodes: int, seed: int = 11) -> Simulation:
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [*fleet(nodes, rng), *background(nodes, rng)]
    for g in range(20):
        objects.extend(gang(f"train-{g}", 8))
    objects.extend(make_pod(f"huge-{i}", gpus=16) for i in range(40))
    sim = Simulation(InMemoryCluster(objects), record_scores=False)
    asyncio.run(sim.run())
    return sim


def document_ms(sim: Simulation, repeats: int, explain: int) -> tuple[list[float], dict[str, Any]]:
    times: list[float] = []
    doc: dict[str, Any] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        doc = fleet_doc(sim.scheduler, explain=explain)
        times.append((time.perf_counter() - t0) * 1000)
    return times, doc


async def first_view_ms(page_file: Path, loads: int) -> list[float]:
    from playwright.async_api import async_playwright

    out: list[float] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for _ in range(loads):
                page = await browser.new_page(viewport={"width": 1400, "height": 900})
                await page.goto(page_file.as_uri())
                await page.wait_for_selector("#fleet[data-first-draw-ms]")
                drawn = await page.get_attribute("#fleet", "data-first-draw-ms")
                out.append(float(drawn or "nan"))
                await page.close()
        finally:
            await browser.close()
    return out


def write_doc(r: dict[str, Any]) -> None:
    meta = r["meta"]
    first = (
        f"**{r['first_view_median_ms']:,.0f} ms** median (max {r['first_view_max_ms']:,.0f} ms) over "
        f"{r['loads']} loads"
        if r.get("first_view_median_ms") is not None
        else "not measured (no Chromium here)"
    )
    lines = [
        "## The fleet page at 5,000 nodes",
        "",
        f"Measured {meta['date']} at commit {meta['commit']} on {meta['machine']} ({meta['python']}); "
        f"{r['nodes']:,} nodes in zones, blocks and racks, {r['gangs']} placed gangs of 8, "
        f"{r['pending']} pods pending (the first 20 explained per node). `make bench-fleet`.",
        "",
        "| what | figure |",
        "|---|---|",
        f"| the live document, built from the cache (what viewers cost the scheduler: at most once per 2 s poll, whatever their number; no explanation in it) | **{r['document_median_ms']:,.0f} ms** median (max {r['document_max_ms']:,.0f} ms), {r['document_kb']:,.0f} KB of JSON |",
        f"| the offline page's document (`shoal simulate --html`: the first 20 pending pods explained per node, each a what-if over every node) | {r['offline_document_median_ms']:,.0f} ms, {r['offline_document_kb']:,.0f} KB |",
        f"| first view in headless Chromium (navigation start → first draw done) | {first} |",
        "",
        "Target: the first view under 2 s at 5,000 nodes.",
    ]
    write_section("fleet-page", "make bench-fleet", lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    sim = cluster(args.nodes)
    doc_times, live_doc = document_ms(sim, args.repeats, explain=0)
    offline_times, doc = document_ms(sim, args.repeats, explain=20)
    text = json.dumps(live_doc)
    result: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "commit": revision(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "python": f"Python {platform.python_version()}",
        },
        "nodes": args.nodes,
        "gangs": doc["summary"]["gangsPlaced"],
        "pending": doc["summary"]["pending"],
        "document_median_ms": statistics.median(doc_times),
        "document_max_ms": max(doc_times),
        "document_kb": len(text) / 1024,
        "offline_document_median_ms": statistics.median(offline_times),
        "offline_document_kb": len(json.dumps(doc)) / 1024,
        "loads": args.loads,
        "first_view_median_ms": None,
        "first_view_max_ms": None,
    }
    if chromium_installed():
        with tempfile.TemporaryDirectory(prefix="shoal-fleet-") as tmp:
            page_file = Path(tmp) / "fleet.html"
            page_file.write_text(render(doc), encoding="utf-8")
            views = asyncio.run(first_view_ms(page_file, args.loads))
        result["first_view_median_ms"] = statistics.median(views)
        result["first_view_max_ms"] = max(views)
    print(
        f"fleet-page: {args.nodes:,} nodes: document {result['document_median_ms']:.0f} ms "
        f"({result['document_kb']:.0f} KB), first view {result['first_view_median_ms']} ms",
        flush=True,
    )
    if not args.no_write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        write_doc(result)
        print(f"fleet-page: wrote {RESULTS.relative_to(HERE.parent)} and docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
