"""kube-scheduler 1.37's spreading-selector helper tables (tests/data/upstream/helper.yaml).

The case's objects go into the cache's SpreadSelectors (as the informers put them); the pod's
default-spreading selector comes from ``SpreadSelectors.default_selector``, which PodTopologySpread
calls, and a Service "selects the pod" by ``SelectorOwner.selects``, which that selector merges.
"""

import pytest

from shoal.core.state.selectors import LabelRequirement, LabelSelector
from shoal.core.state.spreadselectors import SERVICE
from tests.unit.upstream import Case, build, params


def requirement_string(req: LabelRequirement) -> str:
    """As apimachinery's ``Requirement.String()``; shoal keeps ``key=value`` as a one-value In."""
    values = sorted(req.values)
    if req.operator == "In" and len(values) == 1:
        return f"{req.key}={values[0]}"
    if req.operator in ("In", "NotIn"):
        return f"{req.key} {req.operator.lower()} ({','.join(values)})"
    return req.key if req.operator == "Exists" else f"!{req.key}"


def selector_string(selector: LabelSelector | None) -> str:
    """As ``labels.Selector.String()``: requirements sorted by key, comma-joined; "" for none."""
    reqs = sorted(selector.requirements if selector is not None else (), key=lambda r: r.key)
    return ",".join(requirement_string(r) for r in reqs)


@pytest.mark.parametrize("case", params("helper"))
def test_upstream(case: Case) -> None:
    world = build(case)
    selectors, pod = world.handle.cache.spread_selectors, world.pod
    if "services" in case.expect:
        services = [o for o in case.objects if o["kind"] == SERVICE]
        owners = [selectors.get(SERVICE, pod.namespace, str(o["metadata"]["name"])) for o in services]
        got = [o.name for o in owners if o is not None and o.selects(pod.labels)]
        assert got == case.expect["services"]
    if "selector" in case.expect:
        selector = selectors.default_selector(pod.namespace, pod.labels, pod.controller)
        assert selector_string(selector) == case.expect["selector"]
