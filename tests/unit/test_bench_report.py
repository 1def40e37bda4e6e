"""bench/report.py: the summary table at the top of docs/benchmarks.md names each figure's run."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import write_section, write_summary


def test_the_summary_lists_the_headline_figures_with_their_commit(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    e2e = {"date": "2026-12-06", "commit": "abc123def456", "machine": "a box", "kube_version": "v1.37.2"}
    (results / "e2e.json").write_text(json.dumps({**e2e, "basic_ratio": 1.234, "gang64_seconds": 0.4}))
    core = {"meta": {"date": "2026-12-05", "commit": "0123456789ab"}, "median_ms_5000": 0.37}
    (results / "core.json").write_text(json.dumps(core))
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nintro\n")
    write_section("e2e", "make bench", ["## End to end"], first=True, doc=doc)
    write_summary(results, doc)
    text = doc.read_text()
    assert text.index("## Latest recorded run") < text.index("## End to end")  # first, above the rest
    assert "| **1.23** | higher | 2026-12-06, `abc123def456` |" in text
    assert "| **0.37** | lower | 2026-12-05, `0123456789ab` |" in text
    assert "v1.37.2" in text and "a box" in text
    assert "antiaffinity" not in text  # a figure the results lack is left out, not invented
    write_summary(results, doc)  # rewritten in place, not added twice
    assert doc.read_text().count("## Latest recorded run") == 1
