import pytest

from shoal.plugins import prioritysort
from tests.unit.helpers import pod


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        pytest.param((10, 5.0), (0, 1.0), True, id="higher-priority-wins-even-if-later"),
        pytest.param((0, 1.0), (0, 2.0), True, id="same-priority-earlier-first"),
        pytest.param((-5, 1.0), (0, 9.0), False, id="negative-priority-last"),
    ],
)
def test_order(a: tuple[int, float], b: tuple[int, float], a_first: bool) -> None:
    plugin = prioritysort.new(None, None)  # type: ignore[arg-type]
    ka = plugin.sort_key(pod("a", priority=a[0]), a[1])
    kb = plugin.sort_key(pod("b", priority=b[0]), b[1])
    assert (ka < kb) is a_first


def test_pod_without_priority_counts_as_zero() -> None:
    assert prioritysort.sort_key(pod("a").priority, 1.0) == (0, 1.0)
