"""make bench-core: per-pod scheduling-cycle time of the core, every node evaluated, no API server.

For 1,000 / 5,000 / 15,000 nodes (8-GPU and 4-GPU nodes over 3 zones, GPU-memory and GFD labels,
1 % tainted) it schedules a fixed, seeded mix of pods with the default gpu-scheduler profile and
times each scheduling cycle (PreFilter → Filter over all nodes → Score → pick → assume → Reserve
→ Permit). Bindings go to the in-memory binder and are timed separately as end-to-end throughput.

Writes bench/results/core.json and the "core" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Run as a script (`python bench/x.py`, PYTHONSAFEPATH=1): the repository root goes at the *end*
# of sys.path, so `bench` is found and the checkout's operator/ never shadows the standard library.
if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.report import revision, write_section, write_summary
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "core.json"
TARGET_MEDIAN_MS_5000 = 1.0


def fleet(n: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    zones = ("zone-a", "zone-b", "zone-c")
    for i in range(n):
        big = i % 3 != 2
        taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}] if i % 100 == 99 else []
        nodes.append(
            make_node(
                f"node-{i:05d}",
                cpu="96" if big else "48",
                memory="1Ti" if big else "384Gi",
                gpus=8 if big else 4,
                gpu_memory_mib=81920 if big else 49152,
                gpu_memory_free_gb=rng.choice([80, 160, 320, 640]) if big else rng.choice([48, 96, 192]),
                zone=zones[i % 3],
                rack=f"rack-{i // 40}",
                taints=taints,
            )
        )
    return nodes


def pods(count: int, rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.5:
            out.append(
                make_pod(f"gpu1-{i}", cpu="4", memory="32Gi", gpus=1, gpu_memory_gb=rng.choice([10, 20, 40]))
            )
        elif kind < 0.7:
            out.append(make_pod(f"gpu4-{i}", cpu="16", memory="128Gi", gpus=4))
        elif kind < 0.9:
            out.append(make_pod(f"cpu-{i}", cpu="2", memory="4Gi"))
        else:
            out.append(
                make_pod(
                    f"zonal-{i}",
                    cpu="4",
                    memory="16Gi",
                    gpus=1,
                    node_selector={"topology.kubernetes.io/zone": rng.choice(["zone-a", "zone-b", "zone-c"])},
                )
            )
    return out


def run(nodes: int, count: int, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    sim = Simulation(InMemoryCluster(fleet(nodes, rng)), record_scores=False)
    sched = sim.scheduler
    for pod in pods(count, rng):
        sim.submit(pod)
    cycle_ms: list[float] = []

    async def go() -> float:
        began = time.perf_counter()
        while True:
            qpi = sched.queue.pop_nowait()
            if qpi is None:
                break
            t0 = time.perf_counter()
            sched.schedule_one(qpi)
            cycle_ms.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0)
        await sched.run_until_idle()
        return time.perf_counter() - began

    # no warm-up: the first cycles (which build label columns and caches) count like the others
    elapsed = asyncio.run(go())
    placed = sum(1 for v in sim.placements().values() if v)
    cycle_ms.sort()
    return {
        "nodes": nodes,
        "pods": count,
        "placed": placed,
        "median_ms": statistics.median(cycle_ms),
        "p99_ms": cycle_ms[int(len(cycle_ms) * 0.99) - 1],
        "mean_ms": statistics.fmean(cycle_ms),
        "decisions_per_s": len(cycle_ms) / (sum(cycle_ms) / 1000),
        "e2e_pods_per_s": count / elapsed,
    }


def write_doc(results: list[dict[str, float]], meta: dict[str, str]) -> None:
    lines = [
        "## Core: scheduling-cycle time, every node evaluated",
        "",
        f"Measured {meta['date']} at commit {meta['commit']} on {meta['machine']} ({meta['python']});",
        "in-memory cluster, default `gpu-scheduler` profile, `percentageOfNodesToScore: 100`. A cycle is PreFilter → Filter over",
        "every node → Score → pick → assume → Reserve → Permit; binding is in memory.",
        "",
        "| nodes | pods | placed | median ms/pod | p99 ms/pod | decisions/s | end-to-end pods/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['nodes']:,} | {r['pods']:,} | {r['placed']:,} | {r['median_ms']:.3f} | {r['p99_ms']:.3f} "
            f"| {r['decisions_per_s']:,.0f} | {r['e2e_pods_per_s']:,.0f} |"
        )
    at5000 = next((r for r in results if r["nodes"] == 5000), None)
    if at5000:
        verdict = "met" if at5000["median_ms"] <= TARGET_MEDIAN_MS_5000 else "**missed**"
        lines += [
            "",
            f"Target: median ≤ {TARGET_MEDIAN_MS_5000} ms per pod at 5,000 nodes — {verdict} "
            f"({at5000['median_ms']:.3f} ms). For scale, kube-scheduler's scheduler_perf threshold is",
            "680 pods/s at 5,000 nodes (about 1.5 ms a pod) while it scores only 10 % of the nodes.",
        ]
    write_section("core", "make bench-core", lines)


def summary(results: list[dict[str, float]], meta: dict[str, str]) -> dict[str, Any]:
    """What bench/results/core.json holds: the runs, and ``median_ms_<nodes>``/``p99_ms_<nodes>``."""
    payload: dict[str, Any] = {"meta": meta, "runs": results}
    for r in results:
        payload[f"median_ms_{int(r['nodes'])}"] = round(r["median_ms"], 4)
        payload[f"p99_ms_{int(r['nodes'])}"] = round(r["p99_ms"], 4)
    return payload


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000, 15000])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    results = []
    for n in args.nodes:
        print(f"bench-core: {n:,} nodes, {args.pods:,} pods ...", flush=True)
        r = run(n, args.pods)
        results.append(r)
        print(
            f"  median {r['median_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  "
            f"{r['decisions_per_s']:,.0f} decisions/s  "
            f"({r['placed']:,} placed, {r['e2e_pods_per_s']:,.0f} pods/s end to end)",
            flush=True,
        )
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "python": f"Python {platform.python_version()}",
        "commit": revision(),
    }
    if not args.no_write:
        payload = summary(results, meta)
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
        write_doc(results, meta)
        write_summary()
        print(f"bench-core: wrote {RESULTS.relative_to(HERE.parent)} and docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
