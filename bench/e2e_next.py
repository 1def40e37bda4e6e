"""The race against the next release: shoal beside kube-scheduler of ``KUBE_VERSION_NEXT`` (1.38).

kube-scheduler 1.38 scores only an adaptive share of a gang's placements
(``percentageOfPlacementsToScore``: by default max(5, 100 - nodes * 9 / 500) %; its scheduler_perf
comments give ~630 pods/s against ~113 with every placement scored). This runs its own new
scheduler_perf workloads, GangTopologyAwareScheduling (test/integration/scheduler_perf/podgroup/tas),
on the next release's control plane, for three schedulers: shoal, kube-scheduler 1.38 as it ships
(adaptive) and kube-scheduler 1.38 scoring every placement (``percentageOfPlacementsToScore: 100``,
1.37's behaviour).

The objects are the workload's: 5,000 nodes of 4 CPUs / 32 Gi in 50 racks of 100
(``topology.kubernetes.io/rack``; zones of 100 nodes), native ``scheduling.k8s.io/v1beta1``
PodGroups with ``gang.minCount`` = their size and ``schedulingConstraints.topology[0].key:
topology.kubernetes.io/rack``, and pods of 100m CPU / 100 Mi that name their group in
``spec.schedulingGroup.podGroupName``. Workloads: 750 gangs × 4, 1,500 × 4, 3 × 1,000, 9 × 1,000.

Each run is a fresh control plane. **backlog**: the groups and pods exist before the scheduler
starts (the load generator out of the measurement, as scheduler_perf measures the scheduler):
pods/s from the first binding to the last. **stream** (750 × 4 only): the scheduler runs first and
the groups, then the pods, are created as fast as the API server takes them: create→bound p50/p99.
Quality per run: the share of gangs whose bound members all share one rack (the constraint), and
the racks left with no pod at all (room kept whole for a later gang of a rack's size).

Then CompositePodGroups (:func:`cpg_jobs`): jobs of replicas, each job required in one block and
each replica in one rack: ``cpg_placed_whole`` is the share of jobs placed whole (every pod bound,
every level inside its domain).

Then the basic workload of ``make bench`` (1,000 nodes, 5,000 plain pods streamed) on the same
release, shoal beside kube-scheduler.

Writes bench/results/e2e_next.json, the ``k138_*`` keys of bench/results/e2e.json (kept there when
bench/e2e.py rewrites it), and the "e2e-next" section of docs/benchmarks.md. Needs the next
release's binaries (``make bench`` builds them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench import e2e_preemption
from bench.e2e import NEXT_PREFIX, Bench, machine, throughput
from bench.report import DOC, revision, write_section, write_summary
from shoal.testing.controlplane import Binaries
from shoal.testing.objects import make_composite_pod_group, make_native_pod_group, make_node, make_pod

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "e2e_next.json"
E2E_RESULTS = HERE / "results" / "e2e.json"
NS = "bench"
RACK = "topology.kubernetes.io/rack"
NODES, PER_RACK = 5000, 100
#: name -> (gangs, members each), scheduler_perf's 5000Nodes_50Racks_* workloads
WORKLOADS: dict[str, tuple[int, int]] = {
    "750x4": (750, 4),
    "1500x4": (1500, 4),
    "3x1000": (3, 1000),
    "9x1000": (9, 1000),
}
#: the workload also run streamed, for create->bound latency
STREAMED = "750x4"
KINDS = ("shoal", "kube-scheduler", "kube-all-placements")
#: the figures' prefix: the release raced
PREFIX = NEXT_PREFIX.rstrip("_")


def rack_of(node: str) -> int:
    return int(node.removeprefix("node-")) // PER_RACK


def nodes(count: int = NODES) -> list[dict[str, Any]]:
    """The workload's nodes (templates/node.yaml): 4 CPUs, 32 Gi, 110 pods, zone and rack labels."""
    out = []
    for i in range(count):
        node = make_node(f"node-{i}", cpu="4", memory="32Gi", pods=110)
        node["metadata"]["labels"].update(
            {"topology.kubernetes.io/zone": f"zone-{i // 100}", RACK: f"rack-{i // PER_RACK}"}
        )
        out.append(node)
    return out


def gangs(count: int, members: int, scheduler_name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The workload's PodGroups (templates/podgroup.yaml) and pods (templates/pod.yaml)."""
    groups = [
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"group-{g}", "namespace": NS},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": members}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
            },
        }
        for g in range(count)
    ]
    pods = []
    for i in range(count * members):
        pods.append(
            make_pod(
                f"test-tas-scheduling-{i}",
                namespace=NS,
                cpu="100m",
                memory="100Mi",
                scheduler_name=scheduler_name,
                scheduling_group=f"group-{i // members}",
            )
        )
    return groups, pods


def quality(bound: Mapping[str, str], count: int, members: int, nodes_count: int = NODES) -> dict[str, Any]:
    """Gangs whose bound members share one rack (of the gangs with any member bound), and the
    racks with no pod at all."""
    racks_of: dict[int, set[int]] = {}
    for pod, node in bound.items():
        g = int(pod.rsplit("-", 1)[1]) // members
        racks_of.setdefault(g, set()).add(rack_of(node))
    used = {r for rs in racks_of.values() for r in rs}
    placed = len(racks_of)
    return {
        "gangs": count,
        "gangs_placed": placed,
        "one_rack": sum(len(rs) == 1 for rs in racks_of.values()) / placed if placed else None,
        "free_racks": nodes_count // PER_RACK - len(used),
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * q) - 1)]


async def gang_run(
    kind: str, base: Path, workload: str, mode: str, nodes_count: int = NODES
) -> dict[str, Any]:
    count, members = WORKLOADS[workload]
    label = f"{workload}-{mode}"
    async with Bench(kind, base / label) as b:
        print(f"  {kind}: {label} on {nodes_count:,} nodes", flush=True)
        await b.create_all(nodes(nodes_count))
        groups, pods = gangs(count, members, b.scheduler_name)
        names = [p["metadata"]["name"] for p in pods]
        if mode == "backlog":
            await b.create_all(groups)
            await b.create_all(pods)
            await b.start_scheduler()
            cpu0, _ = b.stats()
            ok = await b.wait_bound(names, 900, label)
            created: dict[str, float] = {}
        else:
            await b.start_scheduler()
            cpu0, _ = b.stats()
            await b.create_all(groups)
            creating = asyncio.ensure_future(b.create_all(pods))
            ok = await b.wait_bound(names, 900, label)
            created = await creating
        cpu1, rss = b.stats()
        times = b.bound_times()
        bound_at = sorted(times[n] for n in names if n in times)
        if created:
            first = min(created.values())
            seconds = (bound_at[-1] - first) if bound_at else 0.0
            per_s = len(bound_at) / max(seconds, 1e-9)
        else:
            seconds = bound_at[-1] - bound_at[0] if len(bound_at) > 1 else 0.0
            per_s = (len(bound_at) - 1) / max(seconds, 1e-9)
        latencies = [times[n] - created[n] for n in created if n in times]
        wanted = set(names)
        where = {n: node for n, node in b.bound_nodes().items() if n in wanted}
        return {
            "workload": workload,
            "mode": mode,
            "nodes": nodes_count,
            "pods": len(names),
            "all_bound": ok,
            "bound": len(bound_at),
            "seconds": seconds,
            "pods_per_s": per_s,
            "p50_s": statistics.median(latencies) if latencies else None,
            "p99_s": percentile(latencies, 0.99),
            "cpu_s": cpu1 - cpu0,
            "peak_rss_mb": rss / 2**20,
            **quality(where, count, members, nodes_count),
        }


#: the CompositePodGroup workload: racks of 100 nodes of 4 CPUs in blocks of 4 racks, jobs of
#: replicas of 1-CPU pods; a replica (150 pods) fills most of half a rack, a job (4 replicas) most
#: of half a block, so the fleet ends 75 % full and a careless choice strands a job
CPG_NODES, CPG_RACKS_PER_BLOCK, CPG_JOBS, CPG_REPLICAS, CPG_PODS = 2000, 4, 10, 4, 150
BLOCK = "topology.kubernetes.io/block"


def cpg_nodes(count: int = CPG_NODES) -> list[dict[str, Any]]:
    """The fleet of :func:`nodes` with a block level (``topology.kubernetes.io/block``) over the racks."""
    out = nodes(count)
    for node in out:
        rack = rack_of(node["metadata"]["name"])
        node["metadata"]["labels"][BLOCK] = f"block-{rack // CPG_RACKS_PER_BLOCK}"
    return out


def cpg_jobs(scheduler_name: str, jobs: int = CPG_JOBS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Jobs as JobSet would describe them on 1.38: a CompositePodGroup per job (all replicas,
    one block) over a PodGroup per replica (all pods, one rack), and the pods."""
    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for j in range(jobs):
        job = make_composite_pod_group(
            f"job-{j}",
            namespace=NS,
            min_groups=CPG_REPLICAS,
            workload=(f"job-{j}", "job"),
            topology_key=BLOCK,
        )
        groups.append(job)
        for r in range(CPG_REPLICAS):
            name = f"job-{j}-r{r}"
            groups.append(
                make_native_pod_group(
                    name,
                    namespace=NS,
                    min_count=CPG_PODS,
                    workload=(f"job-{j}", "replica"),
                    topology_key=RACK,
                    parent=f"job-{j}",
                )
            )
            pods.extend(
                make_pod(
                    f"{name}-{i}",
                    namespace=NS,
                    cpu="1",
                    memory="100Mi",
                    scheduler_name=scheduler_name,
                    scheduling_group=name,
                )
                for i in range(CPG_PODS)
            )
    return groups, pods


def cpg_whole(bound: Mapping[str, str], jobs: int = CPG_JOBS) -> dict[str, Any]:
    """Jobs placed whole: every pod bound, each replica inside one rack, the job inside one block."""
    whole = 0
    for j in range(jobs):
        racks: list[set[int]] = []
        complete = True
        for r in range(CPG_REPLICAS):
            names = [f"job-{j}-r{r}-{i}" for i in range(CPG_PODS)]
            if not all(n in bound for n in names):
                complete = False
                break
            racks.append({rack_of(bound[n]) for n in names})
        if not complete or any(len(rs) != 1 for rs in racks):
            continue
        if len({next(iter(rs)) // CPG_RACKS_PER_BLOCK for rs in racks}) == 1:
            whole += 1
    return {"jobs": jobs, "jobs_whole": whole, "placed_whole": whole / jobs if jobs else None}


async def cpg_run(kind: str, base: Path) -> dict[str, Any]:
    """The jobs of :func:`cpg_jobs` as a backlog (created before the scheduler starts)."""
    async with Bench(kind, base / "composite") as b:
        print(f"  {kind}: {CPG_JOBS} jobs of {CPG_REPLICAS} x {CPG_PODS} on {CPG_NODES:,} nodes", flush=True)
        await b.create_all(cpg_nodes())
        groups, pods = cpg_jobs(b.scheduler_name)
        names = [p["metadata"]["name"] for p in pods]
        await b.create_all(groups)
        await b.create_all(pods)
        await b.start_scheduler()
        cpu0, _ = b.stats()
        ok = await b.wait_bound(names, 600, "composite")
        cpu1, rss = b.stats()
        times = b.bound_times()
        bound_at = sorted(times[n] for n in names if n in times)
        seconds = bound_at[-1] - bound_at[0] if len(bound_at) > 1 else 0.0
        wanted = set(names)
        where = {n: node for n, node in b.bound_nodes().items() if n in wanted}
        return {
            "pods": len(names),
            "all_bound": ok,
            "bound": len(bound_at),
            "seconds": seconds,
            "pods_per_s": (len(bound_at) - 1) / max(seconds, 1e-9),
            "cpu_s": cpu1 - cpu0,
            "peak_rss_mb": rss / 2**20,
            **cpg_whole(where),
        }


async def topology_gang_preemption(kind: str, base: Path) -> dict[str, Any]:
    """bench/e2e_preemption.py's gang required in one rack, preempting (victims deleted at once)."""
    async with Bench(kind, base / "topology-gang-preemption") as b:
        print(f"  {kind}: a gang required in one rack preempts", flush=True)
        await b.create_all(e2e_preemption.topo_priority_classes())
        await b.create_all(e2e_preemption.topo_nodes())
        await b.create_all(e2e_preemption.topo_victims(NS))
        await b.start_scheduler()
        return await e2e_preemption.run_topology_gang(b, NS)


def summary(results: Mapping[str, Any]) -> dict[str, Any]:
    """The ``k138_*`` figures: shoal ÷ kube-scheduler as it ships (adaptive), over the backlog runs
    (geometric mean of the workloads' ratios), quality likewise, basic from the streamed basic run."""
    backlog = {w: r for w, r in results.get("gangs", {}).items() if w.endswith("-backlog")}

    def geo(values: list[float | None]) -> float | None:
        """The geometric mean, or None when a workload has no ratio (a scheduler bound nothing):
        a failure must not drop out of the figure."""
        if not values or any(v is None or v <= 0 for v in values):
            return None
        return statistics.geometric_mean([v for v in values if v is not None])

    def ratio(r: Mapping[str, Any], key: str, other: str = "kube-scheduler") -> float | None:
        a, b = r["shoal"].get(key), r[other].get(key)
        return a / b if a and b else None

    out: dict[str, Any] = {
        f"{PREFIX}_topology_ratio": geo([ratio(r, "pods_per_s") for r in backlog.values()]),
        f"{PREFIX}_topology_ratio_all_placements": geo(
            [ratio(r, "pods_per_s", "kube-all-placements") for r in backlog.values()]
        ),
        f"{PREFIX}_topology_quality": geo([ratio(r, "one_rack") for r in backlog.values()]),
        f"{PREFIX}_topology_free_racks": {w: {k: r[k]["free_racks"] for k in r} for w, r in backlog.items()},
        f"{PREFIX}_topology_all_bound": (
            all(x["all_bound"] for r in backlog.values() for x in r.values()) if backlog else None
        ),
    }
    pre = results.get("topology_gang_preemption")
    if pre:
        for kind, suffix in (("shoal", ""), ("kube-scheduler", "_kube")):
            r = pre[kind]
            out[f"gang_topology_preemption_excess_victims{suffix}"] = r["excess_victims"]
            out[f"gang_topology_preemption_partial_victim_gangs{suffix}"] = r["partial_victim_gangs"]
            out[f"gang_topology_preemption_racks{suffix}"] = r["racks"]
    basic = results.get("basic")
    if basic:
        out[f"{PREFIX}_basic_ratio"] = ratio(basic, "pods_per_s")
    cpg = results.get("composite")
    if cpg:
        out["cpg_placed_whole"] = cpg["shoal"]["placed_whole"]
        out["cpg_placed_whole_kube"] = cpg["kube-scheduler"]["placed_whole"]
        out["cpg_ratio"] = ratio(cpg, "pods_per_s")
    return out


def doc_lines(data: Mapping[str, Any]) -> list[str]:
    results, s = data["results"], data["summary"]

    def num(v: Any, fmt: str = "{:,.0f}") -> str:
        return "—" if v is None else fmt.format(v)

    lines = [
        f"## The next release: shoal beside kube-scheduler {data['kube_version']}",
        "",
        f"Run on {data['date']} at `{data['commit']}` ({data['machine']}), on the next release's control plane.",
        "scheduler_perf's GangTopologyAwareScheduling workloads (5,000 nodes in 50 racks of 100, native",
        "PodGroups required in one rack; bench/e2e_next.py): *kube* is kube-scheduler as it ships (adaptive",
        "`percentageOfPlacementsToScore`), *kube 100 %* scores every placement (1.37's behaviour). Backlog: the",
        "pods exist before the scheduler starts, pods/s from the first binding to the last; stream: created",
        "while it runs, create→bound. *One rack*: gangs whose members share a rack; *free racks*: racks with",
        "no pod at all.",
        "",
        f"**pods/s, shoal ÷ kube: {num(s.get(f'{PREFIX}_topology_ratio'), '{:.2f}')}** (geometric mean over the",
        f"backlog workloads; ÷ kube 100 %: {num(s.get(f'{PREFIX}_topology_ratio_all_placements'), '{:.2f}')}); "
        f"one-rack share, shoal ÷ kube: **{num(s.get(f'{PREFIX}_topology_quality'), '{:.2f}')}**; basic"
        f" (1,000 nodes, 5,000 pods streamed), shoal ÷ kube: **{num(s.get(f'{PREFIX}_basic_ratio'), '{:.2f}')}**.",
        "",
        "| workload | scheduler | pods/s | p50 / p99 s | one rack | free racks | all bound | CPU s | peak RSS MB |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    names = {"shoal": "shoal", "kube-scheduler": "kube", "kube-all-placements": "kube 100 %"}
    for label, runs in results.get("gangs", {}).items():
        for kind, r in runs.items():
            lat = "—" if r["p50_s"] is None else f"{r['p50_s']:.2f} / {r['p99_s']:.2f}"
            share = "—" if r["one_rack"] is None else f"{r['one_rack']:.2f}"
            lines.append(
                f"| {label} | {names[kind]} | {r['pods_per_s']:,.0f} | {lat} | {share} | {r['free_racks']} "
                f"| {'yes' if r['all_bound'] else 'no'} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |"
            )
    pre = results.get("topology_gang_preemption")
    if pre:
        shoal, kube = pre["shoal"], pre["kube-scheduler"]
        lines += [
            "",
            f"A gang of {e2e_preemption.TOPO_MEMBERS} required in one rack preempts on a full fleet of"
            f" {e2e_preemption.TOPO_RACKS} racks (bench/e2e_preemption.py): the cheapest rack,"
            f" {e2e_preemption.TOPO_BEST_RACK}, costs {e2e_preemption.TOPO_MIN_VICTIMS} victims; another looks"
            " cheaper to a scheduler blind to victim gangs, and evicting there leaves a gang below its minCount.",
            "",
            "| | shoal | kube |",
            "|---|---|---|",
            f"| gang bound whole | {shoal['all_bound']} | {kube['all_bound']} |",
            f"| victims (minimum {shoal['minimum']}) | {shoal['evicted']} | {kube['evicted']} |",
            f"| victim gangs left partial | {shoal['partial_victim_gangs']} | {kube['partial_victim_gangs']} |",
            f"| racks the gang went to | {', '.join(shoal['racks']) or '—'} | {', '.join(kube['racks']) or '—'} |",
        ]
    cpg = results.get("composite")
    if cpg:
        lines += [
            "",
            f"CompositePodGroups: {CPG_JOBS} jobs (a CompositePodGroup each, `minGroupCount` {CPG_REPLICAS}, one"
            f" block of {CPG_RACKS_PER_BLOCK} racks) of {CPG_REPLICAS} replicas (a PodGroup each, {CPG_PODS}"
            f" pods of 1 CPU, one rack) on {CPG_NODES:,} nodes of 4 CPUs, 75 % full once placed; backlog."
            f" **Jobs placed whole, shoal: {num(s.get('cpg_placed_whole'), '{:.2f}')}**, kube:"
            f" {num(s.get('cpg_placed_whole_kube'), '{:.2f}')}; pods/s shoal ÷ kube:"
            f" {num(s.get('cpg_ratio'), '{:.2f}')}.",
            "",
            "| scheduler | pods/s | jobs whole | all bound | CPU s | peak RSS MB |",
            "|---|---:|---:|---|---:|---:|",
            *(
                f"| {names[k]} | {r['pods_per_s']:,.0f} | {r['jobs_whole']} of {r['jobs']} "
                f"| {'yes' if r['all_bound'] else 'no'} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |"
                for k, r in cpg.items()
            ),
        ]
    basic_rows = []
    for kind, r in (results.get("basic") or {}).items():
        basic_rows.append(
            f"| basic-stream | {names[kind]} | {r['pods_per_s']:,.0f} | "
            f"{num(r.get('p50_s'), '{:.2f}')} / {num(r.get('p99_s'), '{:.2f}')} | — | — "
            f"| {'yes' if r['all_bound'] else 'no'} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    if basic_rows:
        lines += [
            "",
            "| basic (1,000 nodes, 5,000 pods streamed) | scheduler | pods/s | p50 / p99 s | | | all bound | CPU s | peak RSS MB |",
            "|---|---|---:|---:|---|---|---|---:|---:|",
            *basic_rows,
        ]
    return lines


def record(data: dict[str, Any]) -> None:
    """bench/results/e2e_next.json, the k138 keys of e2e.json, the doc's section and summary."""
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=2, default=str) + "\n")
    e2e = json.loads(E2E_RESULTS.read_text()) if E2E_RESULTS.exists() else {}
    e2e.update(data["summary"])
    meta = {"date": data["date"], "commit": data["commit"], "kube_version": data["kube_version"]}
    e2e[f"{PREFIX}_meta"] = meta
    e2e["cpg_meta"] = meta  # the summary table's rows name the run that recorded them
    E2E_RESULTS.write_text(json.dumps(e2e, indent=2, default=str) + "\n")
    write_section("e2e-next", "bench/e2e_next.py", doc_lines(data), doc=DOC)
    write_summary()


async def main_async(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="shoal-bench-next-"))
    version = Binaries.locate().kube_version
    print(f"bench next: kube-scheduler {version}, logs under {base}", flush=True)
    results: dict[str, Any] = {"gangs": {}}
    chosen = [] if args.no_gangs else args.workloads or list(WORKLOADS)
    for workload in chosen:
        modes = ["backlog", "stream"] if workload == STREAMED else ["backlog"]
        for mode in modes:
            results["gangs"][f"{workload}-{mode}"] = {
                k: await gang_run(k, base, workload, mode, args.nodes) for k in KINDS
            }
    results["topology_gang_preemption"] = {
        k: await topology_gang_preemption(k, base) for k in ("shoal", "kube-scheduler")
    }
    if not args.no_composite:
        results["composite"] = {k: await cpg_run(k, base) for k in ("shoal", "kube-scheduler")}
    if not args.no_basic:
        results["basic"] = {
            k: await throughput(k, base, 1000, 5000, "basic-next") for k in ("kube-scheduler", "shoal")
        }
    data = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": revision(),
        "machine": machine(),
        "kube_version": version,
        "summary": summary(results),
        "results": results,
    }
    print(json.dumps(data["summary"], indent=2, default=str))
    if args.write:
        record(data)
        print(
            f"bench next: wrote {RESULTS.relative_to(ROOT)}, {E2E_RESULTS.relative_to(ROOT)} and docs/benchmarks.md"
        )
    return 0


def arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/e2e_next.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workloads",
        type=lambda s: [w for w in s.split(",") if w],
        help=f"only these (comma-separated; nothing written): {', '.join(WORKLOADS)}",
    )
    parser.add_argument(
        "--nodes", type=int, default=NODES, help="nodes (default 5,000; others: nothing written)"
    )
    parser.add_argument(
        "--no-basic", action="store_true", help="leave out the basic workload (nothing written)"
    )
    parser.add_argument(
        "--no-gangs", action="store_true", help="leave out the gang workloads (nothing written)"
    )
    parser.add_argument(
        "--no-composite", action="store_true", help="leave out the CompositePodGroup jobs (nothing written)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    unknown = [w for w in args.workloads or () if w not in WORKLOADS]
    if unknown:
        print(f"bench/e2e_next.py: unknown workload {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
        return 2
    args.write = (
        not (args.workloads or args.no_gangs or args.no_basic or args.no_composite) and args.nodes == NODES
    )
    if not os.environ.get("SHOAL_KUBE_VERSION"):
        print("bench/e2e_next.py: set SHOAL_KUBE_VERSION to the release to race (make bench does)")
        return 2
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
