"""kube-scheduler 1.37's DefaultPreemption tables (``default_preemption_test.go``), as data.

``tests/data/upstream/defaultpreemption.yaml`` keeps each case in the shape of upstream's
builders (``st.MakePod()...``: name, node, priority, requests by upstream's named sizes, start
time in nanoseconds after the epoch, labels, PDBs) and says which table it comes from:

* ``post_filter`` (TestPostFilter): the plugin's PostFilter with the given per-node Filter
  statuses: the status it returns (code, message) and the nomination it leaves;
* ``dry_run`` (TestDryRunPreemption): the candidates (node, victims, PDB violations) of one dry
  run per preemptor, from upstream's seeded offsets;
* ``select_best`` (TestSelectBestCandidate): the node picked among the dry run's candidates;
* ``eligible`` (TestPodEligibleToPreemptOthers): whether the pod may preempt;
* ``select_victims`` (TestSelectVictimsOnNode): the victims on one node and the PDB violations.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Diagnosis
from shoal.core.framework.profile import PluginEntry
from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.disruption import PDBInfo
from shoal.core.state.nodetable import NodeInfo
from shoal.core.state.objects import POD_GROUP_LABEL, NodeSpec, PodGroupInfo, PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins.defaultpreemption.evaluator import (
    dry_run,
    eligible,
    num_candidates,
    pick_one_node,
    select_victims_on_node,
)
from shoal.plugins.defaultpreemption.plugin import DefaultPreemption
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry
from tests.unit.helpers import NoBinder

DATA = Path(__file__).resolve().parents[3] / "data" / "upstream" / "defaultpreemption.yaml"
SIZES = {
    "small": {"cpu": "100m", "memory": "100"},
    "medium": {"cpu": "200m", "memory": "200"},
    "large": {"cpu": "300m", "memory": "300"},
    "veryLarge": {"cpu": "500m", "memory": "500"},
}
PRIORITIES = {"neg": -100, "low": 0, "mid": 100, "high": 1000, "veryHigh": 10000}
LABEL_KEYS = ("hostname", "zone", "region")


# -- upstream's test plugins (framework/testing: FalseFilter, TrueFilter, MatchFilter, FakeFilter) --
class _Fixed:
    def __init__(self, name: str, status: Status) -> None:
        self.name, self.status = name, status

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.status


class _Match:
    name = "MatchFilter"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status() if node.name == pod.name else Status.unschedulable("node didn't match")


def _fixed(name: str, status: Status) -> PluginEntry:
    return PluginEntry(name, lambda args, handle: _Fixed(name, status), None, _Fixed)


TEST_PLUGINS = (
    _fixed("FalseFilter", Status.unschedulable("FalseFilter")),
    _fixed("TrueFilter", Status()),
    _fixed("FakeFilterUnschedulable", Status.unschedulable("FakeFilter")),
    PluginEntry("MatchFilter", lambda args, handle: _Match(), None, _Match),
)


# -- upstream's builders ---------------------------------------------------------------------------
def _priority(value: Any) -> int:
    return PRIORITIES[value] if isinstance(value, str) else int(value)


def make_pod(raw: dict[str, Any]) -> PodInfo:
    """st.MakePod(): no container unless ``req``; ``start`` in nanoseconds after the epoch."""
    req = raw.get("req")
    containers = [{"name": "con0", "resources": {"requests": SIZES[req] if isinstance(req, str) else req}}]
    spec: dict[str, Any] = {"containers": containers if req else [], "schedulerName": "test"}
    spec["priority"] = _priority(raw.get("priority", 0))
    for key, field in (("node", "nodeName"), ("policy", "preemptionPolicy")):
        if key in raw:
            spec[field] = raw[key]
    if "anti_affinity_exists" in raw:  # PodAntiAffinityExists(key, topologyKey, required)
        key, topology = raw["anti_affinity_exists"]
        term = {
            "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]},
            "topologyKey": topology,
        }
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    if "spread" in raw:  # SpreadConstraint(maxSkew, key, DoNotSchedule, Exists(label))
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": skew,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]},
            }
            for skew, key, label in raw["spread"]
        ]
    meta: dict[str, Any] = {"name": raw["name"], "uid": raw.get("uid", raw["name"]), "namespace": "default"}
    meta["labels"] = dict(raw.get("labels") or {})
    if "group" in raw:  # PodGroupName(...): here a scheduler-plugins PodGroup's label
        meta["labels"][POD_GROUP_LABEL] = raw["group"]
    if raw.get("terminating"):
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if "nominated" in raw:
        status["nominatedNodeName"] = raw["nominated"]
    if raw.get("disruption_target"):
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    pod = PodInfo.from_dict({"metadata": meta, "spec": spec, "status": status})
    if "start" in raw:
        pod.start_time = int(raw["start"]) * 1e-9
    return pod


def make_node(path: str, capacity: dict[str, str] | None) -> NodeSpec:
    """st.MakeNode().Capacity(...) (pods: 32), named by "name[/zone[/region]]" as the tables do."""
    parts = path.split("/")
    labels = dict(zip(LABEL_KEYS, parts, strict=False))
    status = {"allocatable": {"pods": "32", **(capacity or SIZES["veryLarge"])}}
    return NodeSpec.from_dict({"metadata": {"name": parts[0], "labels": labels}, "status": status})


def make_pdb(raw: dict[str, Any]) -> PDBInfo:
    return PDBInfo.from_dict(
        {
            "metadata": {"name": raw.get("name", "pdb"), "namespace": "default"},
            "spec": {"selector": {"matchLabels": raw["match"]}},
            "status": {
                "disruptionsAllowed": raw.get("allowed", 0),
                "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in raw.get("disrupted", ())},
            },
        }
    )


def world(case: dict[str, Any]) -> tuple[Framework, DefaultPreemption]:
    registry = load_registry(third_party=False, extra=TEST_PLUGINS)
    scheduler = Scheduler(registry, NoBinder(), defaults=DEFAULT_PLUGINS)
    plugins = case.get("plugins", ["NodeResourcesFit"])
    filters = [*case.get("filters", ()), *plugins]
    points: dict[str, Any] = {p: [] for p in ("preEnqueue", "preScore", "score", "reserve", "permit")}
    points.update(preBind=[], postBind=[], bind=[{"name": "DefaultBinder"}])
    points["preFilter"] = [{"name": n} for n in plugins]
    points["filter"] = [{"name": n} for n in filters]
    points["postFilter"] = [{"name": "DefaultPreemption"}]
    config = [{"name": "DefaultPreemption", "args": case["args"]}] if "args" in case else []
    fw = scheduler.set_profile({"schedulerName": "test", "plugins": points, "pluginConfig": config})
    for path in case["nodes"]:
        capacity = case.get("node_capacities", {}).get(path.split("/")[0]) or case.get("capacity")
        scheduler.on_node(make_node(path, capacity))
    for group in case.get("pod_groups", ()):
        scheduler.cache.set_pod_group(PodGroupInfo("default", group))
    for raw in case.get("pods", ()):
        scheduler.cache.upsert_pod(make_pod(raw))
    for i, raw in enumerate(case.get("pdbs", ())):
        scheduler.cache.pdbs[f"default/pdb{i}"] = make_pdb(raw)
    plugin = fw.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    return fw, plugin


def diagnosis(fw: Framework, statuses: dict[str, str]) -> Diagnosis:
    table = fw.handle.cache.table
    diag = Diagnosis(total_nodes=len(table))
    diag.rejected_rows = np.zeros(table.n, dtype=bool)
    diag.unresolvable_rows = np.zeros(table.n, dtype=bool)
    for node, code in statuses.items():
        row = table.index[node]
        diag.rejected_rows[row] = True
        diag.unresolvable_rows[row] = code == "UnschedulableAndUnresolvable"
    return diag


def sorted_rows(fw: Framework) -> list[int]:
    table = fw.handle.cache.table
    return [table.index[n] for n in sorted(table.index)]


def candidates_of(got: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in got:
        victims = sorted(v.name for v in c.victims)
        out[c.node] = {"victims": victims, "violations": c.pdb_violations} if c.pdb_violations else victims
    return out


# -- the tables ------------------------------------------------------------------------------------
def run_post_filter(case: dict[str, Any]) -> None:
    fw, plugin = world(case)
    pod = make_pod(case["pod"])
    status = plugin.post_filter(CycleState(), pod, diagnosis(fw, case.get("statuses", {})))
    want = case["expect"]
    assert (status.code.title, status.message) == (want["code"], want["message"])
    if "nominated" in want:
        assert fw.handle.cache.nominator.node_of(pod.uid) == want["nominated"]


def run_dry_run(case: dict[str, Any]) -> None:
    fw, plugin = world(case)
    rows = sorted_rows(fw)
    args = plugin.args
    wanted = num_candidates(len(rows), args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute)
    preemptors = case["preemptors"]
    offsets = case.get("offsets") or [0] * len(preemptors)
    for i, raw in enumerate(preemptors):
        got, _ = dry_run(fw, make_pod(raw), rows, list(fw.handle.cache.pdbs.values()), offsets[i], wanted)
        assert candidates_of(got) == (case["expect"][i] or {}), f"cycle {i}"


def run_select_best(case: dict[str, Any]) -> None:
    fw, _ = world(case)
    rows = sorted_rows(fw)
    got, _ = dry_run(fw, make_pod(case["pod"]), rows, [], 0, len(rows))
    best = pick_one_node(got)
    assert best is not None and best.node in case["expect"]


def run_eligible(case: dict[str, Any]) -> None:
    fw, _ = world(case)
    pod = make_pod(case["pod"])
    ok, _ = eligible(fw, pod, diagnosis(fw, case.get("statuses", {})))
    assert ok is case["expect"]


def run_select_victims(case: dict[str, Any]) -> None:
    fw, _ = world(case)
    row = fw.handle.cache.table.index[case["node"]]
    pdbs = list(fw.handle.cache.pdbs.values())
    victims, violations, status = select_victims_on_node(fw, make_pod(case["pod"]), row, pdbs)
    want = case["expect"]
    assert status.code.title == want.get("code", "Success")
    if status.code is Code.SUCCESS:
        assert (sorted(v.name for v in victims), violations) == (
            sorted(want["victims"]),
            want.get("violations", 0),
        )


RUNNERS = {
    "post_filter": run_post_filter,
    "dry_run": run_dry_run,
    "select_best": run_select_best,
    "eligible": run_eligible,
    "select_victims": run_select_victims,
}


def cases() -> list[Any]:
    out = []
    for raw in yaml.safe_load(DATA.read_text())["cases"]:
        marks = [pytest.mark.xfail(strict=True, reason=raw["differs"])] if raw.get("differs") else []
        out.append(pytest.param(raw, id=raw["upstream"].split(" ", 1)[1], marks=marks))
    return out


@pytest.mark.parametrize("case", cases())
def test_upstream_case(case: dict[str, Any]) -> None:
    RUNNERS[case["table"]](copy.deepcopy(case))


def test_every_table_is_covered() -> None:
    tables = {raw["table"] for raw in yaml.safe_load(DATA.read_text())["cases"]}
    assert tables == set(RUNNERS)
