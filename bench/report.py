"""docs/benchmarks.md is shared by the benchmark scripts: each owns one marked section. Every
result names the commit it ran on (:func:`revision`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
#: what a benchmark measures: a change here since a result's commit makes the result stale
#: (tests/unit/test_bench_results.py); bench/results and docs are what it writes
MEASURED = ("operator", "plugins", "bench", "helm/shoal/values.yaml")


def revision(root: Path = ROOT) -> str:
    """The commit the benchmark runs (12 hex digits), ``-dirty`` when what it measures has
    uncommitted changes: such a figure names no code anyone can check out."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *MEASURED, ":(exclude)bench/results"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def write_section(name: str, by: str, lines: list[str], *, first: bool = False, doc: Path = DOC) -> None:
    """Replace the section ``name`` (between its markers) or add it, at the top when ``first``."""
    begin, end = f"<!-- {name}:begin", f"<!-- {name}:end -->"
    section = "\n".join([f"{begin} (written by `{by}`) -->", *lines, end])
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if begin in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    elif first:
        head, sep, rest = text.partition("\n\n")
        text = head + sep + section + "\n\n" + rest
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text)


#: the figures of the summary table: (results file, key, what it is, better when)
HEADLINES: tuple[tuple[str, str, str, str], ...] = (
    ("e2e", "basic_ratio", "pods/s, shoal ÷ kube-scheduler (1,000 nodes, 5,000 pods)", "higher"),
    ("e2e", "antiaffinity_ratio", "pods/s ratio, scheduler_perf's pod anti-affinity workload", "higher"),
    ("e2e", "affinity_ratio", "pods/s ratio, scheduler_perf's pod affinity workload", "higher"),
    ("e2e", "spread_ratio", "pods/s ratio, scheduler_perf's topology spreading workload", "higher"),
    (
        "e2e",
        "topology_pods_per_s_ratio",
        "pods/s ratio, gangs required in one clique / rack / block",
        "higher",
    ),
    (
        "e2e",
        "k138_topology_ratio",
        "pods/s ratio vs kube-scheduler 1.38 as it ships, its GangTopologyAwareScheduling workloads",
        "higher",
    ),
    (
        "e2e",
        "k138_topology_quality",
        "gangs inside one rack, shoal's share ÷ kube-scheduler 1.38's (same workloads)",
        "higher",
    ),
    ("e2e", "k138_basic_ratio", "pods/s ratio vs kube-scheduler 1.38 (1,000 nodes, 5,000 pods)", "higher"),
    (
        "e2e",
        "cpg_placed_whole",
        "CompositePodGroup jobs placed whole (a block per job, a rack per replica), share",
        "higher",
    ),
    ("e2e", "preemption_ratio", "pods/s ratio, scheduler_perf's PreemptionBasic", "higher"),
    ("e2e", "dra_ratio", "pods/s ratio, one-GPU claims from a template", "higher"),
    ("e2e", "backlog_ratio", "pods/s ratio, 5,000 pods waiting before the scheduler starts", "higher"),
    (
        "e2e",
        "ceiling_fraction",
        "backlog pods/s, shoal ÷ a scheduler that only binds (the API's ceiling)",
        "higher",
    ),
    (
        "e2e",
        "packing_ratio",
        "GPUs allocated before the first 8-GPU pod fails, shoal ÷ kube-scheduler",
        "higher",
    ),
    ("e2e", "gang64_seconds", "seconds from a 64-pod gang's last member created to all bound", "lower"),
    ("e2e", "rss_ratio", "peak RSS, shoal ÷ kube-scheduler", "lower"),
    ("core", "median_ms_5000", "ms per scheduling cycle, 5,000 nodes, no API server", "lower"),
    ("core", "median_ms_15000", "ms per scheduling cycle, 15,000 nodes, no API server", "lower"),
)


def write_summary(results: Path = ROOT / "bench" / "results", doc: Path = DOC) -> None:
    """The top of docs/benchmarks.md: the headline figures of the latest recorded runs in one table,
    each with the date and commit it ran on (from bench/results/*.json)."""

    def load(name: str) -> dict[str, Any]:
        path = results / f"{name}.json"
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return data

    runs = {name: load(name) for name in ("e2e", "core")}
    rows = []
    for source, key, what, better in HEADLINES:
        data = runs[source]
        # a figure recorded by another run than the file's (bench/e2e_next.py: ``k138_meta``)
        meta = data.get(f"{key.split('_')[0]}_meta") or data.get("meta") or data
        if key not in data:
            continue
        rows.append(
            f"| {what} | **{float(data[key]):.2f}** | {better} | {meta.get('date', '?')}, "
            f"`{meta.get('commit', 'unrecorded')}` |"
        )
    e2e = runs["e2e"]
    lines = [
        "## Latest recorded run",
        "",
        f"On {e2e.get('machine', 'this machine')}; kube-scheduler and the control plane "
        f"{e2e.get('kube_version', '?')}, built from Go modules. Ratios are shoal ÷ kube-scheduler on the same",
        "objects in the same run (the machine is shared: ratios, not absolute figures, carry over). Each",
        "figure names the commit it ran on; the sections below give every scenario, and the history",
        "after them the runs before.",
        "",
        "| figure | value | better | run |",
        "|---|---:|---|---|",
        *rows,
    ]
    write_section("summary", "the benchmarks, from bench/results", lines, first=True, doc=doc)
