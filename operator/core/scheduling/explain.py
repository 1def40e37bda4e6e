"""``shoal explain``'s answer: a what-if placement of one pod, per node (scores, or why rejected).

:meth:`Scheduler.explain <shoal.core.scheduling.scheduler.Scheduler.explain>` runs the pod's cycle
as a what-if (:func:`~shoal.core.scheduling.schedule_one.schedule_pod` with ``what_if``: nothing is
assumed, no PostFilter runs) and gathers, per node, what each plugin said: its score, its reason
for rejecting the node, the raw costs and notes plugins explain themselves with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.core.framework.interfaces import Diagnosis
from shoal.core.scheduling.schedule_one import Placement
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo


@dataclass
class Explanation:
    """``Scheduler.explain``'s answer: a what-if placement, per node (scores, or why rejected)."""

    pod: PodInfo
    profile: str
    best: str | None
    diagnosis: Diagnosis
    scores: dict[str, dict[str, int]]
    totals: dict[str, int]
    #: the pod's gang: what the gang cycle would try (gangs.explain_gang), as lines
    gang: list[str] = field(default_factory=list)
    #: node -> plugin -> the raw cost behind a score (NetworkLatency's network cost to the peers)
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    #: node -> plugin -> a note (GPUMemory's source, DynamicResources' per-node allocation detail)
    notes: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, pod: PodInfo, profile: str, placement: Placement, table: NodeTable) -> Explanation:
        """A what-if placement, per node: the feasible nodes' scores, the others' reasons."""
        diag = placement.diagnosis or Diagnosis(total_nodes=len(table), pre_filter_status=placement.status)
        scores: dict[str, dict[str, int]] = {}
        totals: dict[str, int] = {}
        result = placement.scores
        if result is not None:
            for i, row in enumerate(result.rows):
                name = table.name(int(row))
                totals[name] = int(result.total[i])
                scores[name] = {p: int(v[i]) for p, v in result.by_plugin.items()}
        return cls(pod, profile, placement.node, diag, scores, totals)

    @property
    def message(self) -> str:
        if self.best is not None:
            return f"would be placed on {self.best} (score {self.totals[self.best]})"
        return self.diagnosis.message()
