"""`make demo` end to end: `python -m shoal.demo` starts its own control plane, schedules a GPU
fleet with a real `shoal run`, prints the placement table, stops everything and removes its files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.testing.cluster_cli import processes_mentioning
from shoal.testing.controlplane import python_env

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]


def placement_table(stdout: str) -> dict[str, tuple[str, str, str]]:
    """The printed table as {pod: (scheduler, node, why)}."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:4] == ["POD", "SCHEDULER", "NODE", "WHY"])
    rows: dict[str, tuple[str, str, str]] = {}
    for line in lines[start + 1 :]:
        if line.startswith("shoal demo:") or not line.strip():
            break
        name, scheduler, node, why = line.split(maxsplit=3)
        rows[name] = (scheduler, node, why)
    return rows


@pytest.mark.timeout(420)  # above the demo's own 300 s, so a hung demo still shows its output
def test_demo_places_the_workload_and_cleans_up(tmp_path: Path) -> None:
    # TMPDIR puts the demo's /tmp/shoal-demo-* work directory where this test can see it
    proc = subprocess.run(
        [sys.executable, "-m", "shoal.demo", "--page", str(tmp_path / "fleet.html")],
        cwd=REPO,
        env=python_env({"TMPDIR": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    rows = placement_table(proc.stdout)

    # the 8-pod gang (4 GPUs each): every member bound, inside one rack, two members per node
    gang = {name: row for name, row in rows.items() if name.startswith("llm-train-")}
    assert sorted(gang) == [f"llm-train-{i}" for i in range(8)]
    assert all(sched == "gpu-scheduler" and why == "Scheduled" for sched, _, why in gang.values()), (
        proc.stdout
    )
    nodes = {node for _, node, _ in gang.values()}
    assert len(nodes) == 4 and all(node.startswith("a100-") for node in nodes)
    assert len({int(n.removeprefix("a100-")) // 4 for n in nodes}) == 1, proc.stdout  # one rack of 4
    # the 6-pod gang (8 GPUs each): no rack holds 6 whole nodes, so one zone does
    big = {name: row for name, row in rows.items() if name.startswith("llm-pretrain-")}
    assert len(big) == 6 and all(why == "Scheduled" for _, _, why in big.values()), proc.stdout
    big_nodes = {node for _, node, _ in big.values()}
    assert len(big_nodes) == 6 and len({int(n.removeprefix("a100-")) // 8 for n in big_nodes}) == 1
    gangs = proc.stdout.split("\nGANGS\n", 1)[1]
    assert "pod group default/llm-train in topology.shoal.dev/rack domain" in gangs, proc.stdout
    assert "pod group default/llm-pretrain in topology.kubernetes.io/zone domain" in gangs
    assert "preferred topology.shoal.dev/rack could not hold it" in gangs

    notebooks = {name: row for name, row in rows.items() if name.startswith("notebook-")}
    assert len(notebooks) == 12
    assert all(node != "<pending>" and why == "Scheduled" for _, node, why in notebooks.values()), proc.stdout

    # the impossible pod: pending, with kube-scheduler's wording of why
    sched, node, why = rows["too-big"]
    assert (sched, node) == ("gpu-scheduler", "<pending>")
    assert why.startswith("FailedScheduling: 0/24 nodes are available: ")
    assert "Insufficient nvidia.com/gpu" in why
    assert "node(s) had untolerated taint(s)" in why

    # another scheduler's pods: not touched
    for i in range(3):
        assert rows[f"web-{i}"] == ("default-scheduler", "<pending>", "left alone (another scheduler's pod)")
    assert len(rows) == 8 + 6 + 12 + 1 + 3

    # the fleet page of the final state, from the operator's own /fleet data
    assert f"the fleet page of this state (open it in a browser): {tmp_path / 'fleet.html'}" in proc.stdout
    data = re.search(
        r'<script id="fleet-data" type="application/json">(.*?)</script>',
        (tmp_path / "fleet.html").read_text(),
        re.S,
    )
    assert data is not None
    doc = json.loads(data.group(1))
    assert doc["summary"]["nodes"] == 24 and doc["summary"]["gangsPlaced"] == 2
    assert [p["pod"] for p in doc["pending"]] == ["default/too-big"]

    # everything stopped and removed: no process left running from its directory, no directory
    assert "shoal demo: control plane stopped" in proc.stdout
    assert processes_mentioning(str(tmp_path)) == []
    assert not list(tmp_path.glob("shoal-demo-*")), "the demo left its work directory behind"
