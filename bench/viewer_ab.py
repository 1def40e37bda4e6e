"""make bench-viewers: what an open fleet page costs shoal's throughput, as alternating runs.

One pair of runs (``make bench``'s basic and basic_viewer) cannot tell the page's cost from this
machine's run-to-run noise. Here shoal runs ``make bench``'s basic scenario (1,000 nodes, 5,000
pods, each run on a fresh control plane) ``--rounds`` times with the page closed and as many times
with it open in three polling viewers (bench/fleet_viewers.py), alternating which goes first, so
both meet the same drift. Reported: each run's pods/s, the median of each, their ratio (open ÷
closed), and the spread of the closed runs among themselves (the noise the ratio is read against).

Writes bench/results/fleet_viewers.json and the "fleet-viewers" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.e2e import machine, throughput
from bench.fleet_viewers import VIEWERS
from bench.report import revision, write_section

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "fleet_viewers.json"
KINDS = {"closed": "shoal", "open": "shoal-viewed"}


async def rounds(count: int, nodes: int, pods: int) -> list[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="shoal-viewers-"))
    out = []
    for r in range(count):
        order = ("closed", "open") if r % 2 == 0 else ("open", "closed")
        got: dict[str, Any] = {}
        for page in order:
            print(f"bench-viewers: round {r + 1} of {count}, page {page}", flush=True)
            got[page] = await throughput(KINDS[page], base, nodes, pods, f"r{r}-{page}", "basic")
        out.append(got)
    return out


def summary(runs: list[dict[str, Any]], nodes: int, pods: int) -> dict[str, Any]:
    closed = [r["closed"]["pods_per_s"] for r in runs]
    opened = [r["open"]["pods_per_s"] for r in runs]
    polls = [r["open"]["viewers"] for r in runs]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": revision(),
        "machine": machine(),
        "nodes": nodes,
        "pods": pods,
        "viewers": VIEWERS,
        "closed_pods_per_s": closed,
        "open_pods_per_s": opened,
        "viewer_cost_ratio": statistics.median(opened) / statistics.median(closed),
        # the closed runs' own spread: slowest ÷ fastest
        "closed_spread": min(closed) / max(closed),
        "poll_failures": sum(p["failures"] for p in polls),
        "polls_answered": sum(p["answered"] for p in polls),
        "poll_p99_ms": max(p["p99_ms"] or 0 for p in polls),
        "runs": runs,
    }


def write_doc(s: dict[str, Any]) -> None:
    lines = [
        "## The fleet page open while shoal schedules (`make bench-viewers`)",
        "",
        f"Recorded {s['date']} at commit {s['commit']} on {s['machine']}: `make bench`'s basic scenario "
        f"({s['nodes']:,} nodes, {s['pods']:,} pods, a fresh control plane each run), shoal alone, "
        f"{len(s['closed_pods_per_s'])} runs with the page closed and as many with it open in "
        f"{s['viewers']} viewers polling `/fleet/data.json` every 2 s, alternating which goes first.",
        "",
        "| page | pods/s of each run | median |",
        "|---|---|---:|",
        f"| closed | {', '.join(f'{v:.0f}' for v in s['closed_pods_per_s'])} | "
        f"{statistics.median(s['closed_pods_per_s']):.0f} |",
        f"| open | {', '.join(f'{v:.0f}' for v in s['open_pods_per_s'])} | "
        f"{statistics.median(s['open_pods_per_s']):.0f} |",
        "",
        f"Open ÷ closed (medians): **{s['viewer_cost_ratio']:.2f}**; the closed runs among themselves: "
        f"slowest ÷ fastest {s['closed_spread']:.2f}. Polls answered {s['polls_answered']}, failed "
        f"{s['poll_failures']}, slowest answer {s['poll_p99_ms']:.0f} ms (p99 of a run).",
    ]
    write_section("fleet-viewers", "make bench-viewers", lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/viewer_ab.py")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    runs = asyncio.run(rounds(args.rounds, args.nodes, args.pods))
    s = summary(runs, args.nodes, args.pods)
    print(json.dumps({k: v for k, v in s.items() if k != "runs"}, indent=2))
    if not args.no_write:
        RESULTS.write_text(json.dumps(s, indent=2) + "\n")
        write_doc(s)
        print("bench-viewers: wrote bench/results/fleet_viewers.json and docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
