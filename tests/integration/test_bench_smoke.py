"""A small version of the basic and gang benchmarks: they must finish and bind every pod.
No timing is asserted here (timings live in `make bench` and docs/benchmarks.md). The report is
checked against the recorded results, and a gang that is not fully bound must fail the harness."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from bench import e2e
from bench.e2e import backlog, gang, gang_preemption, preemption, throughput, topology
from bench.e2e_report import PLOTS
from bench.e2e_schedulers import BACKLOG_KINDS
from bench.profiles import WRAPPERS
from shoal.testing.kubescheduler import PREEMPTION_RACE_ARGS
from tests.unit.test_bench_sessions import children_running

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
async def test_basic_smoke(kind: str, tmp_path: Path) -> None:
    result = await throughput(kind, tmp_path, nodes=50, pods=300, label="smoke", timeout=180)
    assert result["all_bound"]
    assert result["bound"] == 300
    assert result["peak_rss_mb"] > 0


async def test_viewed_smoke_serves_every_viewer_poll_while_scheduling(tmp_path: Path) -> None:
    """basic_viewer: shoal with ``--web`` binds every pod while the viewers' requests are answered
    (none fails; the first page is open before the first pod is created)."""
    result = await throughput("shoal-viewed", tmp_path, nodes=50, pods=300, label="viewed", timeout=180)
    assert result["all_bound"] and result["bound"] == 300, result
    viewers = result["viewers"]
    assert viewers["failures"] == 0 and viewers["answered"] >= 1, viewers
    assert viewers["document_bytes"] > 1000, viewers


async def test_paced_smoke_offers_pods_at_the_rate_given(tmp_path: Path) -> None:
    """The paced scenario creates the i-th pod no earlier than i / rate seconds in: 120 pods at
    40/s cannot all be bound before 119 / 40 s (unpaced they are created in a fraction of that)."""
    result = await throughput("shoal", tmp_path, nodes=20, pods=120, label="paced", timeout=180, rate=40)
    assert result["all_bound"] and result["bound"] == 120, result
    assert result["offered_per_s"] == 40
    assert result["seconds"] >= 119 / 40, result
    # the rate the generator reached: the 120th create cannot return before 119 / 40 s
    assert 0 < result["created_per_s"] <= 120 / (119 / 40), result


async def test_profile_smoke_attributes_shoals_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--profile: py-spy follows shoal through a scenario and its samples are summarised by part;
    the hog scenario's busy process is gone when the scenario ends."""
    monkeypatch.setattr(e2e, "PROFILES", {})
    hogs: list[Any] = []
    real_hog = e2e.cpu_hog

    def spy_hog(on: bool) -> Any:
        hogs.append(on)
        return real_hog(on)

    monkeypatch.setattr(e2e, "cpu_hog", spy_hog)
    result = await throughput("shoal", tmp_path, nodes=50, pods=600, label="profiled", timeout=180, hog=True)
    assert result["all_bound"] and hogs == [True]
    assert not children_running(b"while True: pass")
    assert e2e.PROFILES is not None
    summary = e2e.PROFILES["profiled"]
    assert summary["samples"] > 0
    assert abs(sum(summary["parts"].values()) - 1.0) < 1e-9
    functions = [f for f, _ in summary["functions"]]
    assert functions and not [f for f in functions if f.split(" (")[0] in WRAPPERS]


@pytest.mark.parametrize("kind", BACKLOG_KINDS)
async def test_backlog_smoke(kind: str, tmp_path: Path) -> None:
    """Pods created before the scheduler starts; the null schedulers (the ceilings) bind them too.
    The Scheduled events counted at the end: none from the null scheduler, which writes none; from
    null-events every one but those still in flight behind their bindings (64 at most)."""
    result = await backlog(kind, tmp_path, nodes=20, pods=100, timeout=120)
    assert result["all_bound"], result
    assert result["bound"] == 100 and result["pods_per_s"] > 0
    if kind == "null":
        assert result["events_at_end"] == 0, result
    elif kind == "null-events":
        assert 100 - 64 <= result["events_at_end"] <= 100, result
    else:
        assert 0 <= result["events_at_end"] <= 100, result


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
@pytest.mark.parametrize("workload", ["antiaffinity", "affinity", "spread"])
async def test_constrained_smoke(kind: str, workload: str, tmp_path: Path) -> None:
    """scheduler_perf's inter-pod workloads: every pod bound (30 nodes hold 25 anti-affine pods)."""
    result = await throughput(
        kind, tmp_path, nodes=30, pods=25, label=workload, workload=workload, timeout=120
    )
    assert result["all_bound"], result
    assert result["bound"] == 25


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
async def test_topology_smoke(kind: str, tmp_path: Path) -> None:
    """Native PodGroups with a required clique / rack: both schedulers bind the gangs, in one domain."""
    result = await topology(kind, tmp_path, nodes=128, gangs=(8, 16))
    assert result["gangs_bound"] == 2, result
    assert result["domain_fit"] == 1.0, result


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
async def test_preemption_smoke(kind: str, tmp_path: Path) -> None:
    """PreemptionBasic at 5 nodes (scheduler_perf's integration size): each preemptor evicts one
    node's 4 pods and binds. kube-scheduler's parked preemptors are retried sooner (its race,
    see PREEMPTION_RACE_ARGS), so the smoke does not wait out its 5-minute flush."""
    result = await preemption(kind, tmp_path, nodes=5, preemptors=5, kube_args=PREEMPTION_RACE_ARGS)
    assert result["all_bound"], result
    assert result["victims"] == 20, result


async def test_gang_preemption_smoke_evicts_only_the_minimum(tmp_path: Path) -> None:
    result = await gang_preemption("shoal", tmp_path)
    assert result["all_bound"], result
    assert result["excess_victims"] == 0, result


async def test_gang_smoke(tmp_path: Path) -> None:
    result = await gang(tmp_path, nodes=50, members=16)
    assert result["all_bound"]
    assert result["members"] == 16
    assert result["bound"] == 16
    assert result["seconds"] is not None


def test_report_from_recorded_results(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nkept text\n")
    for name in PLOTS:  # the plots a run left in docs/
        (tmp_path / name).write_bytes(b"")
    e2e.report_from_results(e2e.RESULTS, doc=doc)
    text = doc.read_text()
    recorded = json.loads(e2e.RESULTS.read_text())
    streams = [recorded["results"][key] for key in ("basic", "scale", "xlarge") if key in recorded["results"]]
    fastest = max(r["pods_per_s"] for scenario in streams for r in scenario.values())  # any stream's peak
    assert "shoal has no client-side rate limiter" in text
    assert f"at most {fastest:.0f} pods bound per second" in text
    assert f"**{recorded['basic_ratio']:.2f}**" in text
    # the run with the fleet page open, beside basic's (recorded since 2026-12-06)
    viewed = "| `basic_viewer_ratio` (the same with the fleet page open in 3 viewers) | ≥ 1.0 |"
    assert f"{viewed} **{recorded['basic_viewer_ratio']:.2f}** |" in text
    assert f"Page open ÷ page closed: **{recorded['viewer_cost_ratio']:.2f}**" in text
    assert recorded["machine"] in text
    assert all(f"![{name}]({name})" in text for name in PLOTS), "a plot of the run dropped from the doc"
    assert text.endswith("kept text\n")


#: a ``make bench-large`` run (scale and scale_hog included), as recorded 2026-12-04
LARGE_RUN = e2e.RESULTS.parent / "history" / "e2e-2026-12-04-large.json"


def test_report_shows_the_rate_the_generator_reached_when_recorded(tmp_path: Path) -> None:
    """Results carrying ``created_per_s`` get a created/s column; older ones keep the table they had.
    On the last large run's results (kept in history/: ``make bench`` alone records no scale run)."""
    recorded = json.loads(LARGE_RUN.read_text())
    for i, r in enumerate(recorded["results"]["scale"].values()):
        r["created_per_s"] = 301.0 + i
    recorded["results"]["basic"]["shoal"].pop("created_per_s", None)
    results = tmp_path / "e2e.json"
    results.write_text(json.dumps(recorded))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    for name in PLOTS:
        (tmp_path / name).write_bytes(b"")
    e2e.report_from_results(results, doc=doc)
    text = doc.read_text()
    scale = text[text.index("### scale: ") : text.index("### scale with a CPU hog")]
    assert "| scheduler | pods/s | created/s | seconds |" in scale
    kube, shoal = recorded["results"]["scale"]["kube-scheduler"], recorded["results"]["scale"]["shoal"]
    assert f"| kube-scheduler | {kube['pods_per_s']:.0f} | 301 | {kube['seconds']:.1f} |" in scale
    assert f"| shoal | {shoal['pods_per_s']:.0f} | 302 | {shoal['seconds']:.1f} |" in scale
    basic = text[text.index("### basic: ") : text.index("### scale: ")]
    assert "created/s" not in basic and "| scheduler | pods/s | seconds |" in basic


def test_machine_names_cpu_model_and_ram() -> None:
    line = e2e.machine()
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    model = next(x.split(":", 1)[1].strip() for x in cpuinfo if x.startswith("model name"))
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    kib = next(int(x.split()[1]) for x in meminfo if x.startswith("MemTotal:"))
    assert line.startswith(" ".join(model.split()))
    assert f"{kib / 2**20:.1f} GiB RAM" in line


async def test_a_gang_not_fully_bound_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def fake_throughput(
        kind: str,
        base: Path,
        nodes: int,
        pods: int,
        label: str,
        workload: str = "basic",
        timeout: float = 1800,
        hog: bool = False,
        rate: float | None = None,
    ) -> dict[str, Any]:
        return {"pods_per_s": 100.0, "peak_rss_mb": 100.0, "p50_s": 1.0, "p99_s": 2.0}

    async def fake_gang(base: Path) -> dict[str, Any]:
        return {"nodes": 1000, "members": 64, "all_bound": False, "bound": 60, "seconds": None}

    written: list[str] = []
    monkeypatch.setattr(e2e, "throughput", fake_throughput)
    monkeypatch.setattr(e2e, "gang", fake_gang)
    monkeypatch.setattr(e2e, "RESULTS", tmp_path / "results" / "e2e.json")
    monkeypatch.setattr(e2e, "write_doc", lambda *a, **k: written.append("doc"))
    monkeypatch.setattr(tempfile, "mkdtemp", lambda prefix: str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    args = e2e.arg_parser().parse_args(["--nodes", "10", "--pods", "10", "--backlog-rounds", "1"])
    with pytest.raises(RuntimeError, match="only 60 of 64 members bound"):
        await e2e.main_async(args)
    assert not (tmp_path / "results").exists()
    assert written == []
    assert json.loads((tmp_path / "run" / "e2e-failed.json").read_text())["results"]["gang"]["bound"] == 60


@pytest.mark.parametrize("kind", ["kube-scheduler", "shoal"])
async def test_dra_smoke(kind: str, tmp_path: Path) -> None:
    """The DRA scenario at 10 nodes x 8 GPUs: every pod bound, every claim on its pod's node, no
    device twice."""
    result = await e2e.dra(kind, tmp_path, nodes=10, pods=60, timeout=120)
    assert result["all_bound"], result
    assert result["bound"] == 60 and result["devices_twice"] == 0 and result["claims_misplaced"] == 0, result
