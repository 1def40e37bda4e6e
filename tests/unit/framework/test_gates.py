import asyncio

import pytest

from shoal.core.framework.gates import PermitGate, WaitingPods
from tests.unit.helpers import pod


async def test_gate_opens_when_every_waiting_plugin_allows() -> None:
    gate = PermitGate(pod(), "n", {"A": 5, "B": 5})
    gate.allow("A")
    assert not gate.done
    gate.allow("B")
    result = await gate.wait()
    assert result.allowed


async def test_gate_times_out_with_kube_wording() -> None:
    gate = PermitGate(pod(), "n", {"Coscheduling": 0.05})
    result = await asyncio.wait_for(gate.wait(), 2)
    assert not result.allowed
    assert "rejected due to timeout after waiting 0.05s at plugin Coscheduling" in result.status.message
    assert result.waited >= 0.04


async def test_reject_wins_and_is_final() -> None:
    gate = PermitGate(pod(), "n", {"A": 5})
    waiters = [asyncio.ensure_future(gate.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    gate.reject("A", "no")
    gate.allow("A")
    results = await asyncio.gather(*waiters)
    assert all(not r.allowed and r.status.message == "no" for r in results)
    assert gate.rejected


async def test_timeout_capped_at_15_minutes_and_registry() -> None:
    gate = PermitGate(pod(), "n", {"A": 10_000})
    assert gate.timeout == 900
    waiting = WaitingPods()
    waiting.add(gate)
    assert waiting.get("uid-p") is gate and len(waiting) == 1
    assert waiting.reject("uid-p", "A", "bye")
    assert not waiting.reject("unknown", "A", "bye")
    assert not (await gate.wait()).allowed


def test_gate_needs_a_plugin() -> None:
    with pytest.raises(ValueError, match="at least one"):
        PermitGate(pod(), "n", {})
