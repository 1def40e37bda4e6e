"""The placement checker catches each kind of broken constraint, built by hand, and passes good ones."""

from __future__ import annotations

from typing import Any

from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.testing.objects import make_node, make_pod
from shoal.testing.placement_checks import constraint_violations


def nodes(*specs: dict[str, Any]) -> dict[str, NodeSpec]:
    return {s["metadata"]["name"]: NodeSpec.from_dict(s) for s in specs}


def zone(name: str, z: str, **kwargs: Any) -> dict[str, Any]:
    return make_node(name, labels={"topology.kubernetes.io/zone": z}, **kwargs)


def pod(name: str, node: str, labels: dict[str, str] | None = None, **spec: Any) -> PodInfo:
    obj = make_pod(name, node_name=node, labels=labels or {})
    obj["spec"].update(spec)
    info = PodInfo.from_dict(obj)
    info.uid = name
    return info


ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}
AFFINE = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}
        ]
    }
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
]


def test_good_placements_pass() -> None:
    ns = nodes(zone("a1", "a"), zone("b1", "b"))
    pods = [
        pod("x", "a1", {"app": "a"}, affinity=ANTI),
        pod("y", "b1", {"app": "a"}, affinity=ANTI),
        pod("db", "a1", {"app": "db"}),
        pod("web", "a1", {"app": "web"}, affinity=AFFINE),
        pod("s1", "a1", {"app": "s"}, topologySpreadConstraints=SPREAD),
        pod("s2", "b1", {"app": "s"}, topologySpreadConstraints=SPREAD),
    ]
    assert constraint_violations(ns, pods) == []


def test_each_broken_constraint_is_named() -> None:
    ns = nodes(zone("a1", "a"), zone("b1", "b", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    pods = [
        pod("x", "a1", {"app": "a"}, affinity=ANTI),
        pod("y", "a1", {"app": "a"}, affinity=ANTI),
        pod("web", "a1", {"app": "web"}, affinity=AFFINE),
        pod("tainted", "b1"),
        pod("picky", "a1", nodeSelector={"disk": "ssd"}),
        pod("s1", "a1", {"app": "s"}, topologySpreadConstraints=SPREAD),
        pod("s2", "a1", {"app": "s"}, topologySpreadConstraints=SPREAD),
    ]
    found = "\n".join(constraint_violations(ns, pods))
    assert "pod default/x on a1 shares kubernetes.io/hostname=a1 with default/y" in found
    assert "pod default/web on a1: no pod its required affinity matches" in found
    assert "pod default/tainted is on b1, whose taint" in found
    assert "pod default/picky is on a1, which its nodeSelector / node affinity excludes" in found
    assert "topology.kubernetes.io/zone=a holds 2 matching pods, 2 more than the emptiest domain" in found
