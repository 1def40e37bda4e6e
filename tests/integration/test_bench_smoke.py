"""A small version of the basic and gang benchmarks: they must finish and bind every pod.
No timing is asserted here (timings live in `make bench` and docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.e2e import gang, throughput

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
async def test_basic_smoke(kind: str, tmp_path: Path) -> None:
    result = await throughput(kind, tmp_path, nodes=50, pods=300, label="smoke")
    assert result["all_bound"]
    assert result["bound"] == 300
    assert result["peak_rss_mb"] > 0


async def test_gang_smoke(tmp_path: Path) -> None:
    result = await gang(tmp_path, nodes=50, members=16)
    assert result["all_bound"]
    assert result["members"] == 16
