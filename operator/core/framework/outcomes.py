"""What the Framework's Filter and Score runs return, and the diagnosis built from Filter's.

:class:`FilterOutcome` is shoal's vectorised counterpart of kube-scheduler's per-node status map:
per Filter plugin, the rows it rejected and why, kept as masks and only counted into a
:class:`~shoal.core.framework.interfaces.Diagnosis` when it is needed (no node fits, or ``explain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from shoal.core.framework.interfaces import BoolArray, Diagnosis, IntArray, Rejection
from shoal.core.state.status import Code, Status


@dataclass
class FilterStep:
    plugin: str
    before: BoolArray
    rejections: Sequence[Rejection]


@dataclass
class FilterOutcome:
    """Feasible rows and enough to explain the rejected ones."""

    feasible: BoolArray
    steps: list[FilterStep] = field(default_factory=list)
    pre_filter_status: Status | None = None
    total_nodes: int = 0
    #: the nodes Filter looked at: all, or those a PreFilter result left (None: all)
    looked_at: int | None = None
    #: a Filter plugin failed (raised or returned Error): the cycle is aborted with this status
    error: Status | None = None

    def diagnosis(self, names: Sequence[str | None] | None = None) -> Diagnosis:
        """Reasons per node count (and per node name, when ``names`` is given)."""
        diag = Diagnosis(total_nodes=self.total_nodes, pre_filter_status=self.pre_filter_status)
        if self.pre_filter_status is not None:
            diag.unschedulable_plugins.add(self.pre_filter_status.plugin)
            diag.unresolvable = self.pre_filter_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            return diag
        resolvable = False
        diag.rejected_rows = np.zeros(len(self.feasible), dtype=bool)
        diag.unresolvable_rows = np.zeros(len(self.feasible), dtype=bool)
        for step in self.steps:
            rejected: BoolArray = np.zeros(len(step.before), dtype=bool)
            unresolvable: BoolArray = np.zeros(len(step.before), dtype=bool)
            for rej in step.rejections:
                hit = rej.mask & step.before
                count = int(np.count_nonzero(hit))
                if not count:
                    continue
                diag.unschedulable_plugins.add(step.plugin)
                diag.reason_counts[rej.reason] = diag.reason_counts.get(rej.reason, 0) + count
                rejected |= hit
                if rej.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable |= hit
                if names is not None:
                    for row in np.flatnonzero(hit):
                        name = names[int(row)]
                        if name is None:
                            continue
                        plugin, reasons = diag.node_reasons.get(name, (step.plugin, ()))
                        diag.node_reasons[name] = (plugin, (*reasons, rej.reason))
            # as a plugin's status in kube-scheduler: one unresolvable reason makes the node's
            # status unresolvable; the pod is unresolvable when every rejected node is
            resolvable = resolvable or bool((rejected & ~unresolvable).any())
            diag.rejected_rows[: len(rejected)] |= rejected
            diag.unresolvable_rows[: len(unresolvable)] |= unresolvable
            if rejected.any():
                earlier = diag.rejected_by.get(step.plugin)
                diag.rejected_by[step.plugin] = rejected if earlier is None else earlier | rejected
        diag.unresolvable = bool(diag.reason_counts) and not resolvable
        return diag


@dataclass
class ScoreOutcome:
    rows: IntArray
    total: IntArray
    by_plugin: dict[str, IntArray] = field(default_factory=dict)
