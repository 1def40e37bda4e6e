"""The fleet view's document and page, built from a simulation's cache (no API server)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.cli import main
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import POD_GROUP_LABEL, make_node, make_pod, make_pod_group
from shoal.views.fleet import FleetSnapshots, fleet_doc
from shoal.views.page import embed_json, render
from tests.unit.dra_objects import GPU, allocated, claim, device_class

RACK = "topology.shoal.dev/rack"
#: the page's embedded document
DATA = r'<script id="fleet-data" type="application/json">(.*?)</script>'
ZONE = "topology.kubernetes.io/zone"


def mig_node(node: str) -> list[dict[str, Any]]:
    """One 80 GB GPU published as NVIDIA's driver does with MIG: a counter slice and a device
    slice holding the whole GPU and two 3g.40gb partitions, all consuming the GPU's counters."""

    def consumes(memory: str) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]

    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    devices = [
        {"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}, "consumesCounters": consumes("80Gi")},
        *(
            {
                "name": f"mig-3g-{i}",
                "capacity": {"memory": {"value": "40Gi"}},
                "consumesCounters": consumes("40Gi"),
            }
            for i in range(2)
        ),
    ]
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-counters"},
            "spec": {"driver": GPU, "nodeName": node, "pool": pool, "sharedCounters": counters},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-devices"},
            "spec": {"driver": GPU, "nodeName": node, "pool": pool, "devices": devices},
        },
    ]


def gang(name: str, members: int, gpus: int, annotation: str, level: str) -> list[dict[str, Any]]:
    group = make_pod_group(name, min_member=members, annotations={annotation: level})
    return [group, *(make_pod(f"{name}-{i}", gpus=gpus, pod_group=name) for i in range(members))]


def fleet() -> Simulation:
    """Four 8-GPU nodes in two racks of zone-a, one DRA node with a MIG-partitioned GPU (one
    partition held by a claim); a gang of two that fits a rack, a gang of three that requires one
    rack (none has three nodes), and a pod asking for 16 GPUs."""
    nodes = [make_node(f"n{i}", gpus=8, zone="zone-a", rack=f"r{i // 2}") for i in range(4)]
    held = allocated(claim("held"), "m", ["mig-3g-0"])
    objects = [
        *nodes,
        make_node("m", gpus=0, zone="zone-b", rack="r9"),
        device_class(),
        *mig_node("m"),
        held,
        *gang("pair", 2, 8, "shoal.dev/topology-preferred", RACK),
        *gang("trio", 3, 8, "shoal.dev/topology-required", RACK),
        make_pod("huge", gpus=16),
    ]
    sim = Simulation(InMemoryCluster(objects))
    sim.run_sync()
    return sim


def test_the_document_groups_nodes_by_topology_and_shows_gangs_and_why_pods_wait() -> None:
    doc = fleet_doc(fleet().scheduler)
    assert doc["levels"] == [ZONE, RACK]  # outermost first, only the levels nodes carry
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["n0"]["path"] == ["zone-a", "r0"] and by_name["m"]["path"] == ["zone-b", "r9"]
    s = doc["summary"]
    assert (s["nodes"], s["gpus"], s["gpusUsed"]) == (5, 32, 16)
    assert (s["gangsPlaced"], s["gangsWaiting"]) == (1, 1)

    pair = next(g for g in doc["gangs"] if g["name"] == "default/pair")
    assert pair["state"] == "placed" and pair["placed"] == 2
    rack = by_name[pair["nodes"][0]]["path"][1]
    assert pair["domain"] == f"{RACK}={rack}" and pair["worstCost"] == 4.0  # the default rack cost
    assert {by_name[n]["path"][1] for n in pair["nodes"]} == {rack}

    trio = next(g for g in doc["gangs"] if g["name"] == "default/trio")
    assert trio["state"] == "waiting" and trio["placed"] == 0
    assert trio["lines"][0].startswith("pod group default/trio")

    # GPU memory from DRA: the MIG GPU's 80 GB counted once, the held partition's 40 GB taken
    m = by_name["m"]
    assert (m["gpuMemoryGB"], m["gpuMemoryFreeGB"]) == (80.0, 40.0)
    devices = {d["name"]: d for d in m["devices"]}
    assert devices["gpu-0"]["kind"] == "partition" and devices["gpu-0"]["memoryGB"] == 80.0
    assert devices["mig-3g-0"]["claim"] == "default/held" and devices["mig-3g-1"]["claim"] is None

    pending = {p["pod"]: p for p in doc["pending"]}
    assert {"default/huge", "default/trio-0", "default/trio-1", "default/trio-2"} <= set(pending)
    huge = pending["default/huge"]
    assert huge["explained"] and huge["fits"] == 0
    assert huge["message"].startswith("0/5 nodes are available")
    assert {r["plugin"] for r in huge["rejections"]} == {"NodeResourcesFit"}
    assert sum(r["nodes"] for r in huge["rejections"]) == 5


def test_only_the_first_pending_pods_are_explained_per_node() -> None:
    doc = fleet_doc(fleet().scheduler, explain=1)
    explained = [p for p in doc["pending"] if p["explained"]]
    assert len(explained) == 1 and explained[0]["pod"] == "default/huge"
    # the others carry what their last attempt said, read from the queue (no what-if cycle)
    others = [p for p in doc["pending"] if not p["explained"]]
    assert [p["pod"] for p in others] == [f"default/trio-{i}" for i in range(3)]
    assert all("no topology.shoal.dev/rack domain can hold its members" in p["message"] for p in others)


def test_the_page_embeds_the_document_so_no_name_can_end_its_script() -> None:
    doc = {"nodes": [{"name": "</script><script>alert(1)</script>"}], "profile": "p"}
    text = render(doc)
    data = re.search(DATA, text, re.S)
    assert data is not None
    assert "</script>" not in data.group(1)
    assert json.loads(data.group(1)) == doc
    assert json.loads(embed_json("a<!--b&c")) == "a<!--b&c"
    assert 'data-live="0"' in text and "http" not in text.split("<script>")[1]  # nothing fetched


def test_snapshots_are_built_again_only_after_their_ttl() -> None:
    now = [0.0]
    sim = fleet()
    snaps = FleetSnapshots(sim.scheduler, ttl=2.0, clock=lambda: now[0])
    first = snaps.get()
    now[0] = 1.9
    assert snaps.get() is first
    body = snaps.body()
    assert json.loads(body) == first and snaps.body() is body  # encoded once per document
    now[0] = 2.0
    assert snaps.get() is not first
    assert snaps.body() is not body


def test_simulate_writes_the_page_and_says_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([make_node("n1", gpus=8, zone="z", rack="r"), make_pod("p", gpus=1)]))
    page = tmp_path / "fleet.html"
    assert main(["simulate", "--cluster", str(path), "--html", str(page)]) == 0
    assert capsys.readouterr().err.strip() == f"fleet page: {page}"
    data = re.search(
        r'<script id="fleet-data" type="application/json">(.*?)</script>', page.read_text(), re.S
    )
    assert data is not None
    assert json.loads(data.group(1))["summary"]["gpusUsed"] == 1
    missing = tmp_path / "no" / "such" / "dir" / "fleet.html"
    assert main(["simulate", "--cluster", str(path), "--html", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"shoal: error: cannot write {missing}") and "Traceback" not in err


def test_gang_labels_are_read_from_the_pod_group_label() -> None:
    """The view's gangs are the scheduler's: members join by the scheduler-plugins label."""
    sim = fleet()
    members = [
        p for p in sim.cluster.pods.values() if (p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
    ]
    assert len(members) == 5
