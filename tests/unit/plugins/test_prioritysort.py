import dataclasses

import pytest

from shoal.plugins import prioritysort
from tests.unit.helpers import pod


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        # (priority, creationTimestamp, queued at)
        pytest.param((10, 50.0, 5.0), (0, 1.0, 1.0), True, id="higher-priority-wins-even-if-younger"),
        pytest.param((0, 1.0, 9.0), (0, 2.0, 1.0), True, id="older-pod-first-though-queued-later"),
        pytest.param((0, 1.0, 1.0), (0, 1.0, 2.0), True, id="same-second-earlier-queued-first"),
        pytest.param((-5, 1.0, 1.0), (0, 9.0, 9.0), False, id="negative-priority-last"),
    ],
)
def test_order(a: tuple[int, float, float], b: tuple[int, float, float], a_first: bool) -> None:
    plugin = prioritysort.new(None, None)  # type: ignore[arg-type]
    pa = dataclasses.replace(pod("a", priority=a[0]), created=a[1])
    pb = dataclasses.replace(pod("b", priority=b[0]), created=b[1])
    assert (plugin.sort_key(pa, a[2]) < plugin.sort_key(pb, b[2])) is a_first


def test_pod_without_priority_counts_as_zero() -> None:
    assert prioritysort.sort_key(pod("a").priority, 1.0) == (0, 0.0, 1.0)
