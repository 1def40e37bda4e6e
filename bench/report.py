"""docs/benchmarks.md is shared by the benchmark scripts: each owns one marked section. Every
result names the commit it ran on (:func:`revision`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
