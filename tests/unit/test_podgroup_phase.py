"""PodGroup phase and counts (operator_app/podgroups.py), without a server.

The phases follow scheduler-plugins' PodGroup controller: Pending → Scheduling → Running →
Finished / Failed (``PreScheduling`` and ``Scheduled`` were removed upstream; ``Unknown`` is never
written).
"""

from __future__ import annotations

import pytest

from shoal.core.state.objects import PodInfo
from shoal.kube.crds import PODGROUP_PHASES
from shoal.operator_app.podgroups import GroupCounts, pod_group_counts, pod_group_phase, status_fields


def counts(
    min_member: int = 3,
    *,
    members: int = 0,
    bound: int = 0,
    running: int = 0,
    succeeded: int = 0,
    failed: int = 0,
) -> GroupCounts:
    return GroupCounts(min_member, members, bound, running, succeeded, failed)


@pytest.mark.parametrize(
    ("c", "phase"),
    [
        pytest.param(counts(members=2), "Pending", id="fewer-pods-than-minMember"),
        pytest.param(counts(members=0), "Pending", id="no-pods"),
        pytest.param(counts(members=3), "Scheduling", id="enough-pods-none-bound"),
        pytest.param(counts(members=5), "Scheduling", id="more-pods-than-minMember"),
        pytest.param(counts(members=3, bound=1), "Scheduling", id="some-bound"),
        pytest.param(counts(members=3, bound=3), "Scheduling", id="minMember-bound-none-running"),
        pytest.param(counts(members=3, bound=3, running=2), "Scheduling", id="not-all-running-yet"),
        pytest.param(counts(members=3, bound=3, running=3), "Running", id="minMember-running"),
        pytest.param(
            counts(members=2, bound=2, running=2, succeeded=1), "Running", id="running-plus-succeeded"
        ),
        pytest.param(counts(members=0, succeeded=3), "Finished", id="minMember-succeeded"),
        pytest.param(counts(members=1, bound=1, running=1, succeeded=3), "Finished", id="finished-wins"),
        pytest.param(
            counts(members=2, bound=2, running=2, failed=1), "Failed", id="failed-and-quorum-reached"
        ),
        pytest.param(counts(members=2, bound=1, running=1, failed=1), "Scheduling", id="failed-no-quorum"),
        pytest.param(counts(members=2, failed=1), "Scheduling", id="a-failed-member-was-scheduled"),
        pytest.param(counts(members=1, failed=1), "Pending", id="failed-members-count-as-pods"),
        pytest.param(counts(1, members=1, bound=1, running=1), "Running", id="minMember-1"),
    ],
)
def test_phase(c: GroupCounts, phase: str) -> None:
    assert pod_group_phase(c) == phase
    assert phase in PODGROUP_PHASES


def test_no_phase_scheduler_plugins_removed() -> None:
    every = {
        pod_group_phase(counts(m, members=n, bound=b, running=r, succeeded=s, failed=f))
        for m in (1, 2, 3)
        for n in range(4)
        for b in range(n + 1)
        for r in range(b + 1)
        for s in range(4)
        for f in range(3)
    }
    assert every == {"Pending", "Scheduling", "Running", "Finished", "Failed"}


def test_scheduled_counts_members_ever_bound() -> None:
    assert counts(members=2, bound=2, succeeded=1, failed=1).scheduled == 4


def _pod(name: str, *, node: str = "", phase: str = "Pending") -> PodInfo:
    return PodInfo(uid=name, namespace="default", name=name, node_name=node, phase=phase)


def test_counts_from_members() -> None:
    members = [_pod("a"), _pod("b", node="n1"), _pod("c", node="n1", phase="Running")]
    c = pod_group_counts(3, members, succeeded=1, failed=0)
    assert c == GroupCounts(min_member=3, members=3, bound=2, running=1, succeeded=1, failed=0)
    assert status_fields(c) == {
        "phase": "Scheduling",
        "running": 1,
        "succeeded": 1,
        "failed": 0,
    }
