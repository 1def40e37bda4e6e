"""kube-scheduler 1.37's VolumeZone, VolumeRestrictions, NodeVolumeLimits and VolumeBinding tables,
run through the plugins (tests/data/upstream/<plugin>.yaml).

A case is the pod, the nodes (and pods already on them), the storage objects upstream's fake listers
hold (``storage``: PVs, claims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities, API-shaped
with their kind), the plugin's ``args`` (VolumeBinding only) and what kube-scheduler expects of
PreFilter and of Filter per node (VolumeBinding: of PreScore, ``pre_score``, of Score per node,
``scores``, and of the PodVolumes Filter keeps, ``volumes``, too). The storage
objects go into the cache as the watch would put them; PreFilter, then (unless it stopped the pod)
Filter over every node, then PreScore and Score over every node, as upstream's test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import yaml

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.invoker import PluginFailed
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Code, Status
from shoal.plugins import volumerestrictions, volumezone
from shoal.plugins.nodevolumelimits import plugin as nodevolumelimits
from shoal.plugins.volumebinding import plugin as volumebinding
from shoal.plugins.volumebinding.objects import CSIStorageCapacityInfo
from shoal.plugins.volumebinding.store import VolumeStore
from tests.unit.helpers import cache_with, handle_for, store_objects
from tests.unit.plugins.test_upstream_tables import DIFFERENCES, SECTION
from tests.unit.upstream import DATA, FITS, node_verdicts

KEYS = {"upstream", "pod", "nodes", "existing_pods", "storage", "args", "expect", "differs", "note", "check"}
PLUGINS: dict[str, Any] = {
    "volumezone": volumezone.VolumeZone,
    "volumerestrictions": volumerestrictions.VolumeRestrictions,
    "nodevolumelimits": nodevolumelimits.NodeVolumeLimits,
    "volumebinding": lambda cache, args: volumebinding.VolumeBinding(
        volumebinding.Args.model_validate(args), handle_for(cache)
    ),
}
#: upstream's fake listers say ``persistentvolumeclaims "x" not found``; the real ones (and shoal)
#: the singular ``persistentvolumeclaim "x" not found``
_FAKE_NOT_FOUND = re.compile(
    r'\b(persistentvolumeclaim|persistentvolume|storageclass|csinode)(?:es|s)(\.storage\.k8s\.io)? "'
)


@dataclass(frozen=True)
class Case:
    upstream: str
    raw: dict[str, Any]


def load(plugin: str) -> list[Case]:
    doc = yaml.safe_load((DATA / f"{plugin}.yaml").read_text())
    out = []
    for raw in doc["cases"]:
        unknown = set(raw) - KEYS
        assert not unknown, f"{raw.get('upstream')}: unknown keys {unknown}"
        out.append(Case(raw["upstream"], raw))
    return out


def params() -> list[Any]:
    out = []
    for plugin in PLUGINS:
        for case in load(plugin):
            differs = case.raw.get("differs")
            marks = [pytest.mark.xfail(strict=True, reason=differs)] if differs else []
            out.append(pytest.param(plugin, case, id=case.upstream, marks=marks))
    return out


def _want(value: Any) -> dict[str, Any]:
    if value is None or value == "Success":
        return {"code": "Success"}
    if isinstance(value, str):
        return {"code": value}
    reasons = [
        _FAKE_NOT_FOUND.sub(lambda m: f'{m.group(1)}{m.group(2) or ""} "', r)
        for r in value.get("reasons", [])
    ]
    return {**value, "reasons": reasons} if "reasons" in value else dict(value)


def _got(status: Status, want: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.title}
    if "reasons" in want:
        out["reasons"] = list(status.reasons)
    return out


@pytest.mark.parametrize(("plugin", "case"), params())
def test_upstream_case(plugin: str, case: Case) -> None:
    raw = case.raw
    if "check" in raw:
        _check_bindings(raw)
        return
    existing = []
    for i, p in enumerate(raw.get("existing_pods") or ()):
        p.setdefault("metadata", {}).setdefault("name", f"existing-{i}")
        existing.append(p)
    cache = cache_with(raw["nodes"], existing)
    store_objects(cache, *raw.get("storage") or ())
    pod = PodInfo.from_dict(raw["pod"])
    if not (raw["pod"].get("metadata") or {}).get("uid"):
        pod.uid = "uid-incoming"
    if plugin == "volumebinding":
        plug = PLUGINS[plugin](cache, raw.get("args") or {})
    else:
        assert "args" not in raw, f"{plugin} takes no args"
        plug = PLUGINS[plugin](cache)
    state = CycleState()
    expect = raw["expect"]
    _, status = plug.pre_filter(state, pod)
    want = _want(expect.get("pre_filter"))
    assert _got(status, want) == want, f"PreFilter: {status.code.title} {status.reasons}"
    if not status.ok:
        assert all(v == FITS for v in (expect.get("filter") or {}).values()) or not status.is_skip
        return
    want_filter = expect.get("filter") or {}
    table = cache.table
    try:
        rejections = plug.filter_nodes(state, pod, table, table.valid_rows().copy())
    except PluginFailed as exc:
        got_error = {"code": "Error", "reasons": [exc.status.message]}
        for name, verdict in want_filter.items():
            assert verdict != FITS and verdict["code"] == "Error", f"{name}: Error {exc.status.message}"
            if "reasons" in verdict:
                assert got_error["reasons"][0].startswith(_want(verdict)["reasons"][0]), got_error
        return
    got = node_verdicts(table, rejections)
    for name, verdict in want_filter.items():
        want_v = verdict if verdict == FITS else _want(verdict)
        assert want_v == FITS or want_v["code"] in {c.title for c in Code}
        if want_v != FITS and "reasons" not in want_v and got[name] != FITS:
            got[name] = {"code": got[name]["code"]}
        assert got[name] == want_v, f"Filter on {name}: got {got[name]}, want {want_v}"
    if "volumes" in expect:
        _check_volumes(plug, state, table, expect["volumes"], got)
    if "pre_score" in expect or "scores" in expect:
        _check_scores(plug, state, pod, table, expect)


def _check_volumes(
    plug: Any, state: CycleState, table: Any, want: dict[str, Any], verdicts: dict[str, Any]
) -> None:
    """binder_test.go's PodVolumes of a node Filter let through: (PV, claim) to bind, claims to
    provision (none when the pod has no unbound delayed-binding claim) and, when given
    (``node_capacity``), the CSIStorageCapacity each claim to provision is held by (upstream's
    ``DynamicProvision.NodeCapacity``; null: no capacity check, the driver does not publish)."""
    st = state.read(volumebinding.STATE_KEY)
    for name, volumes in want.items():
        assert verdicts[name] == FITS, f"{name}: PodVolumes are kept for the nodes that fit"
        got = st.by_node.get(name) or volumebinding.PodVolumes()
        pairs = [list(b) for b in got.bindings]
        plain = {k: v for k, v in volumes.items() if k != "node_capacity"}
        assert {"bindings": pairs, "provisions": got.provisions} == plain, f"PodVolumes on {name}"
        if "node_capacity" in volumes:
            _check_node_capacity(plug, table, name, got, volumes["node_capacity"])


def _check_node_capacity(
    plug: Any, table: Any, node: str, got: volumebinding.PodVolumes, want: dict[str, Any]
) -> None:
    """The CSIStorageCapacity holding each provision on ``node`` (the one Filter picked, asked of the
    plugin's own choice, ``_space``), and what Score reads of it (``provision_sizes``: class,
    request, the object's capacity)."""
    assert set(want) == set(got.provisions), f"{node}: node_capacity names the claims to provision"
    store = plug.cache.store(VolumeStore)
    row = next(r for r in np.flatnonzero(table.valid_rows()).tolist() if table.name(int(r)) == node)
    sizes = []
    for key in got.provisions:
        pvc = store.pvcs[key]
        space = plug._space(pvc, table, np.array([row], dtype=np.int64))
        held = None if space is None else space.get(row)
        expected = None if want[key] is None else CSIStorageCapacityInfo.from_dict(want[key])
        assert held == expected, f"{node}: {key} held by {held}, want {expected}"
        if expected is not None and expected.capacity is not None:
            sizes.append((pvc.storage_class, pvc.request, expected.capacity))
    assert got.provision_sizes == sizes, f"{node}: provision sizes {got.provision_sizes}, want {sizes}"


def _check_bindings(raw: dict[str, Any]) -> None:
    """binder_test.go TestCheckBindings: the PVs and claims in the cache after PreBind's writes were
    seen (or never needed), what PreBind waits on (``check``), and what the bind check says: all
    ``bound``, ``waiting``, or an ``error`` (whose message starts with ``expect.error``)."""
    cache = cache_with(raw["nodes"], [])
    store_objects(cache, *raw.get("storage") or ())
    plug = PLUGINS["volumebinding"](cache, raw.get("args") or {})
    check = raw["check"]
    volumes = volumebinding.PodVolumes([tuple(b) for b in check["bindings"]], list(check["provisions"]))
    status = plug._check(volumes, check["node"])
    got = "bound" if status is None else "waiting" if status.ok else "error"
    assert got == raw["expect"]["check"], f"{got}: {status}"
    if status is not None and "error" in raw["expect"]:
        assert status.message.startswith(raw["expect"]["error"]), status.message


def _check_scores(plug: Any, state: CycleState, pod: PodInfo, table: Any, expect: dict[str, Any]) -> None:
    """PreScore, then Score over every node (upstream's test scores the nodes Filter rejected too)."""
    rows = np.flatnonzero(table.valid_rows()).astype(np.int64)
    status = plug.pre_score(state, pod, rows, table)
    want = _want(expect.get("pre_score"))
    assert _got(status, want) == want, f"PreScore: {status.code.title} {status.reasons}"
    if "scores" in expect:
        scores = plug.score_nodes(state, pod, table, rows)
        got = {table.name(int(r)): int(s) for r, s in zip(rows, scores, strict=True)}
        assert got == expect["scores"], f"Score: got {got}, want {expect['scores']}"


def test_tables_name_their_source_and_differences_are_documented() -> None:
    text = DIFFERENCES.read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    for plugin in PLUGINS:
        cases = load(plugin)
        assert cases, plugin
        names = [c.upstream for c in cases]
        assert len(set(names)) == len(names), f"{plugin}: duplicate case"
        for case in cases:
            assert re.fullmatch(rf"{plugin}/\w+_test\.go Test\w+: .+", case.upstream, re.DOTALL), (
                case.upstream
            )
            if case.raw.get("differs"):
                assert case.upstream.split(" ", 1)[0] in section, f"{case.upstream} not in {SECTION!r}"
