"""kube-scheduler 1.37's PrioritySort table (tests/data/upstream/queuesort.yaml).

Upstream's ``Less(p1, p2)`` is shoal's ``sort_key(p1) < sort_key(p2)``: the active queue is a heap
on that key. The pods are built from the table's priority; the time each was queued is passed as
the queue passes it (``QueuedPodInfo.enqueued``).
"""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.core.state.objects import PodInfo
from shoal.plugins import prioritysort
from tests.unit.helpers import cache_with, handle_for

DATA = Path(__file__).resolve().parents[2] / "data" / "upstream" / "queuesort.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(DATA.read_text())["cases"]


def queued(name: str, raw: dict[str, Any]) -> tuple[PodInfo, float]:
    assert set(raw) <= {"priority", "queued"}, raw
    pod = PodInfo.from_dict({"metadata": {"name": name}, "spec": {"priority": raw["priority"]}})
    return pod, float(raw.get("queued", 0))


@pytest.mark.parametrize("case", CASES, ids=[c["upstream"].split(": ", 1)[1] for c in CASES])
def test_upstream(case: dict[str, Any]) -> None:
    assert set(case) == {"upstream", "p1", "p2", "less"}, case
    plugin = prioritysort.new(None, handle_for(cache_with([])))
    (p1, t1), (p2, t2) = queued("p1", case["p1"]), queued("p2", case["p2"])
    assert (plugin.sort_key(p1, t1) < plugin.sort_key(p2, t2)) is case["less"]


def test_cases_name_upstream_file_test_and_case() -> None:
    names = [c["upstream"] for c in CASES]
    assert len(names) == 4 and len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(r"queuesort/priority_sort_test\.go TestLess: .+", name), name
