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
    cluster = InMemoryCluster(
        [
            {"kind": "Secret", "metadata": {"name": "x"}},
            {"kind": "ConfigMap", "metadata": {"name": "a"}},
            {"kind": "ConfigMap", "metadata": {"name": "b"}},
        ]
    )
    assert cluster.skipped_line() == "skipped 3 objects of kinds no placement reads: ConfigMap 2, Secret 1"
    assert InMemoryCluster().skipped_line() == ""


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


def priority_class(name: str, value: int, **extra: object) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def test_priority_classes_resolve_as_admission_does() -> None:
    """A pod written with ``priorityClassName`` and no ``priority`` (as users write pods, before
    admission) takes the class's value and preemption policy; one with neither takes the
    ``globalDefault`` class; a dump's pods keep the priority the API server gave them."""
    cluster = InMemoryCluster(
        [
            make_node("n1"),
            make_pod("train", priority_class="batch-high"),
            make_pod("plain"),
            make_pod("critical", priority_class="system-node-critical"),
            make_pod("dumped", priority=7, priority_class="batch-high"),
            priority_class("batch-high", 1000, preemptionPolicy="Never"),
            priority_class("batch-default", 10, globalDefault=True),
        ]
    )
    sim = Simulation(cluster)
    by_name = {p.name: p for p in sim.scheduler.cache.pods.values()}
    assert (by_name["train"].priority, by_name["train"].preemption_policy) == (1000, "Never")
    assert by_name["plain"].priority == 10
    assert by_name["critical"].priority == 2_000_001_000
    assert by_name["dumped"].priority == 7


def test_a_pod_naming_a_missing_priority_class_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([make_node("n1"), make_pod("p", priority_class="nope")]))
    assert main(["simulate", "--cluster", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no PriorityClass 'nope'" in err and len(err.strip().splitlines()) == 1


def test_a_what_if_preemption_honours_pod_disruption_budgets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two nodes, each full with one low-priority pod; without a budget DefaultPreemption takes
    n2 (its tie-break between equal candidates); with the pod on n2 covered by a budget that
    allows no disruption it prefers the node whose victim violates nothing, n1."""
    objects: list[dict[str, object]] = [
        make_node("n1", cpu="2"),
        make_node("n2", cpu="2"),
        make_pod("free", cpu="2", memory=None, priority=0, node_name="n1", labels={"app": "web"}),
        make_pod("guarded", cpu="2", memory=None, priority=0, node_name="n2", labels={"app": "db"}),
        make_pod("high", cpu="2", memory=None, priority=100),
    ]
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": 0},
    }
    for with_pdb, victim in ((False, "default/guarded on n2"), (True, "default/free on n1")):
        path = tmp_path / f"cluster-{with_pdb}.yaml"
        path.write_text(yaml.safe_dump_all([*objects, *([pdb] if with_pdb else [])]))
        assert main(["simulate", "--cluster", str(path)]) == 0
        assert f"default/high preempted {victim}" in capsys.readouterr().out


def test_a_whole_kubectl_get_all_namespaces_dump_loads_skipping_what_no_placement_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kubectl get nodes,pods,configmaps,events,deployments,priorityclasses -A -o yaml`` as it
    comes: one ``List``; the kinds that change no decision are skipped with one line saying how
    many of which, and the pods are placed."""
    dump = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            make_node("n1"),
            {**make_pod("web", priority_class="batch-high"), "status": {"phase": "Pending"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "x"}},
            {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e.1", "namespace": "x"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "x"}},
            priority_class("batch-high", 1000),
        ],
    }
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    assert main(["simulate", "--cluster", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == "skipped 4 objects of kinds no placement reads: ConfigMap 2, Deployment 1, Event 1"
    assert "1/1 pending pods placed on 1 nodes" in out
