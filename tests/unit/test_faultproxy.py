"""Which requests the fault proxy touches (its effect on shoal is tests/reliability/test_api_faults.py)."""

from __future__ import annotations

from collections import Counter

import pytest
from aiohttp.test_utils import make_mocked_request

from shoal.testing.faultproxy import FAULTS, FaultPlan, FaultProxy


def chosen(plan: FaultPlan, method: str, path: str, n: int = 400) -> Counter[str | None]:
    proxy = FaultProxy("https://127.0.0.1:1", plan)
    return Counter(proxy._fault_for(make_mocked_request(method, path)) for _ in range(n))


def test_the_rate_and_the_faults_drawn() -> None:
    every = chosen(FaultPlan(rate=1.0), "POST", "/api/v1/namespaces/a/pods/p/binding")
    assert set(every) == set(FAULTS)  # each fault drawn, never a clean pass
    some = chosen(FaultPlan(rate=0.25, faults=("429",)), "GET", "/api/v1/pods")
    assert set(some) == {None, "429"} and 50 < some["429"] < 150
    assert set(chosen(FaultPlan(rate=0.0), "GET", "/api/v1/pods")) == {None}


def test_watches_spared_paths_and_other_methods_are_not_touched() -> None:
    assert set(chosen(FaultPlan(rate=1.0), "GET", "/api/v1/pods?watch=true")) == {None}  # cut, not refused
    plan = FaultPlan(rate=1.0, methods=frozenset({"POST"}), spare=("/leases/",))
    assert set(chosen(plan, "GET", "/api/v1/pods")) == {None}
    assert set(chosen(plan, "POST", "/apis/coordination.k8s.io/v1/namespaces/k/leases/x")) == {None}
    assert None not in chosen(plan, "POST", "/api/v1/namespaces/a/pods/p/binding")


def test_a_bad_plan_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown faults"):
        FaultPlan(faults=("418",))
    with pytest.raises(ValueError, match="not in"):
        FaultPlan(rate=2.0)
