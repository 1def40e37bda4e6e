"""Every figure the README and docs/benchmarks.md cite comes from a run of the code that lands.

A result in bench/results/ names the commit it ran on. It is *stale* when, since that commit,
something it measures changed: a plugin (plugins/), the benchmark's own code (the bench/ modules its
writer imports, documents-only modules aside), or the profiles the chart ships
(helm/shoal/values.yaml's ``profiles``). A stale result in docs/benchmarks.md fails here: record it
again (the make target is in the message). A result shown elsewhere (the soak in
docs/reliability.md, the CPU profiles in docs/profiles.md) may stay stale only while its document
says so where the figures are: ``Stale:`` and the commit they ran on.

The core (operator/) is left out on purpose, as the benchmark issue defined the rule: a refactor
of the core would otherwise make every figure stale at once; a change to how the core behaves
shows in the next recording, and each figure still names its commit.
"""

from __future__ import annotations

import ast
import json
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"

#: bench modules that only write documents and plots from results: what they change is not measured
DOCUMENTS_ONLY = frozenset({"report", "e2e_report"})


@dataclass(frozen=True)
class Recording:
    """Where a result's commit is, which script wrote it, the make target, and the document showing it."""

    file: str
    key: str | None  # None: the top level; else the dict under this key
    writer: str
    target: str
    document: str


RECORDINGS = (
    Recording("e2e.json", None, "e2e", "make bench", "docs/benchmarks.md"),
    Recording("e2e.json", "k138_meta", "e2e_next", "make bench-next", "docs/benchmarks.md"),
    Recording("e2e.json", "cpg_meta", "e2e_next", "make bench-next", "docs/benchmarks.md"),
    Recording("e2e_next.json", None, "e2e_next", "make bench-next", "docs/benchmarks.md"),
    Recording("core.json", "meta", "core", "make bench-core", "docs/benchmarks.md"),
    Recording("topology_core.json", "meta", "topology_core", "make bench-core", "docs/benchmarks.md"),
    Recording("fleet_page.json", "meta", "fleet_page", "make bench-fleet", "docs/benchmarks.md"),
    Recording("fleet_viewers.json", None, "viewer_ab", "make bench-viewers", "docs/benchmarks.md"),
    Recording("soak.json", None, "soak", "make soak", "docs/reliability.md"),
    Recording("profiles.json", None, "e2e", "make bench-profile", "docs/profiles.md"),  # e2e.py --profile
)

#: documents whose figures must be fresh: no notice excuses a stale one there
HEADLINE = frozenset({"README.md", "docs/benchmarks.md"})


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@cache
def history() -> bool:
    try:
        return git("rev-parse", "--is-shallow-repository").strip() == "false"
    except (OSError, subprocess.CalledProcessError):
        return False


def bench_imports(module: str) -> set[str]:
    """The bench modules ``module`` runs: imported (``bench.x``, ``from bench import x``,
    ``from bench.x import``, ``from . import x``, ``from .x import``) or launched as a script (a
    string that is exactly ``x.py`` or ``bench.x``, as ``Path(__file__).with_name("x.py")``)."""
    tree = ast.parse((BENCH / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[1] for alias in node.names if alias.name.startswith("bench."))
        elif isinstance(node, ast.ImportFrom):
            package = "bench" if node.level == 1 else node.module or ""
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif package == "bench":
                found.update(alias.name for alias in node.names)
            elif package.startswith("bench."):
                found.add(package.split(".")[1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if value.endswith(".py") and "/" not in value and " " not in value:
                found.add(value.removesuffix(".py"))
            elif value.startswith("bench.") and value.count(".") == 1:
                found.add(value.split(".")[1])
    return {name for name in found if (BENCH / f"{name}.py").exists()}


def measured_modules(writer: str) -> set[str]:
    """The writer and every bench module it reaches through imports, documents-only modules aside."""
    seen: set[str] = set()
    todo = [writer]
    while todo:
        module = todo.pop()
        if module in seen or module in DOCUMENTS_ONLY:
            continue
        seen.add(module)
        todo.extend(bench_imports(module))
    return seen


def shipped_profiles(text: str) -> Any:
    return (yaml.safe_load(text) or {}).get("profiles")


def changes_since(commit: str, writer: str) -> list[str]:
    """What differs between ``commit`` and the working tree in what ``writer``'s figures measure,
    one line each (a change made and later undone is no change)."""
    paths = ["plugins", *(f"bench/{module}.py" for module in sorted(measured_modules(writer)))]
    lines = git("diff", "--stat=100", commit, "--", *paths).splitlines()[:-1]  # the last: the totals
    values = "helm/shoal/values.yaml"
    try:
        before = shipped_profiles(git("show", f"{commit}:{values}"))
    except subprocess.CalledProcessError:
        before = None  # no chart then
    if before != shipped_profiles((ROOT / values).read_text()):
        lines.append(f"{values}: the profiles the chart ships")
    return [line.strip() for line in lines]


def commit_of(recording: Recording) -> str | None:
    data = json.loads((RESULTS / recording.file).read_text())
    where = data if recording.key is None else data.get(recording.key, {})
    commit = where.get("commit") if isinstance(where, dict) else None
    return commit if isinstance(commit, str) else None


def test_every_result_has_a_recording_entry() -> None:
    """A new results file is classified here, or its freshness would go unchecked."""
    known = {recording.file for recording in RECORDINGS}
    assert {path.name for path in RESULTS.glob("*.json")} == known


def test_the_closure_follows_imports_and_launched_scripts_and_skips_documents_only_modules() -> None:
    viewers = measured_modules("viewer_ab")
    assert {"viewer_ab", "e2e", "fleet_viewers", "e2e_schedulers"} <= viewers
    assert "nullscheduler" in viewers  # run as a process by e2e_schedulers, not imported
    assert not viewers & DOCUMENTS_ONLY
    assert measured_modules("core") == {"core"}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda r: f"{r.file}:{r.key or '.'}")
def test_each_result_ran_on_the_code_it_measures(recording: Recording) -> None:
    if not history():
        pytest.skip("needs the project's whole git history (not a shallow clone, not an sdist)")
    commit = commit_of(recording)
    assert commit is not None, f"bench/results/{recording.file} names no commit: run `{recording.target}`"
    assert not commit.endswith("-dirty"), f"{recording.file} ran on uncommitted code ({commit})"
    try:
        git("merge-base", "--is-ancestor", commit, "HEAD")
    except subprocess.CalledProcessError:
        pytest.fail(f"{recording.file} names {commit}, which is not in this branch's history")
    changed = changes_since(commit, recording.writer)
    if not changed:
        return
    stale = f"{recording.file} ran at {commit[:12]}; what it measures differs since:\n  " + "\n  ".join(
        changed
    )
    if recording.document in HEADLINE:
        pytest.fail(f"{stale}\nrecord it again: `{recording.target}`")
    text = (ROOT / recording.document).read_text()
    assert f"Stale: recorded at `{commit[:12]}`" in text, (
        f"{stale}\nrecord it again (`{recording.target}`), or say in {recording.document} where its"
        f" figures are: 'Stale: recorded at `{commit[:12]}`' and what changed since"
    )
