"""Two commits side by side: each one's bench-core, and optionally its `make bench`, alternating.

Why: a change that must not alter speed (a refactor, a move) is checked by running the old and
the new commit's own benchmarks on the same machine in the same minutes. Rounds alternate which
commit goes first, so a shared machine's drift falls on both; the figure kept per commit is the
median over its rounds, and the comparison is new ÷ old.

Each commit is checked out into a worktree of its own (under ``--work``, default a temporary
folder) with a virtualenv of its own, and runs its own ``bench/core.py``, ``bench/topology_core.py``
and, with ``--e2e``, ``bench/e2e.py`` (shoal against kube-scheduler on the local control plane:
its ratios are compared, each already a side-by-side figure). Nothing of the commits' own results
is written; this writes bench/results/compare.json and the "compare" section of
docs/benchmarks.md.

    python bench/compare.py OLD NEW [--rounds 3] [--e2e [--e2e-rounds 1]]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parents[1]))
from bench.report import ROOT, revision, write_section

RESULTS = ROOT / "bench" / "results" / "compare.json"
CORE_LINE = re.compile(r"median ([\d.]+) ms\s+p99 ([\d.]+) ms")
CORE_HEAD = re.compile(r"bench-core: ([\d,]+) nodes")
TOPOLOGY_LINE = re.compile(
    r"gang of (\d+) on ([\d,]+) nodes -> (\S+): search ([\d.]+) ms .*cycle ([\d.]+) ms"
)
#: make bench's ratios compared (each already shoal ÷ kube-scheduler, but gang64_seconds, a time,
#: and dra_gang_placed, a count of gangs shoal placed)
E2E_KEYS = (
    "basic_ratio",
    "antiaffinity_ratio",
    "affinity_ratio",
    "spread_ratio",
    "topology_pods_per_s_ratio",
    "preemption_ratio",
    "dra_ratio",
    "dra_extended_ratio",
    "dra_partitionable_ratio",
    "dra_shared_ratio",
    "dra_gang_placed",
    "backlog_ratio",
    "ceiling_fraction",
    "rss_ratio",
    "gang64_seconds",
)


def sh(args: Sequence[str], cwd: Path, timeout: float | None = None) -> str:
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"compare: {' '.join(args)} failed in {cwd}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.stdout


def checkout(commit: str, work: Path) -> Path:
    """A worktree of ``commit`` with shoal and the bench tools installed in its own virtualenv."""
    full = sh(["git", "rev-parse", "--short=12", f"{commit}^{{commit}}"], ROOT).strip()
    tree = work / full
    if not (tree / ".venv" / "bin" / "python").exists():
        if not tree.exists():
            sh(["git", "worktree", "add", "--detach", str(tree), full], ROOT)
        sh([sys.executable, "-m", "venv", ".venv"], tree)
        sh([".venv/bin/pip", "install", "-q", "-e", ".[test,bench]"], tree)
    return tree


def run_core(tree: Path) -> dict[str, float]:
    """One run of the commit's bench-core: median and p99 ms per nodes, topology search and cycle."""
    env_py = str(tree / ".venv" / "bin" / "python")
    out: dict[str, float] = {}
    nodes = ""
    for line in sh([env_py, "-P", "bench/core.py", "--no-write"], tree).splitlines():
        if head := CORE_HEAD.search(line):
            nodes = head.group(1).replace(",", "")
        elif (found := CORE_LINE.search(line)) and nodes:
            out[f"core_median_ms_{nodes}"] = float(found.group(1))
            out[f"core_p99_ms_{nodes}"] = float(found.group(2))
    for line in sh([env_py, "-P", "bench/topology_core.py", "--no-write"], tree).splitlines():
        if found := TOPOLOGY_LINE.search(line):
            gang = found.group(1)
            out[f"topology_search_ms_gang{gang}"] = float(found.group(4))
            out[f"topology_cycle_ms_gang{gang}"] = float(found.group(5))
    return out


def run_e2e(tree: Path) -> dict[str, float]:
    """One run of the commit's `make bench` (nothing written): the ratios it prints."""
    env_py = str(tree / ".venv" / "bin" / "python")
    text = sh([env_py, "-P", "bench/e2e.py", "--no-write"], tree)
    summary = json.loads(text[text.rindex("\n{") + 1 : text.rindex("\n}") + 2])
    return {k: float(summary[k]) for k in E2E_KEYS if isinstance(summary.get(k), int | float)}


def medians(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = sorted({k for r in runs for k in r})
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def write_doc(payload: Mapping[str, Any]) -> None:
    old, new = payload["old"], payload["commit"]
    lines = [
        f"## Side by side: {old} (old) and {new} (new)",
        "",
        f"Measured {payload['date']} by `bench/compare.py {old} {new}`: each commit's own benchmarks from a",
        f"worktree of its own, {payload['rounds']} alternating round(s) of bench-core and"
        f" {payload['e2e_rounds']} of `make bench` (median per commit). The core",
        "figures are ms per scheduling cycle (lower is better); the end-to-end ones are each commit's",
        "shoal ÷ kube-scheduler ratios (`gang64_seconds` and `rss_ratio`: lower is better;",
        "`dra_gang_placed`: gangs shoal placed, a count).",
        "",
        "| figure | old | new | new ÷ old |",
        "|---|---:|---:|---:|",
    ]
    for key, (a, b) in payload["figures"].items():
        lines.append(f"| `{key}` | {a:.3f} | {b:.3f} | {b / a if a else float('nan'):.2f} |")
    write_section("compare", "python bench/compare.py", lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/compare.py")
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--e2e", action="store_true", help="also each commit's `make bench` (long)")
    parser.add_argument(
        "--e2e-rounds", type=int, default=1, help="rounds that run `make bench` too (default 1)"
    )
    parser.add_argument("--work", type=Path, help="where the worktrees go (default: a temporary folder)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="shoal-compare-"))
    trees = {"old": checkout(args.old, work), "new": checkout(args.new, work)}
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            print(f"compare: round {r + 1}, {which} ({trees[which].name}): bench-core", flush=True)
            measured = run_core(trees[which])
            if args.e2e and r < args.e2e_rounds:
                print(f"compare: round {r + 1}, {which}: make bench", flush=True)
                measured |= run_e2e(trees[which])
            runs[which].append(measured)
    old, new = medians(runs["old"]), medians(runs["new"])
    figures = {k: (old[k], new[k]) for k in old if k in new}
    for key, (a, b) in figures.items():
        print(f"{key:36} old {a:10.3f}  new {b:10.3f}  new/old {b / a if a else float('nan'):.2f}")
    payload = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": trees["new"].name,
        "old": trees["old"].name,
        "bench_commit": revision(),
        "rounds": args.rounds,
        "e2e_rounds": min(args.e2e_rounds, args.rounds) if args.e2e else 0,
        "figures": figures,
        "runs": runs,
    }
    if not args.no_write:
        RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
        write_doc(payload)
        print(f"compare: wrote {RESULTS.relative_to(ROOT)} and docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
