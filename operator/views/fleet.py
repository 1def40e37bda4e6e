"""The fleet as a person looks at it: nodes by topology with their GPUs, gangs, and why pods wait.

One document (:func:`fleet_doc`, plain JSON types) built from a scheduler's own cache — the live
operator's or a simulation's — and drawn by :mod:`shoal.views.page`. Nothing here calls the API:
a viewer costs the scheduler one walk over its cache, however many viewers there are
(:class:`FleetSnapshots` keeps the last document for a moment).

* **nodes**, grouped by the topology levels the profile declares (TopologyPlacement's or
  NetworkLatency's ``levelCosts``, outermost first, those some node carries): each node's GPUs
  (``nvidia.com/gpu`` allocatable and requested), its GPU memory total and free as GPUMemory counts
  it (label, GFD or DRA devices, whichever it reads), and its DRA devices (whole GPUs, MIG
  partitions, shared GPUs), each free or held by a claim;
* **gangs**: placed ones with the tightest domain every member shares and the worst pairwise
  network cost that means; waiting ones with what the gang cycle would try now (``shoal explain``'s
  gang lines: the domains, their room, or why none);
* **pending** pods: the message of their last attempt (their ``FailedScheduling`` event's), and
  for the first ``explain`` of them each node's verdict, as ``shoal explain`` gives it (the
  best-scoring nodes with each plugin's score; the rejections counted by plugin and reason). An
  explanation is a what-if cycle over every node (about 30 ms at 5,000 nodes), so the live page
  asks for one when a pod is clicked (``/fleet/explain``) instead of building twenty per poll.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import numpy as np

from shoal.core.framework.runtime import Framework
from shoal.core.scheduling.gangs import explain_gang
from shoal.core.scheduling.scheduler import Scheduler
from shoal.core.state.objects import GPU_RESOURCE, PodGroupInfo, PodInfo
from shoal.plugins.dynamicresources.objects import Device
from shoal.plugins.dynamicresources.store import DraStore
from shoal.plugins.gpumemory import GPUMemory
from shoal.plugins.topologyplacement.domains import (
    DEFAULT_ACROSS_COST,
    DEFAULT_LEVEL_COSTS,
    HOSTNAME,
)
from shoal.views.explanation import explanation_doc

JSON = dict[str, Any]

#: pending pods explained per node by default (each is one what-if cycle over every node)
DEFAULT_EXPLAIN = 20
#: per explained pod: the best-scoring nodes listed, and the rejected nodes listed by name
TOP_NODES = 10
#: devices listed per node (a pool reaching every node would otherwise repeat on each)
MAX_DEVICES = 32


def fleet_doc(sched: Scheduler, *, explain: int = DEFAULT_EXPLAIN, profile: str | None = None) -> JSON:
    """The whole view of ``sched``'s cache now (see the module docstring)."""
    fw = _profile(sched, profile)
    levels, costs, across = _levels(sched, fw)
    nodes = list(_nodes(sched, fw, levels))
    gangs = _gangs(sched, levels, costs, across, explain)
    pending = _pending(sched, explain)
    gpus = sum(n["gpus"] for n in nodes)
    used = sum(n["gpusUsed"] for n in nodes)
    total_gb = sum(n["gpuMemoryGB"] or 0.0 for n in nodes)
    free_gb = sum(n["gpuMemoryFreeGB"] or 0.0 for n in nodes)
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": fw.name if fw is not None else None,
        "levels": levels,
        "summary": {
            "nodes": len(nodes),
            "gpus": gpus,
            "gpusUsed": used,
            "gpuMemoryGB": round(total_gb, 1),
            "gpuMemoryFreeGB": round(free_gb, 1),
            "podsBound": sum(1 for p in sched.cache.pods.values() if p.bound),
            "pending": len(pending["pods"]) + pending["more"],
            "gangsPlaced": sum(1 for g in gangs if g["state"] == "placed"),
            "gangsWaiting": sum(1 for g in gangs if g["state"] != "placed"),
        },
        "nodes": nodes,
        "gangs": gangs,
        "pending": pending["pods"],
        "pendingNotShown": pending["more"],
    }


def _profile(sched: Scheduler, name: str | None) -> Framework | None:
    """The profile whose plugins describe the fleet: the one named, else ``gpu-scheduler``, else
    the first."""
    if name is not None and name in sched.profiles:
        return sched.profiles[name]
    return sched.profiles.get("gpu-scheduler") or next(iter(sched.profiles.values()), None)


def _levels(sched: Scheduler, fw: Framework | None) -> tuple[list[str], list[tuple[str, float]], float]:
    """The topology levels to group nodes by (outermost first, those some node carries), and the
    cost model (tightest first, hostname included) and cost across everything."""
    costs: list[tuple[str, float]] = list(DEFAULT_LEVEL_COSTS)
    across = DEFAULT_ACROSS_COST
    if fw is not None:
        for name in ("TopologyPlacement", "NetworkLatency"):
            args = getattr(fw.plugins.get(name), "args", None)
            level_costs = getattr(args, "level_costs", None)
            if level_costs:
                costs = [(lc.key, float(lc.cost)) for lc in level_costs]
                across = float(getattr(args, "across_cost", across))
                break
    table = sched.cache.table
    present = [k for k, _ in costs if k != HOSTNAME and table.label_values(k)]
    return present[::-1], costs, across


def _nodes(sched: Scheduler, fw: Framework | None, levels: Sequence[str]) -> Iterator[JSON]:
    table = sched.cache.table
    gpu = table.resource_index.get(GPU_RESOURCE)
    memory = fw.plugins.get("GPUMemory") if fw is not None else None
    total = free = None
    sources: list[str] = []
    if isinstance(memory, GPUMemory) and table.n:
        total, free, sources = memory.budget(table)
    store = sched.cache.stores.get(DraStore)
    dra = store if isinstance(store, DraStore) else None
    for name in sorted(table.index):
        row = table.index[name]
        spec = table.specs[row]
        if spec is None:
            continue
        entry: JSON = {
            "name": name,
            "path": [spec.labels.get(k, "") for k in levels],
            "unschedulable": spec.unschedulable,
            "gpus": int(table.allocatable[gpu, row]) if gpu is not None else 0,
            "gpusUsed": int(table.requested[gpu, row]) if gpu is not None else 0,
            "gpuMemoryGB": _gb(total[row]) if total is not None else None,
            "gpuMemoryFreeGB": _gb(free[row]) if free is not None else None,
            "gpuMemorySource": sources[row] if sources else "",
            "pods": len(sched.cache.pods_on(name)),
            "devices": _devices(dra, name, spec.labels) if dra is not None else [],
        }
        yield entry


def _gb(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 1)


def _devices(store: DraStore, node: str, labels: Any) -> list[JSON]:
    out: list[JSON] = []
    for device in store.devices_for(node, labels):
        if len(out) >= MAX_DEVICES:
            break
        out.append(_device(store, device))
    return out


def _device(store: DraStore, d: Device) -> JSON:
    """One DRA device: a whole GPU (its memory), a partition (the share of its GPU's memory it
    takes) or a shared GPU (how much of its memory the shares hold), and who holds it."""
    memory = next((v for k, v in d.capacity.items() if k.endswith("/memory")), 0)
    partition = sum((c.get("memory", Decimal(0)) for c in d.consumes.values()), start=Decimal(0))
    kind = "partition" if d.consumes else ("shared" if d.multi else "device")
    entry: JSON = {
        "name": d.id.device,
        "pool": d.id.pool,
        "driver": d.id.driver,
        "kind": kind,
        "memoryGB": round(float(partition or memory) / 2**30, 1),
        "claim": store.taken_by(d.id),
        "tainted": bool(d.taints),
    }
    if d.multi:
        shares = store.shares(d.id) or {}
        entry["sharedGB"] = round(float(shares.get("memory", 0)) / 2**30, 1)
    return entry


def _gangs(
    sched: Scheduler, levels: Sequence[str], costs: Sequence[tuple[str, float]], across: float, explain: int
) -> list[JSON]:
    cache, table = sched.cache, sched.cache.table
    tight = [k for k, _ in costs]
    price = dict(costs)
    out: list[JSON] = []
    explained = 0
    for key in sorted(cache.pod_groups):
        group = cache.pod_groups[key]
        if not group.gang:
            continue
        members = cache.group_members(key)
        nodes = sorted({n for m in members if (n := cache.placed_node(m.uid))})
        placed = sum(1 for m in members if cache.placed_node(m.uid))
        entry: JSON = {
            "name": f"{group.namespace}/{group.name}",
            "api": group.api,
            "min": group.min_member,
            "members": len(members),
            "placed": placed,
            "nodes": nodes,
            "state": "placed" if placed and placed >= group.min_member else "waiting",
            "domain": None,
            "worstCost": None,
            "lines": [],
        }
        rows = [table.index[n] for n in nodes if n in table.index]
        if rows:
            level, cost = _shared_domain(sched, rows, tight, price, across)
            entry["domain"], entry["worstCost"] = level, cost
        if entry["state"] != "placed" and explained < explain:
            fw = _members_profile(sched, group, members)
            if fw is not None:
                explained += 1
                entry["lines"] = explain_gang(fw, group)
        out.append(entry)
    return out


def _members_profile(sched: Scheduler, group: PodGroupInfo, members: Sequence[PodInfo]) -> Framework | None:
    for m in members:
        fw = sched.profiles.get(m.scheduler_name)
        if fw is not None and fw.pod_group(m) is not None:
            return fw
    return None


def _shared_domain(
    sched: Scheduler, rows: Sequence[int], tight: Sequence[str], price: dict[str, float], across: float
) -> tuple[str | None, float]:
    """The tightest level all ``rows`` share one value of (``key=value``), and the worst pairwise
    cost that means (levels are nested: the widest pair is as far apart as that level)."""
    table = sched.cache.table
    if len(set(rows)) == 1:
        return f"{HOSTNAME}={table.name(rows[0])}", price.get(HOSTNAME, 0.0)
    index = np.asarray(rows, dtype=np.int64)
    for key in tight:
        if key == HOSTNAME:
            continue
        codes = table.label_column(key)[index]
        if codes[0] >= 0 and bool((codes == codes[0]).all()):
            value = table.specs[rows[0]]
            label = value.labels.get(key, "") if value is not None else ""
            return f"{key}={label}", price[key]
    return None, across


def _pending(sched: Scheduler, explain: int) -> JSON:
    cache = sched.cache
    waiting = sorted(
        (
            p
            for p in cache.pods.values()
            if not p.bound and cache.assumed_node(p.uid) is None and p.scheduler_name in sched.profiles
        ),
        key=lambda p: p.key,
    )
    pods: list[JSON] = []
    for pod in waiting[: max(explain, 0)]:
        pods.append(pending_doc(sched, pod))
    for pod in waiting[max(explain, 0) : max(explain, 0) + 200]:
        pods.append(
            {
                "pod": pod.key,
                "schedulerName": pod.scheduler_name,
                "message": _last_message(sched, pod),
                "explained": False,
            }
        )
    return {"pods": pods, "more": max(len(waiting) - len(pods), 0)}


def _last_message(sched: Scheduler, pod: PodInfo) -> str:
    """What the pod's last attempt said (its ``FailedScheduling`` message), or why it is held
    before the queue; "" before its first attempt. Read from the queue: no cycle is run."""
    qpi = sched.queue.get(pod.uid)
    if qpi is None:
        return ""
    if qpi.gate is not None:
        return f"held before the queue: {qpi.gate.message}"
    return qpi.last_message


def pending_doc(sched: Scheduler, pod: PodInfo) -> JSON:
    """One pending pod as the page shows it: ``shoal explain``'s facts, the node list trimmed to
    the best-scoring nodes and the rejections counted by plugin and reason."""
    try:
        result = sched.explain(pod)
    except KeyError as exc:
        return {"pod": pod.key, "schedulerName": pod.scheduler_name, "message": str(exc), "explained": False}
    doc = explanation_doc(sched, pod, result)
    fits = [n for n in doc["nodes"] if n["result"] == "fits"]
    rejected = [n for n in doc["nodes"] if n["result"] != "fits"]
    reasons: Counter[tuple[str, str]] = Counter()
    for n in rejected:
        for reason in n["reasons"] or [""]:
            reasons[n["plugin"], reason] += 1
    return {
        "pod": doc["pod"],
        "schedulerName": doc["schedulerName"],
        "message": doc["message"],
        "explained": True,
        "node": doc["node"],
        "gang": doc["gang"],
        "preemption": doc["preemption"],
        "claims": doc["claims"],
        "fits": len(fits),
        "best": fits[:TOP_NODES],
        "rejections": [
            {"plugin": plugin, "reason": reason, "nodes": count}
            for (plugin, reason), count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "rejected": rejected[:TOP_NODES],
    }


class FleetSnapshots:
    """The last document, built again at most every ``ttl`` seconds however many viewers ask
    (the live page polls it): viewers cost the scheduler one cache walk and one JSON encoding
    per ``ttl``."""

    def __init__(
        self,
        sched: Scheduler,
        *,
        ttl: float = 2.0,
        explain: int = DEFAULT_EXPLAIN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sched = sched
        self.ttl = ttl
        self.explain = explain
        self.clock = clock
        self._last: tuple[float, JSON] | None = None
        self._body: tuple[JSON, bytes] | None = None

    def get(self) -> JSON:
        now = self.clock()
        if self._last is None or now - self._last[0] >= self.ttl:
            self._last = (now, fleet_doc(self.sched, explain=self.explain))
        return self._last[1]

    def body(self) -> bytes:
        """:meth:`get` as JSON, encoded once per document (every viewer's poll sends the same)."""
        doc = self.get()
        if self._body is None or self._body[0] is not doc:
            self._body = (doc, json.dumps(doc, separators=(",", ":")).encode())
        return self._body[1]
