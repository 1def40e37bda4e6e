"""``python -m shoal.testing.cluster_cli up|down|serve``: a control plane for manual use.

`make cluster-up` starts a detached supervisor (``serve``) that keeps etcd + kube-apiserver running
in ``.cluster/`` and writes their state; `make cluster-down` stops it by PID (``down``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from shoal.testing.controlplane import ControlPlane, ControlPlaneError, python_env


def _serve(directory: Path) -> int:
    """Run a control plane in ``directory`` until SIGTERM/SIGINT; write its state for `down`."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    cp = ControlPlane(workdir=directory, keep_workdir=True)
    stop = False

    def _on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        cp.start()
    except ControlPlaneError as exc:
        (directory / "error").write_text(str(exc))
        return 1
    (directory / "state.json").write_text(
        json.dumps(
            {"supervisor": os.getpid(), "pids": cp.pids, "url": cp.url, "kubeconfig": str(cp.kubeconfig)}
        )
    )
    try:
        while not stop and all(p.popen.poll() is None for p in cp._procs):
            time.sleep(0.5)
    finally:
        cp.stop()
        (directory / "state.json").unlink(missing_ok=True)
    return 0


def _up(directory: Path, timeout: float) -> int:
    directory = directory.resolve()
    state = directory / "state.json"
    if state.exists():
        info = json.loads(state.read_text())
        if _alive(int(info["supervisor"])):
            print(f"control plane already running at {info['url']}")
            print(f"export KUBECONFIG={info['kubeconfig']}")
            return 0
    log = directory.parent / f"{directory.name}-supervisor.log"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        subprocess.Popen(
            [sys.executable, "-m", "shoal.testing.cluster_cli", "serve", "--dir", str(directory)],
            env=python_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists():
            info = json.loads(state.read_text())
            print(f"control plane running at {info['url']} (etcd + kube-apiserver, pids {info['pids']})")
            print("stop it with: make cluster-down")
            print(f"export KUBECONFIG={info['kubeconfig']}")
            return 0
        if (directory / "error").exists():
            print((directory / "error").read_text(), file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"control plane did not come up in {timeout:.0f} s; see {log}", file=sys.stderr)
    return 1


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes (zombies included: not reaped) whose command line contains ``text``, as
    (PID, command line), read from /proc; nothing is signalled. For tests that prove a stop left
    nothing behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile, or not ours to read
        if text in cmdline:
            found.append((int(entry.name), cmdline))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _down(directory: Path, timeout: float) -> int:
    state = directory.resolve() / "state.json"
    if not state.exists():
        print("no control plane is running")
        return 0
    info = json.loads(state.read_text())
    supervisor = int(info["supervisor"])
    if _alive(supervisor):
        os.kill(supervisor, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (_alive(supervisor) or any(_alive(p) for p in info["pids"])):
        time.sleep(0.2)
    for pid in info["pids"]:  # the supervisor stops them; this is the last resort, still by PID
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    state.unlink(missing_ok=True)
    print("control plane stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.testing.cluster_cli")
    parser.add_argument("command", choices=["up", "down", "serve"])
    parser.add_argument("--dir", type=Path, default=Path(".cluster"))
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args.dir)
    if args.command == "up":
        return _up(args.dir, args.timeout)
    return _down(args.dir, args.timeout)


if __name__ == "__main__":  # make cluster-up / cluster-down
    raise SystemExit(main())
