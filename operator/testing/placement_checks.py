"""Does a set of bound pods honour their placement constraints? (Any scheduler's result.)

Used by the differential tests to check kube-scheduler's placements and shoal's by the same
rules, read from the API server's objects. Each check is the constraint's meaning for the final
state, which every placement made one pod at a time (pods only added) must satisfy:

* nodeSelector and required node affinity match the node's labels;
* every NoSchedule / NoExecute taint of the node is tolerated;
* required pod anti-affinity: no other bound pod the term matches shares the node's domain;
* required pod affinity: every term has a bound pod it matches in the node's domain (the pod
  itself counts, which is how the first pod of a self-affine group is placed);
* DoNotSchedule topology spread: the pod's domain holds at most ``maxSkew`` more matching pods
  than the emptiest eligible domain (0 while there are fewer domains than ``minDomains``).

Each violation is one sentence naming the pod, node and constraint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.core.state.selectors import PodAffinityTerm, SpreadConstraint
from shoal.plugins.tainttoleration import first_untolerated


def _node_affinity_ok(pod: PodInfo, node: NodeSpec) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_terms is None:
        return True
    return any(t.matches(node.name, node.labels) for t in pod.required_terms)


def _matches(term: PodAffinityTerm, other: PodInfo, namespaces: Mapping[str, dict[str, str]]) -> bool:
    return term.matches(other.namespace, other.labels, namespaces.get(other.namespace))


def _domain(node: NodeSpec | None, key: str) -> str | None:
    return None if node is None else node.labels.get(key)


def _affinity_violations(
    pod: PodInfo, nodes: Mapping[str, NodeSpec], bound: Sequence[PodInfo], ns: Mapping[str, dict[str, str]]
) -> list[str]:
    out: list[str] = []
    here = nodes[pod.node_name]
    for t in pod.pod_affinity.required_anti:
        value = _domain(here, t.topology_key)
        if value is None:
            continue
        for other in bound:
            same_domain = _domain(nodes.get(other.node_name), t.topology_key) == value
            if other.uid != pod.uid and same_domain and _matches(t, other, ns):
                out.append(
                    f"pod {pod.key} on {pod.node_name} shares {t.topology_key}={value} with {other.key}, "
                    "which its required anti-affinity forbids"
                )
                break
    for t in pod.pod_affinity.required:
        value = _domain(here, t.topology_key)
        ok = value is not None and any(
            _domain(nodes.get(o.node_name), t.topology_key) == value and _matches(t, o, ns) for o in bound
        )
        if not ok:
            out.append(
                f"pod {pod.key} on {pod.node_name}: no pod its required affinity matches in "
                f"{t.topology_key}={value}"
            )
    return out


def _spread_violation(
    pod: PodInfo, c: SpreadConstraint, nodes: Mapping[str, NodeSpec], bound: Sequence[PodInfo]
) -> str | None:
    keys = [k.topology_key for k in pod.topology_spread if k.when_unsatisfiable == "DoNotSchedule"]
    eligible = [
        n
        for n in nodes.values()
        if all(k in n.labels for k in keys)
        and (c.node_affinity_policy != "Honor" or _node_affinity_ok(pod, n))
        and (c.node_taints_policy != "Honor" or first_untolerated(n.taints, pod.tolerations) is None)
    ]
    domains = {n.labels[c.topology_key] for n in eligible}
    counts: Counter[str] = Counter()
    eligible_names = {n.name for n in eligible}
    for other in bound:
        if other.namespace == pod.namespace and other.node_name in eligible_names and c.counts(other.labels):
            counts[nodes[other.node_name].labels[c.topology_key]] += 1
    here = nodes[pod.node_name].labels.get(c.topology_key)
    if here is None:
        return f"pod {pod.key} on {pod.node_name}, which has no {c.topology_key} label to spread over"
    low = min((counts[d] for d in domains), default=0)
    if len(domains) < c.min_domains:
        low = 0
    if counts[here] - low > c.max_skew:
        return (
            f"pod {pod.key} on {pod.node_name}: {c.topology_key}={here} holds {counts[here]} matching pods, "
            f"{counts[here] - low} more than the emptiest domain (maxSkew {c.max_skew})"
        )
    return None


def constraint_violations(
    nodes: Mapping[str, NodeSpec],
    pods: Sequence[PodInfo],
    namespaces: Mapping[str, dict[str, str]] | None = None,
) -> list[str]:
    """Every constraint a bound pod breaks, as sentences (empty: all honoured)."""
    ns = namespaces or {}
    bound = [p for p in pods if p.bound and p.node_name in nodes and not p.terminated]
    out: list[str] = []
    for pod in bound:
        node = nodes[pod.node_name]
        if not _node_affinity_ok(pod, node):
            out.append(f"pod {pod.key} is on {node.name}, which its nodeSelector / node affinity excludes")
        taint = first_untolerated(node.taints, pod.tolerations)
        if taint is not None:
            out.append(f"pod {pod.key} is on {node.name}, whose taint {taint} it does not tolerate")
        out.extend(_affinity_violations(pod, nodes, bound, ns))
        for c in pod.topology_spread:
            if c.when_unsatisfiable == "DoNotSchedule":
                why = _spread_violation(pod, c, nodes, bound)
                if why is not None:
                    out.append(why)
    return out
