"""make bench-core (topology part): how long a topology-aware gang's domain search and whole cycle take.

A 5,000-node fleet labelled with zones (3), blocks (256 nodes), racks (32 nodes) and NVLink cliques
(8 nodes), fragmented by background pods (a seeded 30 % of the nodes hold 1 to 7 of their 8 GPUs),
then gangs of 8, 16 and 64 members (8 GPUs each) that prefer clique -> rack -> block -> zone. For
each gang: the domain search alone (TopologyPlacement.gang_placements: every node's room, the
domains of every level, the order) and the whole gang cycle (search, then every member through
PreFilter / Filter over all nodes / Score / assume / Reserve / Permit), no API server.

Writes bench/results/topology_core.json and the "topology-core" section of docs/benchmarks.md.
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

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.report import revision, write_section
from shoal.core.state.objects import PodGroupInfo
from shoal.plugins.topologyplacement.domains import BLOCK, CLIQUE, RACK, ZONE
from shoal.plugins.topologyplacement.plugin import TopologyPlacement
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod, make_pod_group

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "topology_core.json"
LEVELS = f"{CLIQUE},{RACK},{BLOCK},{ZONE}"
SIZES = (8, 16, 64)


def fleet(n: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        node = make_node(f"node-{i:05d}", gpus=8, zone=f"zone-{i * 3 // n}", rack=f"rack-{i // 32}")
        node["metadata"]["labels"][BLOCK] = f"block-{i // 256}"
        node["metadata"]["labels"][CLIQUE] = f"clique-{i // 8}"
        nodes.append(node)
    return nodes


def background(n: int, rng: random.Random) -> list[dict[str, Any]]:
    return [
        make_pod(f"bg-{i:05d}", gpus=rng.randint(1, 7), node_name=f"node-{i:05d}")
        for i in range(n)
        if rng.random() < 0.3
    ]


def gang(name: str, members: int) -> list[dict[str, Any]]:
    group = make_pod_group(name, min_member=members, annotations={"shoal.dev/topology-preferred": LEVELS})
    return [group] + [make_pod(f"{name}-{i}", gpus=8, pod_group=name) for i in range(members)]


async def run(nodes: int, repeats: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    sim = Simulation(InMemoryCluster([*fleet(nodes, rng), *background(nodes, rng)]), record_scores=False)
    sched = sim.scheduler
    fw = sched.profiles["gpu-scheduler"]
    placer = fw.gang_placer
    assert isinstance(placer, TopologyPlacement)
    out = []
    for size in SIZES:
        search_ms: list[float] = []
        cycle_ms: list[float] = []
        levels: list[str] = []
        for r in range(repeats):
            name = f"g{size}-{r}"
            for obj in gang(name, size):
                sim.submit(obj)
            group = sched.cache.pod_groups[f"default/{name}"]
            members = sched.cache.group_members(group.key)
            feasible = sched.cache.table.valid_rows().copy()
            t0 = time.perf_counter()
            plan = placer.gang_placements(group, members, feasible, size)
            search_ms.append((time.perf_counter() - t0) * 1000)
            qpi = sched.queue.pop_nowait()
            while qpi is not None and qpi.pod.group_key != group.key:
                qpi = sched.queue.pop_nowait()
            assert qpi is not None
            t0 = time.perf_counter()
            sched.schedule_one(qpi)
            cycle_ms.append((time.perf_counter() - t0) * 1000)
            levels.append(
                plan.trials[0].domain.level if plan.trials and plan.trials[0].domain else "anywhere"
            )
            await sched.run_until_idle()
            _release(sim, group)
        out.append(
            {
                "nodes": nodes,
                "gang": size,
                "search_median_ms": statistics.median(search_ms),
                "search_max_ms": max(search_ms),
                "cycle_median_ms": statistics.median(cycle_ms),
                "level": max(set(levels), key=levels.count),
            }
        )
    return out


def _release(sim: Simulation, group: PodGroupInfo) -> None:
    """Delete the gang again so every repeat sees the same fragmented fleet."""
    for member in list(sim.scheduler.cache.group_members(group.key)):
        sim.delete_pod(member.uid)


def write_doc(results: list[dict[str, Any]], meta: dict[str, str]) -> None:
    lines = [
        "## Topology-aware gangs: domain search and gang cycle (core)",
        "",
        f"Measured {meta['date']} at commit {meta['commit']} on {meta['machine']} ({meta['python']});",
        "in-memory, 5,000 nodes with zones, blocks (256 nodes), racks (32) and NVLink cliques (8), 30 %",
        "of the nodes partly used; gangs of 8-GPU members preferring clique → rack → block → zone.",
        "*Search*: every node's room and",
        "the domains of every level, ordered (TopologyPlacement); *cycle*: the search plus every member",
        "placed (Filter over all nodes, Score, assume, Reserve, Permit).",
        "",
        "| nodes | gang | level chosen | search median ms | search max ms | gang cycle median ms |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['nodes']:,} | {r['gang']} | {r['level']} | {r['search_median_ms']:.2f} "
            f"| {r['search_max_ms']:.2f} | {r['cycle_median_ms']:.1f} |"
        )
    write_section("topology-core", "make bench-core", lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(run(args.nodes, args.repeats))
    for r in results:
        print(
            f"topology-core: gang of {r['gang']} on {r['nodes']:,} nodes -> {r['level']}: search "
            f"{r['search_median_ms']:.2f} ms (max {r['search_max_ms']:.2f}), cycle {r['cycle_median_ms']:.1f} ms",
            flush=True,
        )
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "python": f"Python {platform.python_version()}",
        "commit": revision(),
    }
    if not args.no_write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({"meta": meta, "runs": results}, indent=2) + "\n")
        write_doc(results, meta)
        print(f"topology-core: wrote {RESULTS.relative_to(HERE.parent)} and docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
