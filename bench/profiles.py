"""Where shoal's CPU goes, per scenario: py-spy samples of the shoal process, summarised by part.

``make bench-profile`` (``bench/e2e.py --profile``) runs each scenario with shoal only and
py-spy attached from the moment shoal is ready to the end of the scenario (``--nonblocking``:
the process is never paused, so the figures are what the scenario costs, give or take py-spy's
own sampling on the other core). Every sample is attributed to the first part that owns one of
its frames, looked for in the order of :data:`PARTS` (the scheduling cycle before the metrics it
records, shoal's event handlers before the kopf machinery that calls them). The raw samples
stay in bench's temporary folder; the summary goes to bench/results/profiles.json and
docs/profiles.md.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: (part, what it covers, frame markers: "function" or "function@file-suffix"), in attribution order
PARTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "shoal event handlers",
        "the informer's dispatch, PodInfo/NodeSpec parsing, cache and queue updates",
        ("Informer.dispatch@kube/informer.py",),
    ),
    (
        "scheduling cycle",
        "PreFilter → Filter → Score → Reserve/Permit of every pod, plugins included",
        ("Scheduler._schedule_guarded@core/scheduling/scheduler.py",),
    ),
    (
        "binding",
        "the binding cycle and the Binding POST (aiohttp)",
        (
            "PodCycles._binding_cycle@core/scheduling/schedule_one.py",
            "KubeBinder.bind@kube/binder.py",
            "post_binding@kube/binder.py",
        ),
    ),
    (
        "preemption writes",
        "the preemption executor's patches, deletes and events",
        ("@kube/preemption.py",),  # any frame: the victims' writes run in tasks of their own
    ),
    (
        "events and conditions",
        "the reporter's Scheduled / FailedScheduling events and PodScheduled conditions",
        ("@kube/reporter.py",),
    ),
    (
        "kopf event path",
        "kopf's per-object workers and per-event processing around shoal's handler",
        ("worker@reactor/queueing.py", "process_resource_event@reactor/processing.py"),
    ),
    (
        "watch streams",
        "reading and decoding watch events (kopf's watcher, JSON, TLS)",
        ("watcher@reactor/queueing.py", "watch_objs@clients/watching.py", "stream@clients/api.py"),
    ),
    ("metrics", "Prometheus observations and /metrics", ("@prometheus_client/",)),
)
OTHER = "event loop and other"
#: shoal's frames that only pass control on (left out of the per-function list: they would head it)
WRAPPERS = frozenset(
    {
        "<module>", "main", "_run", "vital", "Scheduler.run", "Scheduler._schedule_guarded",
        "Scheduler.schedule_one", "Scheduler.place", "schedule_pod", "Invoker.call", "Invoker.acall",
        "call_plugin", "Invoker.point", "_scored", "ShoalOperator._on_pod", "Informer._kopf_handler.<locals>.on_event",
    }
)  # fmt: skip


def _frame(raw: str) -> tuple[str, str]:
    """``"func (path/to/file.py:12)"`` -> ``("func", "path/to/file.py")``."""
    name, _, loc = raw.partition(" (")
    return name, loc.rsplit(":", 1)[0]


def _matches(marker: str, name: str, path: str) -> bool:
    func, _, suffix = marker.partition("@")
    return (not func or func == name) and (not suffix or suffix in path)


def _own(path: str) -> bool:
    """A frame of shoal's code (py-spy shortens paths on sys.path: ``operator/core/x.py``)."""
    return path.startswith("operator/") or "/operator/" in path or "/shoal/" in path


def attribute(stack: Sequence[tuple[str, str]]) -> str:
    """The part a sample belongs to (its stack from the root to the leaf)."""
    for part, _, markers in PARTS:
        if any(_matches(m, name, path) for m in markers for name, path in stack):
            return part
    return OTHER


def summarize(lines: Iterable[str], top: int = 12) -> dict[str, Any]:
    """py-spy's raw format (``frame;frame;... count`` per line) -> share per part and the
    functions of shoal's own code with the most inclusive samples."""
    parts: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack_text, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        n = int(count_text)
        total += n
        stack = [_frame(f) for f in stack_text.split(";")]
        parts[attribute(stack)] += n
        for name, path in {(name, path) for name, path in stack if _own(path)}:
            own[f"{name} ({path.rsplit('/', 2)[-2]}/{path.rsplit('/', 1)[-1]})"] += n
    share = {p: parts[p] / total if total else 0.0 for p in [*(p for p, _, _ in PARTS), OTHER]}
    functions = [(f, n / total) for f, n in own.most_common() if f.split(" (")[0] not in WRAPPERS][:top]
    return {"samples": total, "parts": share, "functions": functions}


class Profiler:
    """py-spy record on one process until :meth:`stop` (SIGINT: py-spy writes what it has)."""

    def __init__(self, out: Path, rate: int = 100) -> None:
        self.out = out
        self.rate = rate
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> str | None:
        exe = Path(sys.executable).with_name("py-spy")
        return str(exe) if exe.exists() else shutil.which("py-spy")

    def start(self, pid: int) -> None:
        exe = self.available()
        if exe is None:
            raise RuntimeError("py-spy is not installed (pip install -e '.[bench]')")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        args = [exe, "record", "--nonblocking", "--format", "raw", "--rate", str(self.rate)]
        args += ["-p", str(pid), "-o", str(self.out)]
        with open(self.out.with_suffix(".log"), "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> dict[str, Any] | None:
        """Stop recording; the summary, or None if py-spy wrote nothing."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if not self.out.exists():
            return None
        with open(self.out) as f:
            return summarize(f)


def write_profiles(
    profiles: Mapping[str, Mapping[str, Any]],
    results: Path,
    doc: Path,
    when: str,
    machine: str,
    commit: str = "unrecorded",
) -> None:
    results.parent.mkdir(parents=True, exist_ok=True)
    payload = {"date": when, "commit": commit, "machine": machine, "profiles": profiles}
    results.write_text(json.dumps(payload, indent=2) + "\n")
    doc.write_text("\n".join(profile_doc(profiles, when, machine, commit)) + "\n")


def profile_doc(
    profiles: Mapping[str, Mapping[str, Any]], when: str, machine: str, commit: str = "unrecorded"
) -> list[str]:
    names = list(profiles)
    lines = [
        "# Where shoal's CPU goes",
        "",
        "<!-- written by `make bench-profile` (bench/e2e.py --profile); do not edit by hand -->",
        "",
        "py-spy samples of the shoal process (100 Hz, `--nonblocking`) in each `make bench` scenario,",
        f"shoal only, measured {when} at commit {commit} on {machine}.",
        "Each sample counts for the first part, in the table's order, that one of its frames belongs to:",
        "the scheduling cycle includes the plugins and the metrics they record, shoal's event handlers",
        "include parsing the pod. The scenarios are those of docs/benchmarks.md (same objects and counts;",
        "scale is `make bench-large`'s 5,000 nodes / 50,000 pods).",
        "",
        "| part | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for part in [*(p for p, _, _ in PARTS), OTHER]:
        cells = [f"{100 * profiles[n]['parts'].get(part, 0.0):.0f}%" for n in names]
        lines.append(f"| {part} | " + " | ".join(cells) + " |")
    lines.append("| samples | " + " | ".join(f"{profiles[n]['samples']:,}" for n in names) + " |")
    lines += ["", "What each part covers:", ""]
    lines += [f"- **{part}**: {what}." for part, what, _ in PARTS]
    lines += [
        f"- **{OTHER}**: asyncio's loop, tasks and sockets outside the parts above, the leader lease, the rest."
    ]
    for n in names:
        lines += [
            "",
            f"## {n}: shoal's functions with the most samples (inclusive, dispatchers left out)",
            "",
        ]
        lines += [f"- {100 * share:.1f}% `{func}`" for func, share in profiles[n]["functions"]]
    return lines
