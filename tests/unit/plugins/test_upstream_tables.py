"""The upstream tables themselves: every case names its source, and every difference is documented."""

import re
from pathlib import Path

import pytest

from tests.unit.upstream import DATA, load

PLUGINS = [
    "tainttoleration",
    "nodeaffinity",
    "nodeports",
    "nodename",
    "nodeunschedulable",
    "nodedeclaredfeatures",
    "schedulinggates",
    "helper",
]
DIFFERENCES = Path(__file__).resolve().parents[3] / "docs" / "differences.md"
SECTION = "## Where shoal differs from kube-scheduler on purpose"


#: tables with a runner of their own (their own shape): test_<plugin>_upstream.py
OWN_RUNNERS = {
    "noderesources",
    "interpodaffinity",
    "podtopologyspread",
    "imagelocality",
    "volumezone",
    "volumerestrictions",
    "nodevolumelimits",
    "volumebinding",
    "defaultpreemption",
    "dynamicresources",
    "allocator",  # the structured allocator: dynamicresources/test_allocator_upstream.py
    "extended_requests",  # DRA-backed extended resources: dynamicresources/test_extended_upstream.py
    "queuesort",
}


def test_every_plugin_has_a_table() -> None:
    stems = {p.stem for p in DATA.glob("*.yaml")}
    assert set(PLUGINS) <= stems
    assert stems - set(PLUGINS) <= OWN_RUNNERS, "a new table needs a runner: add it to PLUGINS or OWN_RUNNERS"


@pytest.mark.parametrize("plugin", PLUGINS)
def test_cases_name_upstream_file_test_and_case(plugin: str) -> None:
    cases = load(plugin)
    assert cases
    names = [c.upstream for c in cases]
    assert len(set(names)) == len(names), "duplicate case"
    for name in names:
        assert re.fullmatch(rf"{plugin}/\w+_test\.go Test\w+: .+", name, re.DOTALL), name


def test_differences_are_documented() -> None:
    text = DIFFERENCES.read_text()
    assert SECTION in text
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    for plugin in PLUGINS:
        for case in load(plugin):
            if case.differs:
                assert case.upstream.split(" ", 1)[0] in section, f"{case.upstream} not in {SECTION!r}"
