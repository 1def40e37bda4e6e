"""The nominator (kube-scheduler's UpdateNominatedPod rules) and PDBs as preemption reads them."""

from __future__ import annotations

from dataclasses import replace

from shoal.core.state.disruption import Nominator, PDBInfo
from tests.unit.helpers import pod


def test_a_nomination_follows_the_api_and_survives_unrelated_updates() -> None:
    n = Nominator()
    p = pod("p", priority=10)
    n.nominate(p, "n1")  # in memory, before the status patch comes back
    n.update(p, replace(p, labels={"x": "y"}))  # an update that says nothing about it: kept
    assert n.node_of(p.uid) == "n1" and n.pods_on("n1")[0].labels == {"x": "y"}
    n.update(p, replace(p, nominated_node="n2"))  # the API's value wins
    assert n.node_of(p.uid) == "n2" and n.pods_on("n1") == []
    cleared = replace(p, nominated_node="")
    n.update(replace(p, nominated_node="n2"), cleared)  # dropped in the API: dropped here
    assert n.node_of(p.uid) == "" and len(n) == 0


def test_bound_or_terminating_pods_are_not_nominated() -> None:
    n = Nominator()
    p = pod("p", priority=10)
    n.nominate(p, "n1")
    n.update(p, replace(p, node_name="n1"))
    assert n.node_of(p.uid) == ""
    n.nominate(p, "n1")
    n.update(p, replace(p, terminating=True))
    assert n.node_of(p.uid) == ""


def test_pdb_selector_namespace_and_disrupted_pods() -> None:
    pdb = PDBInfo.from_dict(
        {
            "metadata": {"name": "db", "namespace": "team"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}},
            "status": {"disruptionsAllowed": 2, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}},
        }
    )
    assert pdb.key == "team/db" and pdb.disruptions_allowed == 2 and pdb.disrupted_pods == {"db-0"}
    assert pdb.matches(pod("a", namespace="team", labels={"app": "db"}))
    assert not pdb.matches(pod("b", namespace="other", labels={"app": "db"}))
    bad = PDBInfo.from_dict({"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{}]}}})
    assert bad.selector is None and not bad.matches(pod("c", labels={"app": "db"}))
