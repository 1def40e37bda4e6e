"""helm/shoal/README.md is generated from values.yaml's `# --` comments (tools/chart_readme.py), and
stays so: a changed comment or value without `make chart-readme` fails here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "shoal"
SCRIPT = ROOT / "tools" / "chart_readme.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    """A copy of the chart's inputs and README, to change."""
    for name in ("Chart.yaml", "values.yaml", "values.schema.json", "README.md"):
        shutil.copy(CHART / name, tmp_path / name)
    return tmp_path


def test_the_chart_readme_is_up_to_date() -> None:
    out = run("--check")
    assert out.returncode == 0, out.stderr


def test_a_changed_comment_makes_it_stale_until_regenerated(chart: Path) -> None:
    values = chart / "values.yaml"
    text = values.read_text()
    assert "# -- Image pull policy." in text
    values.write_text(text.replace("# -- Image pull policy.", "# -- When the kubelet pulls | the image."))
    stale = run("--chart", str(chart), "--check")
    assert stale.returncode == 1
    assert "README.md is stale: run `make chart-readme`" in stale.stderr
    assert run("--chart", str(chart)).returncode == 0
    assert run("--chart", str(chart), "--check").returncode == 0
    row = '| `image.pullPolicy` | string | `"IfNotPresent"` | When the kubelet pulls \\| the image. |'
    assert row in (chart / "README.md").read_text().splitlines()


def test_rows_carry_schema_types_defaults_and_whole_comments(chart: Path) -> None:
    lines = (chart / "README.md").read_text().splitlines()
    rows = {line.split(" | ")[0].strip("| `"): line for line in lines if line.startswith("| `")}
    assert rows["podDisruptionBudget.maxUnavailable"].startswith(
        "| `podDisruptionBudget.maxUnavailable` | integer or string | `1` | Pods that may be down"
    )
    assert '| `image.digest` | string | `""` | Image digest' in rows["image.digest"]
    # a comment of several lines is one cell; a long default points at values.yaml
    assert rows["profiles"].endswith("replaces the whole list). |")
    assert "| array | see values.yaml |" in rows["profiles"]
    # a documented parent documents its children; children are not listed again
    assert "resources" in rows and "resources.requests" not in rows
    assert "Kubernetes `>=1.30.0-0`" in "\n".join(lines)


def test_an_undocumented_value_is_an_error(chart: Path) -> None:
    values = chart / "values.yaml"
    values.write_text(values.read_text() + "\nsecretKnob: 3\nimagePolicy:\n  mode: strict\n")
    out = run("--chart", str(chart))
    assert out.returncode == 1
    assert "undocumented values (add a `# --` comment): secretKnob, imagePolicy.mode" in out.stderr
    # a comment that is not a `# --` one documents nothing, nor does one a blank line cuts off
    base = values.read_text().replace("\nsecretKnob: 3\n", "\n")
    for block in ("# just a note\n", "# -- cut off\n\n"):
        values.write_text(base + block + "secretKnob: 3\n")
        assert "): imagePolicy.mode, secretKnob\n" in run("--chart", str(chart), "--check").stderr
    values.write_text(base + "# -- A knob.\nsecretKnob: 3\n")
    assert "): imagePolicy.mode\n" in run("--chart", str(chart), "--check").stderr
