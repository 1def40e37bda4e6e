"""The scheduling algorithm (core/scheduling/schedule_one.py): feasible → PostFilter → sample → score →
select."""

from __future__ import annotations

import random

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Diagnosis, PreFilterResult
from shoal.core.framework.outcomes import ScoreOutcome
from shoal.core.scheduling.schedule_one import sample_rows, schedule_pod, select_host
from shoal.core.state.nodetable import NodeInfo
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from tests.unit.framework.test_runtime import CALLS, Recorder, build
from tests.unit.helpers import pod


class PostFilterRecorder(Recorder):
    def post_filter(self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis) -> Status:
        CALLS.append(f"{self.name}.post_filter")
        return Status.unschedulable("nothing to preempt")


def test_best_node_is_chosen_and_nothing_is_assumed() -> None:
    a = Recorder("A", reject={"n0"}, scores={"n1": 10, "n2": 90})
    fw = build({"filter": [{"name": "A"}], "score": [{"name": "A"}]}, [a])
    placement = schedule_pod(fw, fw.new_cycle_state(), pod(), record=True)
    assert placement.status.ok and placement.node == "n2" and placement.row == 2
    assert placement.diagnosis is None  # only built when it is needed
    assert placement.scores is not None and placement.scores.by_plugin["A"].tolist() == [10, 90]
    assert not fw.handle.cache.is_assumed("uid-p")


def test_prefilter_rejection_is_diagnosed_and_postfilter_does_not_run() -> None:
    a = PostFilterRecorder("A", pre_filter=Status.unschedulable("no such volume", resolvable=False))
    fw = build({"preFilter": [{"name": "A"}], "postFilter": [{"name": "A"}]}, [a])
    placement = schedule_pod(fw, CycleState(), pod())
    assert placement.node is None and placement.status.plugin == "A"
    assert placement.diagnosis is not None and placement.diagnosis.unresolvable
    assert placement.diagnosis.unschedulable_plugins == {"A"}
    assert "A.post_filter" not in CALLS


def test_none_fit_runs_postfilter_unless_what_if() -> None:
    a = PostFilterRecorder("A", reject={"n0", "n1", "n2"})
    fw = build({"filter": [{"name": "A"}], "postFilter": [{"name": "A"}]}, [a])
    placement = schedule_pod(fw, CycleState(), pod())
    assert placement.status.code is Code.UNSCHEDULABLE
    assert placement.status.message == "0/3 nodes are available: 3 A says no. nothing to preempt"
    assert placement.diagnosis is not None and placement.diagnosis.node_reasons == {}  # no names asked
    assert CALLS[-1] == "A.post_filter"
    CALLS.clear()
    placement = schedule_pod(fw, CycleState(), pod(), what_if=True)
    assert "A.post_filter" not in CALLS
    assert placement.diagnosis is not None and set(placement.diagnosis.node_reasons) == {"n0", "n1", "n2"}


def test_filter_error_is_the_placements_status() -> None:
    class Flaky(Recorder):
        def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
            raise OSError("disk")

    fw = build({"filter": [{"name": "F"}]}, [Flaky("F")])
    placement = schedule_pod(fw, CycleState(), pod())
    assert placement.node is None and placement.diagnosis is None
    assert placement.status == Status.error("OSError: disk (node n0)", "F")


def test_what_if_scores_every_feasible_node_and_keeps_the_sampling_where_it_was() -> None:
    fw = build({}, [], nodes=400)
    fw.percentage = 50
    placement = schedule_pod(fw, CycleState(), pod(), what_if=True)
    assert placement.scores is not None and len(placement.scores.rows) == 400
    assert placement.node == "n0"  # all tie at 0: the first, not a random one
    assert fw.next_start == 0
    placement = schedule_pod(fw, CycleState(), pod())
    assert placement.scores is not None and len(placement.scores.rows) == 200
    assert fw.next_start == 200


def test_sampling_rotates_over_the_feasible_rows() -> None:
    fw = build({}, [], nodes=400)
    fw.percentage = 30
    feasible = fw.handle.cache.table.valid_rows()
    first, second = sample_rows(fw, feasible), sample_rows(fw, feasible)
    assert len(first) == len(second) == 120
    assert first[0] == 0 and second[0] == 120
    fw.percentage = 1
    assert len(sample_rows(fw, feasible)) == 100  # never fewer than 100


def test_sampling_takes_a_share_of_all_nodes_not_of_the_feasible_ones() -> None:
    """kube-scheduler's numFeasibleNodesToFind: 30% of 400 nodes is 120 feasible nodes to find,
    however many of the 400 pass; the search goes on where the last one stopped."""
    fw = build({}, [], nodes=400)
    fw.percentage = 30
    every_other = fw.handle.cache.table.valid_rows().copy()
    every_other[1::2] = False  # 200 feasible
    first = sample_rows(fw, every_other)
    assert len(first) == 120 and first[0] == 0 and first[-1] == 238
    assert fw.next_start == 240  # the 121st feasible node, where upstream's search stopped
    second = sample_rows(fw, every_other)
    assert len(second) == 120 and second[0] == 240  # after node 238, the next feasible: 240
    assert set(second) >= {398, 0}  # wraps around
    few = fw.handle.cache.table.valid_rows().copy()
    few[100:] = False  # 100 feasible, fewer than the 120 to find: all of them
    assert len(sample_rows(fw, few)) == 100

    # a PreFilter result of 150 nodes: the share is of those (at least 100), not of the cluster
    named = fw.handle.cache.table.valid_rows().copy()
    named[150:] = False
    assert len(sample_rows(fw, named)) == 120
    assert len(sample_rows(fw, named, n_all=150)) == 100
    pre = PreFilterResult(frozenset({f"n{i}" for i in range(150)} | {"gone"}))
    assert fw.find_feasible(CycleState(), pod(), pre).looked_at == 150


def test_select_host_breaks_ties_at_random_or_takes_the_first() -> None:
    scores = ScoreOutcome(np.array([4, 7, 9], dtype=np.int64), np.array([5, 8, 8], dtype=np.int64))
    assert select_host(scores, None) == 7
    picks = {select_host(scores, random.Random(seed)) for seed in range(20)}
    assert picks == {7, 9}


def test_explain_and_the_cycle_share_the_algorithm() -> None:
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    nodes = [make_node("small", gpus=1), make_node("big", gpus=8), make_node("infra", gpus=8, taints=[taint])]
    s = Simulation(InMemoryCluster(nodes))
    target = PodInfo.from_dict(make_pod("p", gpus=1))
    exp = s.scheduler.explain(target)
    assert exp.best is not None and exp.best == max(exp.totals, key=lambda n: exp.totals[n])
    assert set(exp.totals) == {"small", "big"} and set(exp.scores[exp.best]) >= {"NodeResourcesFit"}
    assert exp.diagnosis.node_reasons["infra"][0] == "TaintToleration"
    assert exp.message == f"would be placed on {exp.best} (score {exp.totals[exp.best]})"
    assert not s.scheduler.cache.is_assumed(target.uid)  # explaining changes nothing
    fw = s.scheduler.profiles[target.scheduler_name]
    assert s.scheduler.cycles.place(fw, fw.new_cycle_state(), target).node == exp.best
    too_big = s.scheduler.explain(PodInfo.from_dict(make_pod("q", gpus=16)))
    assert too_big.best is None and too_big.totals == {}
    assert too_big.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu."
    )
