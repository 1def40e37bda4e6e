"""kube-scheduler 1.37's tables for the claim it makes for DRA-backed extended resources
(tests/data/upstream/extended_requests.yaml: Test_createRequestsAndMappings_requests and
Test_createRequestsAndMappings_mappings), run through plugins/dynamicresources/extended.py's
``requests_and_mappings``: per case, the claim's device requests (name, class, ExactCount, count, in
the order returned: sorted by name) and the pod's request mappings (container, resource, request),
compared as upstream's runners compare them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shoal.core.state.podrequests import container_requests
from shoal.plugins.dynamicresources.extended import ExtendedClaim, RequestMapping, requests_and_mappings
from shoal.plugins.dynamicresources.objects import ALLOCATION_EXACT_COUNT, DeviceClassInfo
from tests.unit.upstream import DATA

TABLE = "extended_requests"
KEYS = {"name", "source", "spec", "resources", "classes", "requests", "mappings"}


def cases() -> list[dict[str, Any]]:
    doc = yaml.safe_load((DATA / f"{TABLE}.yaml").read_text())
    out: list[dict[str, Any]] = doc["cases"]
    return out


def params(test: str) -> list[Any]:
    return [pytest.param(c, id=c["name"]) for c in cases() if c["source"].endswith(f" {test}")]


def run(case: dict[str, Any]) -> ExtendedClaim:
    unknown = set(case) - KEYS
    assert not unknown, f"{case['name']}: unknown keys {unknown}"
    classes: dict[str, str] = case["classes"]

    def class_of(resource: str) -> DeviceClassInfo | None:
        name = classes.get(resource)
        return None if name is None else DeviceClassInfo(name=name)

    containers = container_requests(case["spec"])
    return requests_and_mappings(containers, frozenset(case["resources"]), class_of)


def test_table_covers_both_functions() -> None:
    names = [c["name"] for c in cases()]
    assert len(names) == len(set(names)) == 15
    for c in cases():
        assert c["source"].startswith("extendeddynamicresources_test.go Test_createRequestsAndMappings_")
        assert ("requests" in c) != ("mappings" in c), c["name"]


@pytest.mark.parametrize("case", params("Test_createRequestsAndMappings_requests"))
def test_requests(case: dict[str, Any]) -> None:
    claim = run(case)
    got = [
        {"name": r.name, "deviceClassName": r.device_class, "count": r.count, "mode": r.mode}
        for r in claim.requests
    ]
    # upstream expects them already sorted by name, and compares them in order
    want = [{**r, "mode": ALLOCATION_EXACT_COUNT} for r in case["requests"]]
    assert got == want


def mapping_order(m: RequestMapping) -> tuple[str, str]:
    return m.request, m.container


@pytest.mark.parametrize("case", params("Test_createRequestsAndMappings_mappings"))
def test_mappings(case: dict[str, Any]) -> None:
    claim = run(case)
    # as upstream's runner: the returned mappings sorted by requestName, then containerName (the
    # resource name is no key), then compared element by element with the table's, unsorted
    got = [m.as_dict() for m in sorted(claim.mappings, key=mapping_order)]
    assert got == case["mappings"]
