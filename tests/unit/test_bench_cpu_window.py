"""bench/e2e_schedulers.py's CPU accounting of the backlog scenario: /proc/stat's counters, the
window around the bindings, and the report's CPU-per-pod table."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from bench.e2e import backlog_summary
from bench.e2e_report import _backlog_cpu
from bench.e2e_schedulers import CLK_TCK, CpuSample, CpuSampler, cpu_window, machine_cpu, machine_ms_per_pod


def test_machine_cpu_counts_busy_steal_and_total_from_proc_stat() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    busy, steal, total = machine_cpu("cpu  100 5 50 800 20 3 2 10 40 0\n")
    assert busy == pytest.approx(160 / CLK_TCK)  # user + nice + system + irq + softirq
    assert steal == pytest.approx(10 / CLK_TCK)
    assert total == pytest.approx(990 / CLK_TCK)  # guest is inside user: not counted twice


def test_machine_cpu_reads_this_machine() -> None:
    busy, steal, total = machine_cpu()
    assert 0 < busy < total
    assert 0 <= steal < total


def _sample(at: float, busy: float, total: float, **procs: float) -> CpuSample:
    return CpuSample(at, busy, 0.0, total, procs)


def test_the_window_runs_from_the_last_sample_before_to_the_first_after() -> None:
    samples = [
        _sample(0.0, 0.0, 0.0, scheduler=0.0),
        _sample(1.0, 1.0, 2.0, scheduler=0.5),  # last at or before t0 = 1.5
        _sample(2.0, 2.5, 4.0, scheduler=1.0),
        _sample(3.0, 4.0, 6.0, scheduler=1.8),  # first at or after t1 = 2.5
        _sample(4.0, 4.1, 8.0, scheduler=1.9),
    ]
    w = cpu_window(samples, 1.5, 2.5, cores=2)
    assert w is not None
    assert w["seconds"] == pytest.approx(2.0)
    assert w["busy"] == pytest.approx(3.0 / 4.0)
    assert w["cores_used"] == {"scheduler": pytest.approx(1.3 / 2.0)}
    assert w["cores"] == 2


def test_a_window_past_the_samples_takes_the_ends_and_skips_a_process_seen_once() -> None:
    samples = [_sample(5.0, 0.0, 0.0, etcd=1.0), _sample(6.0, 1.0, 2.0, etcd=1.5, scheduler=3.0)]
    w = cpu_window(samples, 0.0, 10.0, cores=2)
    assert w is not None
    assert w["seconds"] == pytest.approx(1.0)
    assert w["cores_used"] == {"etcd": pytest.approx(0.5)}  # the scheduler appeared after the start


def test_no_window_from_fewer_than_two_samples() -> None:
    assert cpu_window([], 0.0, 1.0, cores=2) is None
    assert cpu_window([_sample(1.0, 0.0, 0.0)], 0.0, 1.0, cores=2) is None


async def test_the_sampler_measures_a_busy_process() -> None:
    async with CpuSampler({"me": os.getpid()}, interval=0.01) as sampler:
        end = asyncio.get_running_loop().time() + 0.3
        while asyncio.get_running_loop().time() < end:  # busy, yielding now and then to the sampler
            sum(range(20_000))
            await asyncio.sleep(0)
    assert len(sampler.samples) >= 3
    w = cpu_window(sampler.samples, sampler.samples[0].at, sampler.samples[-1].at, os.cpu_count() or 1)
    assert w is not None
    assert w["cores_used"]["me"] > 0.3  # this process was on a CPU most of that time


def _kind(bound: int, seconds: float, busy: float, **cores_used: float) -> dict[str, Any]:
    window = {"seconds": seconds, "cores": 2, "busy": busy, "steal": 0.01, "cores_used": cores_used}
    return {"pods_per_s": bound / seconds, "pods": bound, "nodes": 1000, "seconds": seconds} | {
        "bound": bound,
        "cpu_s": 1.0,
        "peak_rss_mb": 50.0,
        "cpu_window": window,
    }


def test_the_report_gives_cpu_per_pod_of_each_process_and_the_machine() -> None:
    d = {
        "null": _kind(5000, 5.0, 0.98, scheduler=0.6, etcd=0.2, **{"kube-apiserver": 1.0}),
        "shoal": _kind(5000, 10.0, 0.5, scheduler=1.0, **{"kube-apiserver": 0.8}),
    }
    lines = _backlog_cpu(d)
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in lines
        if line.startswith("| null") or line.startswith("| shoal")
    }
    # null: 5 s for 5,000 pods = 1 ms of wall time per pod; 0.6 cores -> 0.60 ms; machine 0.98 x 2 cores
    assert rows["null"] == "| null | 0.60 | 1.00 | 0.20 | — | 1.96 | 98% | 1% |"
    assert rows["shoal"] == "| shoal | 2.00 | 1.60 | — | — | 2.00 | 50% | 1% |"


def test_no_cpu_table_for_runs_recorded_without_it() -> None:
    d = {"null": _kind(5000, 5.0, 0.9)}
    del d["null"]["cpu_window"]
    assert _backlog_cpu(d) == []


def _backlog_round(null_pps: float, shoal_pps: float, null_busy: float, shoal_busy: float) -> dict[str, Any]:
    run = {k: {"pods_per_s": 100.0} for k in ("null-events", "kube-scheduler", "kube-same-work")}
    run["null"] = _kind(int(null_pps), 1.0, null_busy)
    run["shoal"] = _kind(int(shoal_pps), 1.0, shoal_busy)
    run["kube-scheduler"] = _kind(200, 1.0, 0.9)
    return run


def test_machine_cpu_per_pod_is_busy_cores_over_pods_per_second() -> None:
    assert machine_ms_per_pod(_kind(500, 1.0, 0.9)) == pytest.approx(1000 * 0.9 * 2 / 500)
    assert machine_ms_per_pod({"pods_per_s": 500.0}) is None


def test_the_cpu_fraction_pairs_each_rounds_machine_cpu_per_pod() -> None:
    # round 1: the host slowed the null scheduler (600/s at 60 % busy); both cost the same CPU per pod
    # round 2 and 3: null 2.0 ms per pod, shoal 2.5
    rounds = [
        _backlog_round(600, 1000, 0.6, 1.0),
        _backlog_round(1000, 760, 1.0, 0.95),
        _backlog_round(900, 684, 0.9, 0.855),
    ]
    out = backlog_summary(rounds)
    assert out["ceiling_cpu_fraction_rounds"] == pytest.approx([1.0, 0.8, 0.8])
    assert out["ceiling_cpu_fraction"] == pytest.approx(0.8)
    assert out["ceiling_fraction_rounds"][0] == pytest.approx(1000 / 600)  # pods/s saw the host, not the cost
    assert "ceiling_cpu_fraction_kube" in out


def test_no_cpu_fraction_when_a_round_was_not_sampled() -> None:
    rounds = [_backlog_round(1000, 760, 1.0, 0.95), _backlog_round(1000, 760, 1.0, 0.95)]
    del rounds[1]["shoal"]["cpu_window"]
    assert "ceiling_cpu_fraction" not in backlog_summary(rounds)
