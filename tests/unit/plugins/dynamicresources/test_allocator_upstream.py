"""The structured allocator's table (tests/data/upstream/allocator.yaml): device taints and the
tolerations that let a request use a tainted device, binding conditions (the lists each result
copies from its device, a device that binds to its node), and kube-scheduler's ResourceSlice
tracker cases for DeviceTaintRules, run through DynamicResources' store and allocator, and the
results through the allocation PreBind writes (its node selector too, where a case gives it)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
import yaml

from shoal.core.state.quantity import parse_quantity
from shoal.kube.dra import allocation_body
from shoal.plugins.dynamicresources.allocator import (
    AllocationError,
    InvalidPools,
    Matcher,
    allocate,
    allocation_selector,
)
from shoal.plugins.dynamicresources.objects import (
    AllocatedDevice,
    DeviceClassInfo,
    DeviceTaint,
    DeviceTaintRuleInfo,
    DeviceToleration,
    ResourceClaimInfo,
    ResourceSliceInfo,
)
from shoal.plugins.dynamicresources.store import DraStore
from tests.unit.upstream import DATA

DOC = yaml.safe_load((DATA / "allocator.yaml").read_text())
TAINTS: dict[str, dict[str, str]] = DOC["taints"]
TOLERATIONS: dict[str, dict[str, str]] = DOC["tolerations"]
RULE_TAINT = {"key": "example.com/taint", "value": "tainted", "effect": "NoExecute"}


def named(items: list[Any], table: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """Upstream's short names (``NS``, ``tNE``) as API dicts; a dict stays as written."""
    return [dict(table[i]) if isinstance(i, str) else dict(i) for i in items]


def expand_tolerations(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def fix(raw: dict[str, Any]) -> dict[str, Any]:
        out = dict(raw)
        if "tolerations" in out:
            out["tolerations"] = named(out["tolerations"], TOLERATIONS)
        return out

    result = []
    for r in requests:
        r = dict(r)
        if "exactly" in r:
            r["exactly"] = fix(r["exactly"])
        if "firstAvailable" in r:
            r["firstAvailable"] = [fix(s) for s in r["firstAvailable"]]
        result.append(r)
    return result


def device_class(name: str, driver: str) -> DeviceClassInfo:
    selector = {"cel": {"expression": f'device.driver == "{driver}"'}}
    return DeviceClassInfo.from_dict({"metadata": {"name": name}, "spec": {"selectors": [selector]}})


def rule(i: int, spec: dict[str, Any], taint: dict[str, str]) -> DeviceTaintRuleInfo:
    return DeviceTaintRuleInfo.from_dict(
        {"metadata": {"name": f"rule-{i}"}, "spec": {"taint": taint, **spec}}
    )


def api_slice(raw: dict[str, Any]) -> dict[str, Any]:
    """A slice of the table's short form as the API holds it: driver-a, pool-1 (generation 1, one
    slice) on node-1 unless it says otherwise; devices' short taint names expanded."""
    spec: dict[str, Any] = {
        "driver": raw.get("driver", "driver-a"),
        "pool": {
            "name": raw.get("pool", "pool-1"),
            "generation": raw.get("generation", 1),
            "resourceSliceCount": raw.get("count", 1),
        },
    }
    where = [k for k in ("nodeName", "allNodes", "nodeSelector", "perDeviceNodeSelection") if k in raw]
    spec.update({k: raw[k] for k in where} if where else {"nodeName": "node-1"})
    if "sharedCounters" in raw:
        spec["sharedCounters"] = raw["sharedCounters"]
    if "skipNodeOperations" in raw:
        spec["skipNodeOperations"] = raw["skipNodeOperations"]
    devices = []
    for d in raw.get("devices") or ():
        d = dict(d)
        if d.get("taints"):
            d["taints"] = named(d["taints"], TAINTS)
        devices.append(d)
    if devices:
        spec["devices"] = devices
    return {"metadata": {"name": raw["name"]}, "spec": spec}


def allocation_params() -> list[Any]:
    return [pytest.param(c, id=c["upstream"].split(": ", 1)[1]) for c in DOC["cases"]]


@pytest.mark.parametrize("case", allocation_params())
def test_allocator_case(case: dict[str, Any]) -> None:
    store = DraStore()
    for cls in (device_class("class-a", "driver-a"), device_class("class-b", "driver-b")):
        store.apply(cls)
    default = {"name": "slice-1", "devices": case["devices"]} if "devices" in case else {}
    for raw in case.get("slices") or [{**default, **(case.get("slice") or {})}]:
        store.apply(ResourceSliceInfo.from_dict(api_slice(raw)))
    for i, spec in enumerate(case.get("rules") or ()):
        store.apply(rule(i, {k: v for k, v in spec.items() if k != "taint"}, spec["taint"]))
    specs = case.get("claims") or [{"requests": case["claim"], "constraints": case.get("constraints")}]
    claims = [
        ResourceClaimInfo.from_dict(
            {
                "metadata": {"name": f"claim-{i}", "namespace": "default"},
                "spec": {
                    "devices": {
                        "requests": expand_tolerations(spec["requests"]),
                        "constraints": spec.get("constraints") or [],
                    }
                },
            }
        )
        for i, spec in enumerate(specs)
    ]
    taken = {name if "/" in name else f"driver-a/pool-1/{name}" for name in case.get("taken") or ()}
    node = case.get("node", "node-1")
    labels = {"region": "region-1" if node == "node-1" else "region-2", "planet": "earth"}

    shared = {
        (name if "/" in name else f"driver-a/pool-1/{name}"): {
            k: parse_quantity(str(v)) for k, v in amounts.items()
        }
        for name, amounts in (case.get("shared") or {}).items()
    }

    def run() -> list[tuple[AllocatedDevice, ...]] | None:
        pools = store.pools_for(node, labels)
        return allocate(
            claims,
            pools,
            store.classes,
            lambda d: str(d) in taken,
            Matcher(),
            lambda d: shared.get(str(d)),
            optional_operations=bool(case.get("optional_operations")),
        )

    if "error" in case:
        with pytest.raises((AllocationError, InvalidPools), match=re.escape(case["error"])):
            run()
        return
    found = run()
    if case["expect"] is None:
        assert found is None
        return
    assert found is not None
    expected = case["expect"] if "claims" in case else [case["expect"]]
    assert len(found) == len(expected)
    for claim, results, want_raw in zip(claims, found, expected, strict=True):
        got = [
            {
                "request": r.request,
                "device": str(r.id),
                "tolerations": [dict(t.raw) for t in r.tolerations],
                "admin": r.admin_access,
                "share": bool(r.share_id),
                "consumed": dict(r.consumed),
                "bindingConditions": list(r.binding_conditions),
                "bindingFailureConditions": list(r.binding_failure_conditions),
                "skipNodeOperations": list(r.skip_node_operations),
            }
            for r in results
        ]
        want = [
            {
                "request": e["request"],
                "device": e["device"] if "/" in e["device"] else f"driver-a/pool-1/{e['device']}",
                "tolerations": named(e.get("tolerations") or [], TOLERATIONS),
                "admin": e.get("admin", False),
                "share": e.get("share", False),
                "consumed": {k: parse_quantity(str(v)) for k, v in (e.get("consumed") or {}).items()},
                "bindingConditions": e.get("bindingConditions") or [],
                "bindingFailureConditions": e.get("bindingFailureConditions") or [],
                "skipNodeOperations": e.get("skipNodeOperations") or [],
            }
            for e in want_raw
        ]
        assert got == want, claim.name
        # PreBind writes what the allocator would: the request's tolerations, adminAccess, the
        # device's binding conditions, and the node selector Reserve derives from the slices used
        local, terms = allocation_selector(results, store.slices_for(node, labels), node)
        allocation = allocation_body(
            replace(claim, allocated=results, allocated_node=local, allocated_terms=terms)
        )
        body = allocation["devices"]["results"]
        assert [r.get("tolerations", []) for r in body] == [w["tolerations"] for w in want]
        assert [r.get("adminAccess", False) for r in body] == [w["admin"] for w in want]
        assert [r.get("bindingConditions", []) for r in body] == [w["bindingConditions"] for w in want]
        assert [r.get("bindingFailureConditions", []) for r in body] == [
            w["bindingFailureConditions"] for w in want
        ]
        assert [r.get("skipNodeOperations", []) for r in body] == [w["skipNodeOperations"] for w in want]
        if "nodeSelector" in case and claim is claims[0]:
            assert allocation.get("nodeSelector") == case["nodeSelector"]


def tracker_params() -> list[Any]:
    return [pytest.param(c, id=c["upstream"].split(": ", 1)[1]) for c in DOC["tracker"]]


@pytest.mark.parametrize("case", tracker_params())
def test_tracker_case(case: dict[str, Any]) -> None:
    store = DraStore()
    own = case.get("own") or {}
    slices = {
        "s1": ("driver1", "pool-1", "device-1"),
        "s2": ("driver2", "pool-2", "device-2"),
    }
    made = []
    for name in case.get("slices") or ("s1", "s2"):
        driver, pool, device = slices[name]
        raw_device: dict[str, Any] = {"name": device}
        if own.get(f"{driver}/{pool}/{device}"):
            raw_device["taints"] = own[f"{driver}/{pool}/{device}"]
        spec = {"driver": driver, "allNodes": True, "pool": {"name": pool, "generation": 1}}
        made.append(
            ResourceSliceInfo.from_dict(
                {"metadata": {"name": name}, "spec": {**spec, "devices": [raw_device]}}
            )
        )
    rules = [rule(i, spec, RULE_TAINT) for i, spec in enumerate(case["rules"])]
    for r in rules:
        store.apply(r)
    for s in made:
        store.apply(s)
    if "update" in case:  # the rules replaced: updated in place, or deleted
        for i, r in enumerate(rules):
            if i < len(case["update"]):
                store.apply(rule(i, case["update"][i], RULE_TAINT))
            else:
                store.apply(r, deleted=True)
    got = {str(d.id): list(d.taints) for s in made for d in store.devices_of(store.slices[s.name])}
    want = {
        key: [DeviceTaint.from_dict(RULE_TAINT if t == "T" else t) for t in taints]
        for key, taints in case["taints"].items()
    }
    assert got == want


def test_distinct_and_match_attribute_compare_values_with_their_type() -> None:
    """Go compares a typed attribute: a bool true and an int 1 are different values, so two devices
    holding them are distinct, and they do not match."""
    store = DraStore()
    store.apply(device_class("class-a", "driver-a"))
    devices = [
        {"name": "device-1", "attributes": {"x": {"bool": True}}},
        {"name": "device-2", "attributes": {"x": {"int": 1}}},
    ]
    spec = {"driver": "driver-a", "nodeName": "node-1", "pool": {"name": "pool-1", "generation": 1}}
    store.apply(
        ResourceSliceInfo.from_dict({"metadata": {"name": "s"}, "spec": {**spec, "devices": devices}})
    )
    request = {"name": "req-0", "exactly": {"deviceClassName": "class-a", "count": 2}}

    def allocated(constraint: dict[str, Any]) -> bool:
        claim = ResourceClaimInfo.from_dict(
            {
                "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [request], "constraints": [constraint]}},
            }
        )
        found = allocate(
            [claim], list(store.pools_for("node-1", {})), store.classes, lambda d: False, Matcher()
        )
        return found is not None

    assert allocated({"distinctAttribute": "driver-a/x"})
    assert not allocated({"matchAttribute": "driver-a/x"})


def test_toleration_matching_as_kube_tolerates_taint() -> None:
    """resourceclaim/devicetoleration_test.go's cases: Exists with the same key and effect (with or
    without a value), an empty key with Exists, Equal with the same value tolerate; Equal with
    another value, or another effect (NoSchedule against NoExecute), do not."""
    ns = DeviceTaint("foo", "bar", "NoSchedule")
    no_value = DeviceTaint("foo", "", "NoSchedule")

    def tol(**kw: str) -> DeviceToleration:
        return DeviceToleration.from_dict(kw)

    assert tol(key="foo", operator="Exists", effect="NoSchedule").tolerates(ns)
    assert tol(key="foo", operator="Exists", effect="NoSchedule").tolerates(no_value)
    assert tol(operator="Exists").tolerates(ns)
    assert tol(key="foo", operator="Equal", value="bar", effect="NoSchedule").tolerates(ns)
    assert tol(key="foo", value="bar").tolerates(ns)  # Equal is the default, every effect
    assert not tol(key="foo", operator="Equal", value="baz", effect="NoSchedule").tolerates(ns)
    assert not tol(key="foo", operator="Equal", value="bar", effect="NoExecute").tolerates(ns)
    assert not tol(key="other", operator="Exists").tolerates(ns)
