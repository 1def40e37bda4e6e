"""FilterOutcome.diagnosis: reasons counted per node, and unresolvable as kube-scheduler judges it."""

from __future__ import annotations

import numpy as np

from shoal.core.framework.interfaces import Rejection
from shoal.core.framework.outcomes import FilterOutcome, FilterStep
from shoal.core.state.status import Code


def outcome(*rejections: Rejection) -> FilterOutcome:
    before = np.ones(2, dtype=bool)
    out = FilterOutcome(np.zeros(2, dtype=bool), total_nodes=2)
    out.steps.append(FilterStep("NodeResourcesFit", before, list(rejections)))
    return out


def test_one_unresolvable_reason_makes_the_node_unresolvable() -> None:
    """Node 0: too many pods (resolvable) and more cpu than it has at all (unresolvable)."""
    both = np.array([True, False])
    diag = outcome(
        Rejection(both, "Too many pods", Code.UNSCHEDULABLE),
        Rejection(both, "Insufficient cpu", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        Rejection(np.array([False, True]), "Insufficient memory", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
    ).diagnosis()
    assert diag.unresolvable
    assert diag.reason_counts == {"Too many pods": 1, "Insufficient cpu": 1, "Insufficient memory": 1}


def test_a_node_with_only_resolvable_reasons_makes_the_pod_resolvable() -> None:
    diag = outcome(
        Rejection(np.array([True, False]), "Insufficient cpu", Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        Rejection(np.array([False, True]), "Too many pods", Code.UNSCHEDULABLE),
    ).diagnosis()
    assert not diag.unresolvable
