"""The e2e section of docs/benchmarks.md and its plots, from the results of ``bench/e2e.py``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.e2e_schedulers import BACKLOG_KINDS, machine_ms_per_pod
from bench.report import DOC, write_section

ROOT = Path(__file__).resolve().parent.parent


#: the plots ``plot`` writes to docs/, in the order it writes them (``--report-only`` keeps those present)
PLOTS = ("bench-basic.png", "bench-packing.png", "bench-topology.png", "bench-backlog.png")


def plot(results: dict[str, Any]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = []
    basic = results["basic"]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    names = ["kube-scheduler", "shoal"]
    for ax, key, title in zip(
        axes,
        ["pods_per_s", "p99_s", "peak_rss_mb"],
        ["pods/s (higher is better)", "p99 create→bound, s", "peak RSS, MB"],
        strict=True,
    ):
        ax.bar(names, [basic[n][key] or 0 for n in names], color=["#888888", "#2a7ab0"])
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"basic: {basic['shoal']['nodes']:,} nodes, {basic['shoal']['pods']:,} pods", fontsize=11)
    out.append(_save(plt, fig, "bench-basic.png"))
    pk = results["packing"]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(names, [pk[n]["allocated"] for n in names], color=["#888888", "#2a7ab0"])
    ax.axhline(pk["shoal"]["capacity"], color="k", linestyle="--", linewidth=1)
    ax.set_title("packing: GPUs allocated before the first\n8-GPU pod that cannot be placed", fontsize=10)
    out.append(_save(plt, fig, "bench-packing.png"))
    if "topology" in results:
        out.append(_plot_topology(plt, results["topology"], names))
    if "backlog" in results:
        out.append(_plot_backlog(plt, results["backlog"]))
    return out


def _save(plt: Any, fig: Any, name: str) -> str:
    """Lay the figure out, write it to docs/``name`` and close it; returns ``name``."""
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / name, dpi=90)
    plt.close(fig)
    return name


def _plot_backlog(plt: Any, backlog: dict[str, Any]) -> str:
    """Backlog pods/s per scheduler, the null schedulers' ceilings drawn across."""
    names = [n for n in ("kube-scheduler", "kube-same-work", "shoal") if n in backlog]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.bar(
        names,
        [backlog[n]["pods_per_s"] for n in names],
        color=["#888888", "#bbbbbb", "#2a7ab0"][: len(names)],
    )
    ceilings = [
        ("null", "null scheduler (bindings only)", "--"),
        ("null-events", "null scheduler + events", ":"),
    ]
    for key, label, style in ceilings:
        if key in backlog:
            ax.axhline(backlog[key]["pods_per_s"], color="k", linestyle=style, linewidth=1, label=label)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("backlog: pods/s binding pods created before the scheduler started", fontsize=10)
    return _save(plt, fig, "bench-backlog.png")


def _plot_topology(plt: Any, topo: dict[str, Any], names: list[str]) -> str:
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    panels = [
        ("domain_fit", "gangs inside one domain of their level\n(fraction, higher is better)"),
        ("gang_latency_p50_s", "gang latency p50, s\n(last created → all bound)"),
        ("free_racks", "whole racks left free\n(higher is better)"),
    ]
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.bar(names, [topo[n][key] or 0 for n in names], color=["#888888", "#2a7ab0"])
        ax.set_title(title, fontsize=10)
    fig.suptitle("topology: gangs of 8 / 16 / 64 in one clique / rack / block, 1,024 nodes", fontsize=11)
    return _save(plt, fig, "bench-topology.png")


#: scheduler_perf's inter-pod workloads in bench/e2e.py -> the pod template each follows
CONSTRAINED_WORKLOADS = {
    "antiaffinity": "pod-with-pod-anti-affinity",
    "affinity": "pod-with-pod-affinity",
    "spread": "pod-with-topology-spreading",
}


#: how the processes are grouped for the CPU: each in a session of its own but the bench (the load
#: generator and its pod watcher); bench/e2e.py records it in results, and the report states it
CPU_GROUPS = "session-per-process"


def cpu_groups_note(summary: Mapping[str, Any]) -> list[str]:
    """How the processes shared the CPU: with the kernel's autogroup scheduling each session is one
    CPU group, which gets an equal share of a busy machine whatever its number of threads."""
    if summary.get("cpu_groups") == CPU_GROUPS:
        return [
            "etcd, the API server, the scheduler, the null scheduler and the CPU hog each run in a session",
            "of their own, so under the kernel's autogroup scheduling each is one CPU group with an equal",
            "share of a busy machine; the load generator and the bench's pod watcher share the bench's.",
        ]
    return [
        "Recorded before the CPU hog and the null scheduler had sessions of their own: the hog shared",
        "the load generator's CPU group (autogroup scheduling), so the hog scenario slowed the offered",
        "load more than the machine.",
    ]


def write_doc(
    results: dict[str, Any], summary: dict[str, Any], images: list[str], doc: Path = DOC, *, settle_s: float
) -> None:
    lines = [
        *_intro(results, summary, settle_s),
        *_runs(results),
        *_gpu_scenarios(results),
        *_topology(results),
        *_preemption(results),
        *_dra(results),
        *_dra_gang(results),
        *_backlog(results),
    ]
    for img in images:
        lines += ["", f"![{img}]({img})"]
    write_section("e2e", "make bench", lines, first=True, doc=doc)


def _intro(results: dict[str, Any], summary: dict[str, Any], settle_s: float) -> list[str]:
    """The setup paragraph and the table of headline figures."""
    hd = results["herding"]
    peak_rate = max(
        r[name]["pods_per_s"] for key in ("basic", "scale", "xlarge") if (r := results.get(key)) for name in r
    )
    lines = [
        "## End to end: shoal and kube-scheduler on the same local control plane",
        "",
        f"Measured {summary['date']} at commit {summary.get('commit', 'unrecorded')} on {summary['machine']},",
        "one run, each scheduler on a fresh etcd +",
        f"kube-apiserver {summary['kube_version']} started by the project (no kubelet; nodes created through the",
        "API as scheduler_perf does). kube-scheduler: default profile, `clientConnection.qps/burst` 5000, no",
        "leader election. shoal: the `gpu-scheduler` profile, every node evaluated, no leader election. The",
        "machine is shared and has 2 cores for the API server, etcd, the scheduler and the load generator, so",
        "ratios matter more than absolute figures.",
        *cpu_groups_note(summary),
        "",
        "shoal has no client-side rate limiter; kube-scheduler's 5000 qps/burst is far above what either",
        f"reaches here (at most {peak_rate:.0f} pods bound per second, about two API requests per pod: the",
        "Binding and its event).",
        *(
            [
                f"Each scheduler's pods are created only after its `/readyz` answers 200 and {settle_s:g} s more."
            ]
            if summary.get("pods_after") == "readyz"
            else []
        ),
        "",
        "| figure | target | result |",
        "|---|---|---|",
        f"| `basic_ratio` (shoal pods/s ÷ kube-scheduler pods/s) | ≥ 1.0 | **{summary['basic_ratio']:.2f}** |",
        *(
            [
                "| `basic_viewer_ratio` (the same with the fleet page open in "
                f"{results['basic_viewer']['shoal']['viewers']['viewers']} viewers) | ≥ 1.0 | "
                f"**{summary['basic_viewer_ratio']:.2f}** |"
            ]
            if "basic_viewer_ratio" in summary
            else []
        ),
        f"| `gang64_seconds` (last member created → all 64 bound) | ≤ 2 | **{summary['gang64_seconds']:.2f}** |",
        f"| `rss_ratio` (shoal ÷ kube-scheduler peak RSS, {summary['rss_scenario']}) | ≤ 1.0 | **{summary['rss_ratio']:.2f}** |",
        f"| `packing_ratio` (GPUs allocated, shoal ÷ kube-scheduler) | ≥ 1.25 | **{summary['packing_ratio']:.2f}** |",
        f"| `packing_fraction` (shoal's allocated GPUs ÷ capacity) | ≥ 0.95 | **{summary['packing_fraction']:.2f}** |",
        f"| herding: nodes over their GPU-memory label (shoal / kube-scheduler) | 0 | **{hd['shoal']['nodes_over_label']}** / {hd['kube-scheduler']['nodes_over_label']} |",
        *(
            f"| `{w}_ratio` (scheduler_perf's {w} workload, pods/s) | ≥ 1.0 | **{summary[f'{w}_ratio']:.2f}** |"
            for w in CONSTRAINED_WORKLOADS
            if f"{w}_ratio" in summary
        ),
        *_later_figures(summary),
        "",
    ]
    return lines


#: (key, what it is, target) of the figures the topology, preemption and DRA scenarios add
_LATER = (
    ("topology_domain_fit", "gangs inside one domain of their level, shoal", "1.0"),
    ("topology_domain_fit_kube", "the same, kube-scheduler", "—"),
    ("topology_latency_ratio", "gang latency, shoal ÷ kube-scheduler", "≤ 1.0"),
    ("topology_pods_per_s_ratio", "topology pods/s, shoal ÷ kube-scheduler", "≥ 1.0"),
    ("topology_free_racks_ratio", "whole racks left free, shoal ÷ kube-scheduler", "≥ 1.0"),
    ("preemption_ratio", "scheduler_perf's PreemptionBasic pods/s, shoal ÷ kube-scheduler", "≥ 1.0"),
    ("gang_preemption_excess_victims", "pods a gang of 8 evicted beyond the minimum, shoal", "0"),
    ("dra_ratio", "one-GPU claims pods/s, shoal ÷ kube-scheduler", "≥ 1.0"),
    (
        "dra_extended_ratio",
        "extended resources from DeviceClasses, scheduler_perf's ExtendedResource: pods/s, shoal ÷ kube-scheduler",
        "≥ 1.0",
    ),
    (
        "dra_partitionable_ratio",
        "MIG partitions on shared counters, scheduler_perf's Partitionable: pods/s, shoal ÷ kube-scheduler",
        "≥ 1.0",
    ),
    (
        "dra_shared_ratio",
        "GPUs shared by memory, scheduler_perf's ConsumableCapacity: pods/s, shoal ÷ kube-scheduler",
        "≥ 1.0",
    ),
    ("dra_gang_gangs", "gangs of two in dra_gang, one a node on its MIG-partitionable GPU", "—"),
    (
        "dra_gang_placed",
        "dra_gang: gangs placed whose first member would rather take the whole GPU, shoal",
        "all",
    ),
    ("dra_gang_placed_kube", "the same, kube-scheduler: kubernetes/kubernetes#138765", "—"),
    ("ceiling_fraction", "backlog pods/s, shoal ÷ the null scheduler (the API server's ceiling)", "≥ 0.8"),
    ("ceiling_fraction_kube", "the same, kube-scheduler", "—"),
    (
        "ceiling_cpu_fraction",
        "backlog machine CPU per pod, the null scheduler's ÷ shoal's (the fraction at equal CPU from the host)",
        "—",
    ),
    ("ceiling_cpu_fraction_kube", "the same, kube-scheduler", "—"),
    (
        "events_ceiling_fraction",
        "backlog pods/s, shoal ÷ the null scheduler that also writes a Scheduled event per pod",
        "—",
    ),
    ("events_ceiling_fraction_kube", "the same, kube-scheduler", "—"),
    ("null_events_fraction", "the null scheduler writing events ÷ the one that does not", "—"),
    ("backlog_ratio", "backlog pods/s, shoal ÷ kube-scheduler (load generator out of the measure)", "≥ 1.0"),
    ("scale_p50_ratio", "scale (5,000 nodes, 50,000 pods) create→bound p50, shoal ÷ kube-scheduler", "≤ 1.0"),
    ("scale_p99_ratio", "the same, p99", "≤ 1.0"),
    ("scale_pods_per_s_ratio", "scale pods/s, shoal ÷ kube-scheduler", "≥ 1.0"),
    ("scale_offered_ratio", "scale, pods/s offered (created), shoal's run ÷ kube-scheduler's", "—"),
    (
        "scale_paced_p50_ratio",
        "scale, pods created at the same rate for both (see the table), p50, shoal ÷ kube-scheduler",
        "≤ 1.0",
    ),
    ("scale_paced_p99_ratio", "the same, p99", "≤ 1.0"),
    ("scale_paced_pods_per_s_ratio", "the same, pods/s", "≥ 1.0"),
    ("scale_hog_p50_ratio", "scale with a CPU hog, p50, shoal ÷ kube-scheduler", "≤ 1.0"),
    ("scale_hog_p99_ratio", "scale with a CPU hog, p99", "≤ 1.0"),
    ("scale_hog_pods_per_s_ratio", "scale with a CPU hog, pods/s", "≥ 1.0"),
    (
        "scale_hog_offered_ratio",
        "scale with a CPU hog, pods/s offered (created), shoal's run ÷ kube-scheduler's",
        "—",
    ),
    ("xlarge_p50_ratio", "15,000 nodes / 100,000 pods, p50, shoal ÷ kube-scheduler", "≤ 1.0"),
    ("xlarge_p99_ratio", "15,000 nodes / 100,000 pods, p99", "≤ 1.0"),
    ("xlarge_pods_per_s_ratio", "15,000 nodes / 100,000 pods, pods/s", "≥ 1.0"),
    (
        "xlarge_offered_ratio",
        "15,000 nodes / 100,000 pods, pods/s offered (created), shoal's run ÷ kube-scheduler's",
        "—",
    ),
    ("xlarge_rss_ratio", "15,000 nodes / 100,000 pods, peak RSS, shoal ÷ kube-scheduler", "≤ 1.0"),
    (
        "same_work_ratio",
        "backlog pods/s, shoal ÷ kube-scheduler with shoal's plugins, every node scored",
        "≥ 1.0",
    ),
)


def _paced_figures(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Rows for the paced scenarios the run had (``paced<rate>_*``: the rates are bench/e2e.py's)."""
    rows = []
    for key in sorted(k for k in summary if k.startswith("paced") and k.endswith("_p50_ratio")):
        scenario = key.removesuffix("_p50_ratio")
        rate = scenario.removeprefix("paced")
        what = f"paced stream, pods created at {rate}/s for both, p50, shoal ÷ kube-scheduler"
        rows += [(key, what, "≤ 1.0"), (f"{scenario}_p99_ratio", "the same, p99", "≤ 1.0")]
    return rows


def _later_figures(summary: dict[str, Any]) -> list[str]:
    rows = []
    for key, what, target in (*_LATER, *_paced_figures(summary)):
        if key in summary:
            value = summary[key]
            shown = "—" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
            rows.append(f"| `{key}` ({what}) | {target} | **{shown}** |")
    return rows


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _stream_table(scenario: dict[str, Any], p50: str = "p50 s") -> list[str]:
    """kube-scheduler's and shoal's lines in a stream's table. *created/s*, the rate the load
    generator reached (pods over the time to the last create; unpaced, it depends on the CPU the
    scheduler leaves it), is shown when the results carry it (runs before 2026-12-03 did not)."""
    rows = [(name, scenario[name]) for name in ("kube-scheduler", "shoal")]
    created = all("created_per_s" in r for _, r in rows)
    lines = [
        f"| scheduler | pods/s |{' created/s |' if created else ''} seconds | {p50} | p99 s | CPU s | peak RSS MB |",
        "|---|" + "---:|" * (7 if created else 6),
    ]
    for name, r in rows:
        rate = f" {r['created_per_s']:.0f} |" if created else ""
        lines.append(
            f"| {name} | {r['pods_per_s']:.0f} |{rate} {r['seconds']:.1f} | {_f(r['p50_s'])} | "
            f"{_f(r['p99_s'])} | {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    return lines


def _viewed(results: dict[str, Any]) -> list[str]:
    """basic again with the fleet page open (shoal only), beside basic's two runs."""
    if "basic_viewer" not in results:
        return []
    v = results["basic_viewer"]["shoal"]
    w = v["viewers"]
    basic = results["basic"]
    lines = [
        "",
        f"### basic with the fleet page open: shoal run with `--web`, {w['viewers']} viewers each "
        f"loading `/fleet` then polling `/fleet/data.json` every {w['interval_s']:g} s all along "
        "(bench/fleet_viewers.py)",
        "",
        "| run | pods/s | seconds | p50 create→bound s | p99 s | CPU s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in (
        ("kube-scheduler (basic)", basic["kube-scheduler"]),
        ("shoal (basic)", basic["shoal"]),
        ("shoal, page open", v),
    ):
        lines.append(
            f"| {name} | {r['pods_per_s']:.0f} | {r['seconds']:.1f} | {_f(r['p50_s'])} | {_f(r['p99_s'])} | "
            f"{r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"Polls answered {w['answered']} (failed {w['failures']}), answer time p50 {_f(w['p50_ms'], '.0f')} ms, "
        f"p99 {_f(w['p99_ms'], '.0f')} ms; the document {w['document_bytes'] / 1024:.0f} KiB. "
        f"Page open ÷ page closed: **{v['pods_per_s'] / basic['shoal']['pods_per_s']:.2f}** "
        "(two shoal runs one after the other: their difference is this machine's run-to-run noise "
        "plus what the page costs).",
    ]
    return lines


def _runs(results: dict[str, Any]) -> list[str]:
    """The basic and scale throughput tables."""
    s = results["basic"]["shoal"]
    lines = [f"### basic: {s['nodes']:,} nodes, {s['pods']:,} pods (100m cpu, 500Mi each)", ""]
    lines += _stream_table(results["basic"], "p50 create→bound s")
    lines += _viewed(results)
    streams = [("scale", "scale"), ("scale_paced", "scale at an equal offered load")]
    streams += [("scale_hog", "scale with a CPU hog"), ("xlarge", "xlarge")]
    streams += [(key, "paced") for key in sorted(results) if key.startswith("paced")]
    for key, title in streams:
        if key not in results:
            continue
        sc = results[key]
        offered = sc["shoal"].get("offered_per_s")
        lines += [
            "",
            f"### {title}: {sc['shoal']['nodes']:,} nodes, {sc['shoal']['pods']:,} pods"
            + (f" created at {offered:g}/s for both" if offered else ""),
            "",
        ]
        lines += _stream_table(sc)
    for w, template in CONSTRAINED_WORKLOADS.items():
        if w not in results:
            continue
        lines += [
            "",
            f"### {w}: {results[w]['shoal']['nodes']:,} nodes, {results[w]['shoal']['pods']:,} pods "
            f"(scheduler_perf's {template} template)",
            "",
        ]
        lines += _stream_table(results[w])
    return lines


def _backlog_cpu(d: Mapping[str, Any]) -> list[str]:
    """Where the machine's CPU went in each scheduler's median backlog round (``cpu_window``,
    sampled from /proc while the pods were bound; runs recorded before 2026-12-03 night have none)."""
    kinds = [k for k in BACKLOG_KINDS if k in d and d[k].get("cpu_window")]
    if not kinds:
        return []
    lines = [
        "",
        "CPU per pod bound, in milliseconds: each process's CPU seconds per second while the pods were",
        "being bound (sampled from /proc every 0.2 s) divided by the pods bound per second. The",
        "scheduler's process, the API server's, etcd's, the bench's own (its watch of the pods), and the",
        "whole machine's busy time. When the machine is busy all the time, pods/s is its",
        "cores divided by the machine's CPU per pod, so the fraction of the ceiling is the null",
        "scheduler's machine CPU per pod divided by the scheduler's.",
        "",
        "| scheduler | scheduler ms | API server ms | etcd ms | bench ms | machine ms | machine busy | steal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in kinds:
        r = d[name]
        w = r["cpu_window"]
        per_pod = 1000 / max(float(r["pods_per_s"]), 1e-9)  # ms of wall time per pod bound
        used = w["cores_used"]
        cells = [
            f"{used[p] * per_pod:.2f}" if p in used else "—"
            for p in ("scheduler", "kube-apiserver", "etcd", "bench")
        ]
        lines.append(
            f"| {name} | {' | '.join(cells)} "
            f"| {machine_ms_per_pod(r) or 0:.2f} | {w['busy']:.0%} | {w['steal']:.0%} |"
        )
    return lines


def _backlog(results: dict[str, Any]) -> list[str]:
    """Scheduler-bound throughput against the null scheduler's ceiling (bench/nullscheduler.py)."""
    d = results.get("backlog")
    if not d:
        return []
    null = d["null"]["pods_per_s"]
    lines = [
        "",
        f"### backlog: {d['shoal']['pods']:,} pods created before the scheduler starts, "
        f"{d['shoal']['nodes']:,} nodes",
        "",
        "Pods/s from the first binding to the last, so neither the load generator nor start-up is in the",
        "measure. The null scheduler binds round-robin with no decision over shoal's own HTTP stack",
        "(64 bindings in flight): what the API server and etcd accept here, the ceiling of any scheduler.",
        "`kube-same-work` is kube-scheduler doing shoal's work: every node scored (`percentageOfNodesToScore:",
        "100`), NodeResourcesFit's MostAllocated with shoal's resource weights, shoal's Score plugins and",
        "weights (`bench/e2e_schedulers.same_work_profiles`); its Filters are kube's defaults, as shoal's.",
        "`null-events` is the null scheduler writing, after each binding, the `Scheduled` event every",
        "real scheduler writes per pod: the ceiling of a scheduler whose events keep up with its bindings.",
        "*Scheduled events* counts the namespace's `Scheduled` events listed as the last pod is seen bound.",
    ]
    rounds = results.get("backlog_rounds")  # runs recorded before 2026-12-03 evening had one round
    if rounds:
        lines += [
            f"The scenario ran {len(rounds)} times, every scheduler once a round, the order reversed every",
            "other round. The ratios in the key table are medians over the rounds of each round's own ratio;",
            "the first table shows each scheduler's median round, the second every round.",
        ]
    lines += [
        "",
        "| scheduler | pods/s | fraction of the ceiling | seconds | CPU s | peak RSS MB | Scheduled events |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in BACKLOG_KINDS:
        if name not in d:
            continue
        r = d[name]
        events = r.get("events_at_end")  # not in runs recorded before 2026-12-02 night
        lines.append(
            f"| {name} | {r['pods_per_s']:.0f} | {r['pods_per_s'] / max(null, 1e-9):.2f} | {r['seconds']:.1f} "
            f"| {r['cpu_s']:.1f} | {r['peak_rss_mb']:.0f} | {'—' if events is None else f'{events:,}'} |"
        )
    lines += _backlog_cpu(d)
    if rounds:
        kinds = [k for k in BACKLOG_KINDS if k in rounds[0]]
        lines += [
            "",
            "| round | "
            + " | ".join(f"{k} pods/s" for k in kinds)
            + " | shoal ÷ null | kube-scheduler ÷ null |",
            "|---|" + "---:|" * (len(kinds) + 2),
        ]
        for i, run in enumerate(rounds, 1):
            null_r = max(run["null"]["pods_per_s"], 1e-9)
            lines.append(
                f"| {i} | "
                + " | ".join(f"{run[k]['pods_per_s']:.0f}" for k in kinds)
                + f" | {run['shoal']['pods_per_s'] / null_r:.2f} | {run['kube-scheduler']['pods_per_s'] / null_r:.2f} |"
            )
    return lines


def _dra_heading(key: str, s: Mapping[str, Any]) -> str:
    """A DRA scenario's heading, from shoal's results (bench/e2e_dra.py, bench/e2e_dra_kinds.py)."""
    nodes, pods = f"{s['nodes']:,}", f"{s['pods']:,}"
    if key == "dra_extended":
        return (
            f"{nodes} nodes x {s['devices_per_node']} devices, {s['classes']} DeviceClasses with an"
            f" `extendedResourceName`, {pods} pods asking `example.com/gpu-<i mod {s['classes']}>: 1`"
            " (scheduler_perf's ExtendedResource; the scheduler makes each pod's claim)"
        )
    if key == "dra_partitionable":
        return (
            f"{nodes} nodes x {s['gpus_per_node']} MIG-partitionable GPUs (shared counters), {pods} pods"
            f" with a {' / '.join(s['profiles'])} MIG claim from a template, in turn"
            " (scheduler_perf's Partitionable)"
        )
    if key == "dra_shared":
        return (
            f"{nodes} nodes x {s['gpus_per_node']} shareable GPUs of {s['memory']}, {pods} pods with a"
            f" claim of {s['share']} on two distinct GPUs from a template (scheduler_perf's ConsumableCapacity)"
        )
    return f"{nodes} nodes x 8 GPU devices (ResourceSlices), {pods} pods with a one-GPU claim from a template"


#: the DRA scenarios, in the report's order
DRA_SCENARIOS = ("dra", "dra_extended", "dra_partitionable", "dra_shared")
#: columns a DRA scenario's table has when both schedulers' results carry them
_DRA_EXTRA = (
    ("claims_missing", "bound pods without a claim"),
    ("overdrawn", "counters or capacities overdrawn"),
)


def _dra(results: dict[str, Any]) -> list[str]:
    """bench/e2e_dra.py: one-GPU claims from a template, with the real resourceclaim controller;
    bench/e2e_dra_kinds.py: extended resources, partitionable devices, consumable capacity."""
    lines: list[str] = []
    for key in DRA_SCENARIOS:
        d = results.get(key)
        if not d:
            continue
        rows = [(name, d[name]) for name in ("kube-scheduler", "shoal")]
        extra = [(k, title) for k, title in _DRA_EXTRA if all(k in r for _, r in rows)]
        lines += [
            "",
            f"### {key}: {_dra_heading(key, d['shoal'])}",
            "",
            "| scheduler | pods/s | seconds | devices in two allocations | claims not on their pod's node |"
            + "".join(f" {title} |" for _, title in extra),
            "|---|" + "---:|" * (4 + len(extra)),
        ]
        for name, r in rows:
            lines.append(
                f"| {name} | {r['pods_per_s']:.0f} | {r['seconds']:.1f} | {r['devices_twice']} | {r['claims_misplaced']} |"
                + "".join(f" {r[k]} |" for k, _ in extra)
            )
    return lines


def _dra_gang(results: dict[str, Any]) -> list[str]:
    """bench/e2e_dra_kinds.py's dra_gang, when the run had it: gangs placed, not pods/s."""
    d = results.get("dra_gang")
    if not d:
        return []
    s = d["shoal"]
    lines = [
        "",
        f"### dra_gang: {s['nodes']:,} nodes x one MIG-partitionable GPU, {s['gangs']:,} native gangs of two,"
        " the first member asking the whole GPU or else a 3g.40gb, the second a 3g.40gb",
        "",
        "Each gang is a `scheduling.k8s.io/v1beta1` PodGroup (`gang.minCount` 2) pinned to a node of its own.",
        "Its first member's claim asks, through `firstAvailable`, the whole GPU, else a 3g.40gb MIG device;",
        "its second member's, created after it, a 3g.40gb. The GPU holds two 3g.40gb, so every gang fits its",
        "node, but only if the first member takes a half: a scheduler that allocates each member's claims on",
        "their own, one member after the other, gives the first the whole GPU and finds nothing left for the",
        "second, and the gang stays pending (kube-scheduler: kubernetes/kubernetes#138765). shoal searches",
        "the claims of a gang's members together on the node. The same objects for both; a gang is *placed*",
        "when both members are bound, *refused* when a member is marked unschedulable (`PodScheduled=False`),",
        "*undecided* when neither after the timeout. *seconds*: first pod created → last gang decided.",
        "",
        f"| scheduler | gangs placed | refused | undecided after {s['timeout_s']:g} s | seconds "
        "| placed gangs not on two 3g.40gb of their node | devices in two allocations "
        "| counters overdrawn |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("kube-scheduler", "shoal"):
        r = d[name]
        lines.append(
            f"| {name} | {r['placed']:,}/{r['gangs']:,} | {r['refused']:,} | {r['undecided']:,} "
            f"| {_f(r['seconds'], '.1f')} | {r['placed_misallocated']} | {r['devices_twice']} | {r['overdrawn']} |"
        )
    return lines


def _gpu_scenarios(results: dict[str, Any]) -> list[str]:
    """Packing, herding and gang."""
    pk, hd = results["packing"], results["herding"]
    return [
        "",
        f"### packing: {pk['shoal']['nodes']} nodes × 8 GPUs, seeded mix of 1/2/4/8-GPU pods and gangs, in order",
        "",
        "| scheduler | GPUs allocated before the first 8-GPU pod fails | of capacity |",
        "|---|---:|---:|",
        f"| kube-scheduler (default profile: LeastAllocated spreads) | {pk['kube-scheduler']['allocated']} | {pk['kube-scheduler']['fraction']:.2f} |",
        f"| shoal (`gpu-scheduler`: MostAllocated on nvidia.com/gpu) | {pk['shoal']['allocated']} | {pk['shoal']['fraction']:.2f} |",
        "",
        f"### herding: {hd['shoal']['nodes']} nodes labelled 40/30/20/10 GB free ({hd['shoal']['label_capacity_gb']} GB), 80 pods × 10 GB",
        "",
        "| scheduler | GB placed | nodes over their label |",
        "|---|---:|---:|",
        f"| kube-scheduler (ignores the label) | {hd['kube-scheduler']['placed_gb']} | {hd['kube-scheduler']['nodes_over_label']} |",
        f"| shoal (GPUMemory) | {hd['shoal']['placed_gb']} | {hd['shoal']['nodes_over_label']} |",
        "",
        f"### gang: {results['gang']['members']} members × 8 GPUs on {results['gang']['nodes']:,} nodes: "
        f"{results['gang']['seconds']:.2f} s from the last member created to all bound",
    ]


def _topology(results: dict[str, Any]) -> list[str]:
    """The topology scenario (bench/e2e_topology.py), when the run had it."""
    topo = results.get("topology")
    if not topo:
        return []
    lines = [
        "",
        "### topology: gangs of 8 / 16 / 64 × 8 GPUs required in one clique / rack / block",
        "",
        "1,024 nodes (zones of 512, blocks of 128, racks of 32, NVLink cliques of 8), half the racks",
        "fragmented by bound background pods; 12 native `scheduling.k8s.io/v1beta1` PodGroups with",
        "`schedulingConstraints.topology`, created one after the other; the same objects for both.",
        "",
        "| scheduler | gangs bound | inside one domain | gang latency p50 s | pods/s | whole racks left free |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("kube-scheduler", "shoal"):
        r = topo[name]
        lines.append(
            f"| {name} | {r['gangs_bound']}/{r['gangs']} | {r['domain_fit']:.2f} | {_f(r['gang_latency_p50_s'])} "
            f"| {r['pods_per_s']:.1f} | {r['free_racks']} |"
        )
    return lines


def _preemption(results: dict[str, Any]) -> list[str]:
    """scheduler_perf's PreemptionBasic and the gang-preemption scenario (bench/e2e_preemption.py)."""
    pre, gang = results.get("preemption"), results.get("gang_preemption")
    if not pre or not gang:
        return []
    lines = [
        "",
        f"### preemption: scheduler_perf's PreemptionBasic ({pre['shoal']['nodes']:,} nodes of 4 cpu, "
        f"4 low-priority pods each, {pre['shoal']['preemptors']:,} high-priority pods of 3970m)",
        "",
        "| scheduler | preemptors bound | seconds | pods/s | pods evicted |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("kube-scheduler", "shoal"):
        r = pre[name]
        lines.append(
            f"| {name} | {r['bound']:,} | {r['seconds']:.1f} | {r['pods_per_s']:.1f} | {r['victims']:,} |"
        )
    lines += [
        "",
        "### gang preemption: a high-priority gang of 8 × 4 cpu on 16 full nodes (fewest victims: 8)",
        "",
        "| scheduler | members bound | pods evicted | beyond the minimum |",
        "|---|---:|---:|---:|",
    ]
    for name in ("kube-scheduler", "shoal"):
        r = gang[name]
        excess = "—" if r["excess_victims"] is None else str(r["excess_victims"])
        lines.append(f"| {name} | {r['bound']}/8 | {r['evicted']} | {excess} |")
    return lines
