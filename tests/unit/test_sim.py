"""The in-memory cluster loads real dumps; `shoal simulate` prints the table; CRDs are not stale."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shoal.cli import main
from shoal.kube.crds import all_crds
from shoal.sim.cluster import InMemoryCluster, Simulation, load_objects
from shoal.testing.objects import make_node, make_pod, make_pod_group

DATA = Path(__file__).resolve().parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def test_kubectl_dump_loads_with_usage_counted() -> None:
    cluster = InMemoryCluster.from_yaml(DATA / "kubectl-dump.yaml")
    assert set(cluster.nodes) == {"gpu-a", "gpu-b"}
    assert len(cluster.pods) == 2
    sim = Simulation(cluster)
    table = sim.scheduler.cache.table
    row = table.index["gpu-a"]
    assert (
        int(table.requested[table.resource_row("nvidia.com/gpu"), row]) == 4
    )  # the finished pod is not counted
    assert table.gpu_memory_used[row] == 20
    assert int(table.allocatable[0, row]) == 95800


def test_multi_document_and_bad_input() -> None:
    assert [o["metadata"]["name"] for o in load_objects(DATA / "pending.yaml")] == [
        "wants-15gb",
        "wants-30gb",
    ]
    with pytest.raises(ValueError, match="not a Kubernetes object"):
        load_objects("- 1\n- 2\n")
    with pytest.raises(ValueError, match="unsupported kind"):
        InMemoryCluster([{"kind": "Secret", "metadata": {"name": "x"}}])


def test_simulate_cli_prints_placements_and_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "--cluster",
            str(DATA / "kubectl-dump.yaml"),
            "--pods",
            str(DATA / "pending.yaml"),
            "--profile",
            str(DATA / "profile.yaml"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("team-a/")}
    # gpu-a has 40 - 20 = 20 GB free, gpu-b is tainted: 15 GB fits, 30 GB does not
    assert lines["team-a/wants-15gb"].split()[1] == "gpu-a"
    assert "GPUMemory=" in lines["team-a/wants-15gb"]
    assert "<pending>" in lines["team-a/wants-30gb"]
    assert "0/2 nodes are available: 1 Insufficient GPU memory, 1 node(s) had untolerated taint(s)." in out
    assert "1/2 pending pods placed on 2 nodes" in out


def test_simulate_cli_reports_bad_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"kind": "SchedulingProfile", "spec": {"schedulerName": "x", "plugins": {"bind": []}}})
    )
    code = main(["simulate", "--cluster", str(DATA / "kubectl-dump.yaml"), "--profile", str(bad)])
    assert code == 2
    assert "spec.plugins.bind: at least one plugin required" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["crds", "helm/shoal/files/crds"])
def test_generated_crds_are_up_to_date(folder: str) -> None:
    for filename, crd in all_crds().items():
        path = ROOT / folder / filename
        assert path.exists(), f"{path} missing: run `make crds`"
        assert yaml.safe_load(path.read_text()) == crd, f"{path} is stale: run `make crds`"


def test_simulate_lists_held_and_foreign_pods_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "held.yaml"
    extra.write_text(
        yaml.safe_dump_all(
            [
                make_pod_group("trio", namespace="team-a", min_member=3),
                make_pod("trio-0", namespace="team-a", pod_group="trio", scheduler_name="gpu-scheduler"),
                make_pod("orphan", namespace="team-a", pod_group="nobody", scheduler_name="gpu-scheduler"),
                make_pod("theirs", namespace="team-a", scheduler_name="default-scheduler"),
                make_pod(
                    "odd-note",
                    namespace="team-a",
                    scheduler_name="gpu-scheduler",
                    annotations={"shoal.dev/gpu-memory-gb": "-5"},
                ),
            ]
        )
    )
    code = main(
        ["simulate", "--cluster", str(DATA / "kubectl-dump.yaml"), "--pods", str(extra), "--no-scores"]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("team-a/")}
    assert set(lines) == {"team-a/trio-0", "team-a/orphan", "team-a/theirs", "team-a/odd-note"}
    trio = lines["team-a/trio-0"]
    assert "<pending>" in trio and "held before the queue (Coscheduling)" in trio
    assert "<pending>" in lines["team-a/orphan"] and "nobody" in lines["team-a/orphan"]
    assert "not for shoal" in lines["team-a/theirs"]
    assert "<pending>" not in lines["team-a/odd-note"] and "ignored" in lines["team-a/odd-note"]
    assert "1/4 pending pods placed" in out


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "kind: Pod\nmetadata: {name: p1, namespace: team}\nspec: {containers: not-a-list}\n",
            "Pod team/p1: malformed",
        ),
        ("kind: Pod\nmetadata: {name: p2}\nspec: {tolerations: [1]}\n", "Pod p2: malformed"),
        ("kind: Pod\nmetadata: [1, 2]\n", "metadata must be a mapping"),
    ],
)
def test_a_malformed_object_is_one_line_naming_it(
    text: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\n" + text)
    code = main(["simulate", "--cluster", str(DATA / "kubectl-dump.yaml"), "--pods", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert named in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_simulate_cli_says_what_was_preempted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    low = make_pod("low", cpu="2", memory=None, priority=0, node_name="n1")
    high = make_pod("high", cpu="2", memory=None, priority=100)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([make_node("n1", cpu="2"), low, high]))
    assert main(["simulate", "--cluster", str(path)]) == 0
    out = capsys.readouterr().out
    assert "default/high preempted default/low on n1" in out
    assert "1/1 pending pods placed on 1 nodes" in out


def test_the_kinds_default_spreading_reads_load_and_submit() -> None:
    """Services, ReplicationControllers, ReplicaSets and StatefulSets of a dump feed the
    selectors of default topology spreading; one submitted later does too."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"app": "web"}},
    }
    sim = Simulation(InMemoryCluster([make_node("n1"), service]))
    store = sim.scheduler.cache.spread_selectors
    assert store.get("Service", "shop", "web") is not None
    sim.submit(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
        }
    )
    db = store.get("StatefulSet", "default", "db")
    assert db is not None and [r.key for r in db.requirements] == ["app"]
