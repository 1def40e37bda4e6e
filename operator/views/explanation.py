"""``shoal explain``'s document: why a pod is (not) placed, per node and plugin.

Shared by ``shoal explain -o json|yaml`` (its keys documented in docs/explain.md) and the fleet
view, which shows the same facts per pending pod.
"""

from __future__ import annotations

from typing import Any

from shoal.core.scheduling.explain import Explanation
from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.objects import PodInfo


def explanation_doc(sched: Scheduler, target: PodInfo, result: Explanation) -> dict[str, Any]:
    """What the text output says, as a document (``-o json|yaml``)."""
    from shoal.plugins.defaultpreemption.plugin import DefaultPreemption
    from shoal.plugins.dynamicresources.plugin import DynamicResources

    fw = sched.profiles[result.profile]
    preemption: dict[str, Any] | None = None
    preempting = fw.plugins.get("DefaultPreemption")
    if result.best is None and isinstance(preempting, DefaultPreemption):
        verdict = preempting.evaluate(target, result.diagnosis)  # what it would do, doing nothing
        best = verdict.best
        if best is not None:
            preemption = {"node": best.node, "victims": [v.key for v in best.victims]}
        else:
            preemption = {"node": None, "victims": [], "message": verdict.status.message}
    dra = fw.plugins.get("DynamicResources")
    nodes: list[dict[str, Any]] = []
    for node, total in sorted(result.totals.items(), key=lambda kv: -kv[1]):
        entry: dict[str, Any] = {
            "name": node,
            "result": "fits",
            "score": total,
            "scores": result.scores[node],
        }
        entry["costs"] = result.costs.get(node, {})
        entry["notes"] = result.notes.get(node, {})
        nodes.append(entry)
    for node, (plugin, reasons) in sorted(result.diagnosis.node_reasons.items()):
        nodes.append(
            {
                "name": node,
                "result": "rejected",
                "plugin": plugin,
                "reasons": list(reasons),
                "notes": result.notes.get(node, {}),
            }
        )
    return {
        "pod": target.key,
        "schedulerName": result.profile,
        "node": result.best,
        "message": result.message,
        "gang": list(result.gang),
        "preemption": preemption,
        "claims": dra.describe(target) if isinstance(dra, DynamicResources) else [],
        "nodes": nodes,
    }
