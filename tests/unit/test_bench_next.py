"""bench/e2e_next.py (the race against the next release) and its gang preemption in one rack:
the objects match scheduler_perf's templates, and the figures come out of the results as said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import e2e, e2e_next, e2e_preemption


def test_nodes_and_gangs_follow_scheduler_perfs_templates() -> None:
    nodes = e2e_next.nodes(250)
    assert nodes[0]["metadata"]["labels"][e2e_next.RACK] == "rack-0"
    assert nodes[199]["metadata"]["labels"][e2e_next.RACK] == "rack-1"
    assert nodes[249]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-2"
    assert nodes[0]["status"]["allocatable"]["cpu"] == "4"
    groups, pods = e2e_next.gangs(3, 4, "gpu-scheduler")
    assert [g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in groups] == [4, 4, 4]
    assert groups[0]["spec"]["schedulingConstraints"]["topology"] == [{"key": e2e_next.RACK}]
    assert len(pods) == 12
    assert pods[5]["spec"]["schedulingGroup"] == {"podGroupName": "group-1"}
    assert pods[5]["spec"]["schedulerName"] == "gpu-scheduler"
    assert pods[5]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


def test_quality_counts_gangs_in_one_rack_and_untouched_racks() -> None:
    bound = {
        "test-tas-scheduling-0": "node-0",
        "test-tas-scheduling-1": "node-99",  # gang 0: rack 0 only
        "test-tas-scheduling-2": "node-100",
        "test-tas-scheduling-3": "node-250",  # gang 1: racks 1 and 2
    }
    q = e2e_next.quality(bound, count=3, members=2, nodes_count=500)
    assert q == {"gangs": 3, "gangs_placed": 2, "one_rack": 0.5, "free_racks": 2}
    assert e2e_next.quality({}, 1, 2, 500)["one_rack"] is None


def _run(per_s: float, one_rack: float = 1.0, bound: bool = True) -> dict[str, Any]:
    return {
        "pods_per_s": per_s,
        "one_rack": one_rack,
        "free_racks": 3,
        "all_bound": bound,
        "p50_s": None,
        "p99_s": None,
        "cpu_s": 1.0,
        "peak_rss_mb": 100.0,
    }


def _kinds(shoal: dict[str, Any], kube: dict[str, Any], every: dict[str, Any]) -> dict[str, Any]:
    """One workload's runs: shoal, kube-scheduler as it ships, kube-scheduler scoring every placement."""
    return {"shoal": shoal, "kube-scheduler": kube, "kube-all-placements": every}


def test_summary_is_the_geometric_mean_of_backlog_ratios_against_kube_as_it_ships() -> None:
    results = {
        "gangs": {
            "750x4-backlog": _kinds(_run(800), _run(400), _run(100)),
            "3x1000-backlog": _kinds(_run(1000, one_rack=1.0), _run(500, one_rack=0.5), _run(250)),
            # the streamed run is not a backlog ratio
            "750x4-stream": _kinds(_run(1), _run(1000), _run(1)),
        },
        "basic": {"shoal": _run(300), "kube-scheduler": _run(200)},
        "topology_gang_preemption": {
            "shoal": e2e_preemption.topo_outcome(["a", "b"], {"b"}, {"tg-0": "tnode-04"}),
            "kube-scheduler": e2e_preemption.topo_outcome(["a", "b"], set(), {}),
        },
    }
    s = e2e_next.summary(results)
    assert s["k138_topology_ratio"] == pytest.approx(2.0)
    assert s["k138_topology_ratio_all_placements"] == pytest.approx(4.0 * 2**0.5)  # sqrt(8 * 4)
    assert s["k138_topology_quality"] == pytest.approx(2**0.5)  # sqrt(1 * 2)
    assert s["k138_basic_ratio"] == pytest.approx(1.5)
    assert s["k138_topology_all_bound"] is True
    assert s["k138_topology_free_racks"]["750x4-backlog"]["shoal"] == 3
    assert s["gang_topology_preemption_racks"] == ["rack-1"]
    assert s["gang_topology_preemption_excess_victims_kube"] is None  # the gang never bound
    lines = "\n".join(
        e2e_next.doc_lines(
            {
                "results": results,
                "summary": s,
                "kube_version": "v1.38.0-beta.0",
                "date": "2026-12-06",
                "commit": "abc",
                "machine": "m",
            }
        )
    )
    assert "| 750x4-backlog | shoal | 800 |" in lines
    assert "| basic-stream | kube | 200 |" in lines
    assert "victim gangs left partial" in lines


def test_the_topology_preemption_fleet_has_one_cheapest_rack() -> None:
    """rack-1 costs 4 victims; rack-3 costs 4 only if the victim gang is left partial."""
    victims = [o for o in e2e_preemption.topo_victims("ns") if o["kind"] == "Pod"]
    per_node: dict[str, float] = {}
    for v in victims:
        cpu = float(v["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        per_node[v["spec"]["nodeName"]] = per_node.get(v["spec"]["nodeName"], 0.0) + cpu
    assert per_node == {f"tnode-{i:02d}": 4.0 for i in range(16)}  # every node full
    rack1 = [v for v in victims if v["spec"]["nodeName"] in {f"tnode-{i:02d}" for i in range(4, 8)}]
    assert len(rack1) == e2e_preemption.TOPO_MIN_VICTIMS
    gang = [v for v in victims if v["spec"].get("schedulingGroup") == {"podGroupName": "vg"}]
    assert sorted(v["spec"]["nodeName"] for v in gang) == ["tnode-08", "tnode-09", "tnode-12", "tnode-13"]
    group = e2e_preemption.topo_victims("ns")[0]
    assert group["spec"]["priorityClassName"] == "topo-p5"  # 1.38: the gang's priority is its members'


def test_topo_outcome_names_a_partial_victim_gang() -> None:
    victims = ["vg-08", "vg-09", "vg-12", "vg-13", "tv-14", "tv-15"]
    remaining = {"vg-08", "vg-09"}
    bound = {f"tg-{i}": f"tnode-{12 + i}" for i in range(4)}
    out = e2e_preemption.topo_outcome(victims, remaining, bound)
    assert out["partial_victim_gangs"] == 1
    assert out["racks"] == ["rack-3"]
    assert out["excess_victims"] == 0 and not out["best_rack"]


def test_bench_e2e_keeps_the_next_releases_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "e2e.json"
    results.write_text(
        '{"k138_topology_ratio": 2.5, "gang_topology_preemption_excess_victims": 0, "basic_ratio": 1}'
    )
    monkeypatch.setattr(e2e, "RESULTS", results)
    out = e2e.recorded({"basic_ratio": 2.0}, {"basic": {}})
    assert out == {
        "basic_ratio": 2.0,  # the new run's figure, not the file's
        "k138_topology_ratio": 2.5,
        "gang_topology_preemption_excess_victims": 0,
        "results": {"basic": {}},
    }


def test_the_race_needs_a_release_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SHOAL_KUBE_VERSION", raising=False)
    assert e2e_next.main([]) == 2
    assert "SHOAL_KUBE_VERSION" in capsys.readouterr().out
    assert e2e_next.main(["--workloads", "nope"]) == 2
    assert "unknown workload nope" in capsys.readouterr().out


def test_a_workload_without_a_ratio_leaves_no_figure_rather_than_dropping_out() -> None:
    results = {
        "gangs": {
            "750x4-backlog": _kinds(_run(800), _run(400), _run(100)),
            "9x1000-backlog": _kinds(_run(0, bound=False), _run(300), _run(50)),
        }
    }
    s = e2e_next.summary(results)
    assert s["k138_topology_ratio"] is None and s["k138_topology_all_bound"] is False


def test_composite_jobs_nest_a_replica_per_rack_inside_a_block() -> None:
    nodes = e2e_next.cpg_nodes(800)
    labels = nodes[450]["metadata"]["labels"]
    assert (labels[e2e_next.RACK], labels[e2e_next.BLOCK]) == ("rack-4", "block-1")
    groups, pods = e2e_next.cpg_jobs("gpu-scheduler", jobs=2)
    kinds = [g["kind"] for g in groups]
    assert kinds.count("CompositePodGroup") == 2 and kinds.count("PodGroup") == 2 * e2e_next.CPG_REPLICAS
    job = groups[0]["spec"]
    assert job["schedulingPolicy"] == {"gang": {"minGroupCount": e2e_next.CPG_REPLICAS}}
    assert job["schedulingConstraints"]["topology"] == [{"key": e2e_next.BLOCK}]
    replica = groups[1]["spec"]
    assert replica["parentCompositePodGroupName"] == "job-0"
    assert replica["schedulingConstraints"]["topology"] == [{"key": e2e_next.RACK}]
    assert len(pods) == 2 * e2e_next.CPG_REPLICAS * e2e_next.CPG_PODS


def test_a_job_is_whole_only_with_every_pod_bound_a_rack_per_replica_one_block() -> None:
    per_rack = e2e_next.PER_RACK

    def node_in(rack: int) -> str:
        return f"node-{rack * per_rack}"

    def job(j: int, racks: list[int]) -> dict[str, str]:
        return {
            f"job-{j}-r{r}-{i}": node_in(rack)
            for r, rack in enumerate(racks)
            for i in range(e2e_next.CPG_PODS)
        }

    whole = job(0, [0, 1, 2, 3])  # block-0
    across = job(1, [3, 4, 5, 6])  # blocks 0 and 1
    split = job(2, [8, 9, 10, 11])
    split["job-2-r0-0"] = node_in(9)  # replica 0 over two racks
    partial = job(3, [12, 13, 14, 15])
    del partial["job-3-r3-0"]
    out = e2e_next.cpg_whole({**whole, **across, **split, **partial}, jobs=4)
    assert out == {"jobs": 4, "jobs_whole": 1, "placed_whole": 0.25}


def test_the_composite_figures_join_the_summary() -> None:
    run = {"pods_per_s": 300.0, "placed_whole": 1.0, "jobs_whole": 10, "jobs": 10, "all_bound": True}
    kube = {**run, "pods_per_s": 100.0, "placed_whole": 0.8, "jobs_whole": 8, "all_bound": False}
    s = e2e_next.summary({"composite": {"shoal": run, "kube-scheduler": kube}})
    assert (s["cpg_placed_whole"], s["cpg_placed_whole_kube"]) == (1.0, 0.8)
    assert s["cpg_ratio"] == pytest.approx(3.0)
