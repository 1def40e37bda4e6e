"""Every process the benchmarks measure or compete with runs in a session of its own.

With the kernel's autogroup scheduling (on wherever the CPU cgroup is the root one) a session is
one CPU group. A hog started in the bench's session competed only with the load generator, and a
null scheduler there shared one group's CPU with the bench's pod watcher."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench import e2e
from bench.e2e_report import CPU_GROUPS, cpu_groups_note
from bench.e2e_schedulers import NullScheduler
from shoal.testing.controlplane import ControlPlane, stop_process


def children_running(marker: bytes) -> list[int]:
    """This process's children whose command line holds ``marker``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and marker in cmdline:
            found.append(int(stat.parent.name))
    return found


def test_the_cpu_hog_runs_in_its_own_session_and_is_stopped() -> None:
    with e2e.cpu_hog(True):
        hogs = children_running(b"while True: pass")
        assert len(hogs) == 1
        assert os.getsid(hogs[0]) == hogs[0] != os.getsid(0)
    assert not children_running(b"while True: pass")


def test_no_hog_when_off() -> None:
    with e2e.cpu_hog(False):
        assert not children_running(b"while True: pass")


def test_the_null_scheduler_runs_in_its_own_session(tmp_path: Path) -> None:
    null = NullScheduler(ControlPlane(workdir=tmp_path / "cp"), tmp_path)
    proc = null._spawn([sys.executable, "-c", "import time; time.sleep(60)  # null-session-test"])
    try:
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
    finally:
        stop_process(proc)
    assert proc.returncode is not None


def test_the_report_says_how_the_recorded_run_shared_the_cpu() -> None:
    now = " ".join(cpu_groups_note({"cpu_groups": CPU_GROUPS}))
    assert "CPU hog each run in a session" in now and "Recorded before" not in now
    before = " ".join(cpu_groups_note({}))  # results written before the key existed
    assert "Recorded before" in before and "slowed the offered" in before
