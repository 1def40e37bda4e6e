"""core/state/podrequests.py with in-place resize (GA since 1.35): a pod's requests are the per-resource
largest of the spec's, the kubelet's allocated and its actuated sums, as k8s.io/component-helpers'
``PodRequests`` computes them with ``UseStatusResources`` (what kube-scheduler 1.37 counts).

The first cases are component-helpers v0.37.2 resource/helpers_test.go TestPodResourceRequests,
every case that sets ``UseStatusResources: true`` (its names kept); the pod-level cases follow the
same function with the InPlacePodLevelResourcesVerticalScaling path (beta and on in 1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.core.state.objects import PodInfo
from shoal.core.state.podrequests import pod_requests

INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]


def container(name: str, cpu: str, restart_always: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": {"cpu": cpu}}}
    if restart_always:
        c["restartPolicy"] = "Always"
    return c


def status(
    name: str, allocated: dict[str, str] | None = None, actuated: dict[str, str] | None = None
) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": name}
    if allocated is not None:
        cs["allocatedResources"] = allocated
    if actuated is not None:
        cs["resources"] = {"requests": actuated}
    return cs


UPSTREAM: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, int]]] = [
    (
        "resized, infeasible",
        {"containers": [container("container-1", "4")]},
        {"conditions": INFEASIBLE, "containerStatuses": [status("container-1", actuated={"cpu": "2"})]},
        {"cpu": 2000},
    ),
    (
        "resized, infeasible & in-progress",
        {"containers": [container("container-1", "6")]},
        {
            "conditions": INFEASIBLE,
            "containerStatuses": [status("container-1", allocated={"cpu": "4"}, actuated={"cpu": "2"})],
        },
        {"cpu": 4000},
    ),
    (
        "resized, no resize status",
        {"containers": [container("container-1", "4")]},
        {"containerStatuses": [status("container-1", actuated={"cpu": "2"})]},
        {"cpu": 4000},
    ),
    (
        "resized: per-resource 3-way maximum",
        {
            "containers": [
                {
                    "name": "container-1",
                    "resources": {"requests": {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"}},
                }
            ]
        },
        {
            "containerStatuses": [
                status(
                    "container-1",
                    allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                    actuated={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                )
            ]
        },
        {"cpu": 30, "memory": 30_000_000, "ephemeral-storage": 30_000_000_000},
    ),
    (
        "resized, restartable init container, infeasible",
        {"containers": [], "initContainers": [container("restartable-init-1", "4", restart_always=True)]},
        {
            "conditions": INFEASIBLE,
            "initContainerStatuses": [status("restartable-init-1", actuated={"cpu": "2"})],
        },
        {"cpu": 2000},
    ),
    (
        "resized, restartable init container, no resize status",
        {"containers": [], "initContainers": [container("restartable-init-1", "4", restart_always=True)]},
        {"initContainerStatuses": [status("restartable-init-1", actuated={"cpu": "2"})]},
        {"cpu": 4000},
    ),
    (
        "aggregate request resolves max of sums instead of sum of maxes",
        {"containers": [container("c1", "1"), container("c2", "2")]},
        {
            "containerStatuses": [
                status("c1", allocated={"cpu": "2"}),
                status("c2", allocated={"cpu": "1"}),
            ]
        },
        {"cpu": 3000},
    ),
]


@pytest.mark.parametrize(
    ("spec", "pod_status", "want"), [c[1:] for c in UPSTREAM], ids=[c[0] for c in UPSTREAM]
)
def test_upstream_resize_cases(
    spec: dict[str, Any], pod_status: dict[str, Any], want: dict[str, int]
) -> None:
    problems: dict[str, str] = {}
    requests, _, _ = pod_requests(spec, problems, pod_status)
    assert requests == want and not problems


def test_a_pod_being_resized_down_counts_what_it_holds_on_its_node() -> None:
    """A bound pod whose spec was lowered from 4 to 1 CPU, the kubelet still running it with 4: the
    node's table counts 4, as kube-scheduler does (spec alone would let another pod in, which the
    kubelet would then refuse)."""
    obj: dict[str, Any] = {
        "metadata": {"name": "api-0", "namespace": "shop", "uid": "u1"},
        "spec": {"nodeName": "n1", "containers": [container("app", "1")]},
        "status": {
            "phase": "Running",
            "containerStatuses": [status("app", allocated={"cpu": "4"}, actuated={"cpu": "4"})],
        },
    }
    assert PodInfo.from_dict(obj).requests["cpu"] == 4000
    obj["status"]["containerStatuses"] = [status("app", allocated={"cpu": "1"}, actuated={"cpu": "1"})]
    assert PodInfo.from_dict(obj).requests["cpu"] == 1000  # the resize is done


def test_pod_level_status_maps_and_pod_level_resources() -> None:
    """The kubelet's pod-level maps replace the containers' allocated and actuated sums; pod-level
    requests take the largest of the spec and both maps (the spec left out when infeasible)."""
    spec = {"containers": [container("a", "1"), container("b", "1")]}
    maps = {"allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "2500m"}}}
    assert pod_requests(spec, {}, maps)[0] == {"cpu": 3000}
    pod_level = {**spec, "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}
    assert pod_requests(pod_level, {}, maps)[0] == {"cpu": 4000, "memory": 2**30}
    lowered = {**spec, "resources": {"requests": {"cpu": "1"}}}
    assert pod_requests(lowered, {}, maps)[0] == {"cpu": 3000}
    assert pod_requests(pod_level, {}, {**maps, "conditions": INFEASIBLE})[0] == {"cpu": 3000}


def test_a_malformed_status_quantity_is_a_problem_not_a_crash() -> None:
    problems: dict[str, str] = {}
    spec = {"containers": [container("app", "1")]}
    requests, _, _ = pod_requests(
        spec, problems, {"containerStatuses": [status("app", allocated={"cpu": "lots"})]}
    )
    assert requests == {"cpu": 1000} and "status.allocatedResources.cpu" in problems


MALFORMED_STATUSES: list[tuple[str, Any]] = [
    ("status-a-list", ["Running"]),
    ("resources-a-string", {"resources": "big"}),
    ("container-resources-a-list", {"containerStatuses": [{"name": "app", "resources": ["cpu"]}]}),
    ("container-statuses-an-object", {"containerStatuses": {"name": "app"}}),
    ("conditions-a-string", {"conditions": "PodResizePending"}),
    ("quantity-null", {"containerStatuses": [{"name": "app", "allocatedResources": {"cpu": None}}]}),
    ("quantity-an-object", {"allocatedResources": {"cpu": {"value": 2}}, "resources": {"requests": {}}}),
]


@pytest.mark.parametrize(
    "pod_status", [c[1] for c in MALFORMED_STATUSES], ids=[c[0] for c in MALFORMED_STATUSES]
)
def test_a_malformed_status_never_crashes_the_pod_table(pod_status: Any) -> None:
    """The status is the kubelet's to write; whatever shape it takes, the pod keeps its spec's
    requests (or a named problem) instead of an exception in the watch handler."""
    obj: dict[str, Any] = {
        "metadata": {"name": "api-0", "namespace": "shop", "uid": "u1"},
        "spec": {"containers": [container("app", "1")]},
        "status": pod_status,
    }
    pod = PodInfo.from_dict(obj)
    assert pod.requests.get("cpu") == 1000 or pod.problems
