"""Runs kube-scheduler's unit-test tables (``tests/data/upstream/<plugin>.yaml``) through shoal.

Each case is one row of an upstream table: the pod, the nodes (and pods already on them), the
plugin args, and what kube-scheduler 1.37 expects — per node ``fits`` or the Filter's code and
reasons, PreFilter / PreScore codes, normalised scores. The runners call the plugin the way the
framework does, through its vectorised methods over the node table, and compare.

A case marked ``differs: <why>`` is a deliberate difference (listed in docs/differences.md, "Where
shoal differs from kube-scheduler on purpose"); it is run as a strict xfail, so it fails loudly the
day shoal starts to agree with upstream and the mark can go.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Rejection
from shoal.core.state.cache import ClusterCache
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.spreadselectors import SelectorOwner
from shoal.core.state.status import Code, Status
from tests.unit.helpers import all_rows, cache_with, handle_for, scores_by_name

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream"
FITS = "fits"


@dataclass(frozen=True)
class Case:
    upstream: str
    pod: dict[str, Any]
    nodes: list[dict[str, Any]]
    existing_pods: list[dict[str, Any]]
    args: dict[str, Any] | None
    expect: dict[str, Any]
    differs: str | None
    feature_gates: dict[str, bool]
    #: Services, ReplicationControllers, ReplicaSets, StatefulSets (upstream's ``objs``)
    objects: tuple[dict[str, Any], ...] = ()
    #: ``{"add": pod}`` or ``{"remove": pod}``: a pod added to / removed from the cluster before
    #: PreFilter (upstream's PreFilterExtensions AddPod / RemovePod tables)
    change: dict[str, Any] | None = None


def node_verdicts(table: NodeTable, rejections: Iterable[Rejection]) -> dict[str, Any]:
    """Per node, FITS or ``{"code", "reasons"}`` as one plugin's Filter status would say it."""
    got: dict[str, Any] = {name: FITS for name in table.index}
    for rej in rejections:
        for row in np.flatnonzero(rej.mask):
            name = table.names[int(row)]
            if name is None:
                continue
            verdict = got[name]
            if verdict == FITS:
                verdict = got[name] = {"code": rej.code.title, "reasons": []}
            assert verdict["code"] == rej.code.title, f"{name}: two codes from one plugin"
            verdict["reasons"].append(rej.reason)
    return got


def load(plugin: str) -> list[Case]:
    doc = yaml.safe_load((DATA / f"{plugin}.yaml").read_text())
    out = []
    for raw in doc["cases"]:
        unknown = set(raw) - {
            "upstream", "pod", "nodes", "existing_pods", "args", "expect", "differs", "feature_gates", "note",
            "objects", "change",
        }  # fmt: skip
        assert not unknown, f"{raw.get('upstream')}: unknown keys {unknown}"
        out.append(
            Case(
                upstream=raw["upstream"],
                pod=raw.get("pod") or {},
                nodes=raw.get("nodes") or [],
                existing_pods=raw.get("existing_pods") or [],
                args=raw.get("args"),
                expect=raw["expect"],
                differs=raw.get("differs"),
                feature_gates=raw.get("feature_gates") or {},
                objects=tuple(raw.get("objects") or ()),
                change=raw.get("change"),
            )
        )
    return out


def params(plugin: str) -> list[Any]:
    """pytest params, one per case, id'd by the upstream test and case name."""
    out = []
    for case in load(plugin):
        marks = [pytest.mark.xfail(strict=True, reason=case.differs)] if case.differs else []
        out.append(pytest.param(case, id=case.upstream.split(" ", 1)[1], marks=marks))
    return out


@dataclass
class World:
    table: NodeTable
    pod: PodInfo
    handle: Any


def build(case: Case) -> World:
    """The cluster of one case: its nodes, the pods already bound to them, and the incoming pod."""
    existing = []
    for i, raw in enumerate(case.existing_pods):
        obj = copy.deepcopy(raw)
        obj.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        existing.append(obj)
    cache = cache_with(case.nodes, existing)
    for obj in case.objects:
        cache.spread_selectors.upsert(SelectorOwner.decode(str(obj["kind"]), obj))
    pod = PodInfo.from_dict(case.pod)
    pod.uid = "uid-incoming"
    return World(cache.table, pod, handle_for(cache))


def change_cluster(cache: ClusterCache, change: dict[str, Any], whatif: bool) -> Callable[[], None]:
    """Add or remove a case's pod (``{"add": pod}`` with its ``spec.nodeName``, or ``{"remove":
    pod}``: the pod of that namespace and name, if the cluster has it). Through the cache (bound,
    deleted), or (``whatif``) as preemption's what-ifs do: ``ClusterCache.recount`` of a pending
    pod (core/framework/whatif.py counting a nominated pod), ``ClusterCache.uncount``
    (plugins/defaultpreemption/evaluator.py evicting a victim). Returns what undoes the what-if
    (nothing to undo for the cache)."""
    counted: list[tuple[PodInfo, str]] = []  # what-if: (pod, node) counted for the duration
    uncounted: list[tuple[PodInfo, str]] = []  # what-if: (pod, node) taken off for the duration
    if "add" in change:
        raw = copy.deepcopy(change["add"])
        node = raw["spec"].pop("nodeName") if whatif else raw["spec"]["nodeName"]
        added = PodInfo.from_dict(raw)
        added.uid = "uid-added"
        cache.upsert_pod(added)  # bound; or (what-if) pending, then counted as a nominated pod is
        if whatif:
            cache.recount(added, node)
            counted.append((added, node))
    else:
        meta = change["remove"]["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        for uid in [u for u, p in cache.pods.items() if (p.namespace, p.name) == key]:
            if not whatif:
                cache.remove_pod(uid)
            elif (node := cache.uncount(uid)) is not None:
                uncounted.append((cache.pods[uid], node))

    def undo() -> None:
        for pod, _ in counted:
            cache.uncount(pod.uid)
        for pod, node in uncounted:
            cache.recount(pod, node)

    return undo


def check_status(what: str, got: Status, want: Mapping[str, Any] | str | None) -> None:
    """``want``: a code name, or {code, reasons}; None means Success."""
    if want is None:
        want = "Success"
    if isinstance(want, str):
        want = {"code": want}
    assert want["code"] in {c.title for c in Code}, f"{what}: no code {want['code']!r}"
    assert got.code.title == want["code"], f"{what}: got {got.code.title} {got.reasons}, want {want}"
    if "reasons" in want:
        assert list(got.reasons) == list(want["reasons"]), f"{what}: reasons {got.reasons}"


def run_filter(case: Case, world: World, plugin: Any, state: CycleState) -> None:
    """PreFilter (if the plugin has one), then Filter over every node; compare per node."""
    expect = case.expect
    if "filter" not in expect and "pre_filter" not in expect:
        return  # a Score table row
    table, pod = world.table, world.pod
    skipped = False
    if not expect.get("run_pre_filter", True):
        pass  # upstream calls Filter alone; the plugin must not depend on PreFilter having run
    elif hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, pod)
        check_status("PreFilter", status, expect.get("pre_filter"))
        skipped = status.is_skip
    elif "pre_filter" in expect:
        # upstream's PreFilter has no verdict of its own that shoal's plugin would need
        check_status("PreFilter (none in shoal)", Status(), expect["pre_filter"])
    want = expect.get("filter")
    if want is None:
        return
    if skipped:  # the framework does not call Filter after Skip: every node passes this plugin
        assert all(v == FITS for v in want.values()), "PreFilter skipped, but upstream rejects a node"
        return
    got = node_verdicts(table, plugin.filter_nodes(state, pod, table, table.valid_rows().copy()))
    for name, verdict in want.items():
        assert verdict == FITS or verdict["code"] in {c.title for c in Code}, f"{name}: bad verdict {verdict}"
        assert got[name] == verdict, f"Filter on {name}: got {got[name]}, want {verdict}"
    # kube-scheduler narrows the nodes by a PreFilterResult; shoal's Filter must reject the others
    named = expect.get("pre_filter_result")
    if named is not None:
        for name, verdict in got.items():
            if name not in named:
                assert verdict != FITS, f"{name} is outside upstream's PreFilterResult {named} but fits"
                assert verdict["code"] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE.title


def run_score(case: Case, world: World, plugin: Any, state: CycleState) -> None:
    """PreScore (if the plugin has one and upstream ran it), Score, NormalizeScore; compare."""
    expect = case.expect
    if "scores" not in expect and "pre_score" not in expect:
        return  # a Filter table row
    table, pod = world.table, world.pod
    rows = all_rows(table)
    if expect.get("run_pre_score", True) and hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, rows, table)
        check_status("PreScore", status, expect.get("pre_score"))
        if not status.ok:
            assert "scores" not in expect, "PreScore stopped, yet upstream expects scores"
            return
    want = expect.get("scores")
    if want is None:
        return
    raw = plugin.score_nodes(state, pod, table, rows)
    normalised = plugin.normalize_scores(state, pod, raw)
    assert scores_by_name(table, normalised) == want
