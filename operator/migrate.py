"""``shoal profiles from-config``: a KubeSchedulerConfiguration into SchedulingProfiles.

Teams come from kube-scheduler or scheduler-plugins with a ``kubescheduler.config.k8s.io/v1``
file. Its plugin lists are *changes* to kube-scheduler's defaults, so each profile is first
resolved as kube-scheduler resolves it, then written as shoal needs it:

1. **Defaults merged** (kube-scheduler's ``mergePluginSet``): every default plugin is enabled at
   ``multiPoint``; a profile's ``multiPoint.disabled`` removes some (``*``: all), its
   ``multiPoint.enabled`` re-configures a default in place (its weight) or appends.
2. **multiPoint expanded** per extension point (the framework's ``expandMultiPointPlugins``): a
   multiPoint plugin goes to each point it implements (shoal's plugin classes say which), unless
   disabled there; a plugin also enabled at the point itself keeps that entry and comes first;
   ``disabled: [*]`` at a point keeps only that point's own list. Score weights: the entry used,
   0 or none meaning 1.
3. **Written for shoal**: a point whose plugins and weights equal shoal's default for it is left
   out (shoal's defaults apply); any other is listed in full. Plugins shoal does not have, points
   a shoal plugin does not implement, and args without an equivalent are dropped, each said once
   on stderr (:attr:`Conversion.notes`).

``pluginConfig`` args are kept when the shoal plugin's args model takes them (kube-scheduler's and
shoal's args share names for the ported plugins); scheduler-plugins' CoschedulingArgs are
translated (``permitWaitingTimeSeconds`` → ``defaultScheduleTimeoutSeconds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from shoal.core.framework.gates import MAX_PERMIT_TIMEOUT
from shoal.core.framework.interfaces import POINTS
from shoal.core.framework.profile import (
    MAX_WEIGHT,
    PluginEntry,
    PluginSet,
    ProfileError,
    validate_profile,
)

JSON = dict[str, Any]

API_VERSIONS = ("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3")
KIND = "KubeSchedulerConfiguration"
MULTI_POINT = "multiPoint"

#: kube-scheduler 1.37's default plugins (all at multiPoint, in its order) and score weights, with
#: the gates 1.37 turns on by default (DynamicResourceAllocation puts DynamicResources before
#: DefaultPreemption at weight 2; NodeDeclaredFeatures, GA, comes last); default_plugins.go
KUBE_DEFAULTS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeName", None),
    ("NodeUnschedulable", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)

#: why a plugin of kube-scheduler or scheduler-plugins has no shoal equivalent, where known
WHY_MISSING = {
    "CapacityScheduling": "shoal does not read ElasticQuotas",
    "NodeResourceTopologyMatch": "shoal does not read NodeResourceTopology (NUMA) objects",
    "NodeResourcesAllocatable": "not a shoal plugin (NodeResourcesFit's scoringStrategy is the closest)",
}

#: top-level settings that are not a profile's, and where shoal has them instead
NOT_PROFILE = {
    "leaderElection": "the chart's leaderElection values / `shoal run --lease-*`",
    "clientConnection": "the kubeconfig or in-cluster config of `shoal run`",
    "parallelism": "nothing: shoal's filters are vectorised over all nodes",
    "podInitialBackoffSeconds": "nothing: shoal's backoff is 1 s",
    "podMaxBackoffSeconds": "nothing: shoal's backoff caps at 10 s",
    "extenders": "nothing: shoal has no scheduler extenders (write a plugin)",
    "delayCacheUntilActive": "nothing: shoal's replicas always keep warm caches",
}
IGNORED_TOP = {"apiVersion", "kind", "profiles", "percentageOfNodesToScore", "featureGates"}


class ConfigError(ValueError):
    """The file is not a KubeSchedulerConfiguration shoal can read (one line, for the CLI)."""


@dataclass
class Ref:
    name: str
    weight: int | None = None


@dataclass
class Conversion:
    """SchedulingProfile objects, and what could not be carried over (one line each)."""

    profiles: list[JSON] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        return yaml.safe_dump_all(self.profiles, sort_keys=False, width=100)


# -- reading ----------------------------------------------------------------------------------------
def load_config(text: str, source: str) -> JSON:
    """The KubeSchedulerConfiguration in ``text`` (also inside a ConfigMap, as charts ship it)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise ConfigError(f"{source}: not YAML ({first})") from None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            for value in (doc.get("data") or {}).values():
                inner = load_config(str(value), source) if KIND in str(value) else None
                if inner is not None:
                    return inner
    configs = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
    if len(configs) != 1:
        raise ConfigError(f"{source}: expected one {KIND}, found {len(configs)}")
    config = configs[0]
    if config.get("apiVersion") not in API_VERSIONS:
        raise ConfigError(f"{source}: apiVersion {config.get('apiVersion')!r} is not {API_VERSIONS[0]}")
    if not isinstance(config.get("profiles") or [], list):
        raise ConfigError(f"{source}: profiles must be a list")
    return config


def _refs(value: Any, where: str) -> list[Ref]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, dict) and p.get("name") for p in value):
        raise ConfigError(f"{where}: expected a list of {{name, weight}}")
    return [Ref(str(p["name"]), int(p["weight"]) if p.get("weight") is not None else None) for p in value]


# -- kube-scheduler's resolution ----------------------------------------------------------------------
def merged_multi_point(plugins: Mapping[str, Any], where: str) -> list[Ref]:
    """kube-scheduler's defaults at multiPoint, with the profile's multiPoint changes."""
    custom = plugins.get(MULTI_POINT) or {}
    disabled = {r.name for r in _refs(custom.get("disabled"), f"{where}.disabled")}
    enabled = _refs(custom.get("enabled"), f"{where}.enabled")
    by_name = {r.name: r for r in enabled}
    out: list[Ref] = []
    if "*" not in disabled:
        for name, weight in KUBE_DEFAULTS:
            if name not in disabled:
                out.append(by_name.pop(name, Ref(name, weight)))
    return out + [r for r in enabled if r.name in by_name]


def resolve(
    plugins: Mapping[str, Any], registry: Mapping[str, PluginEntry], where: str, notes: list[str]
) -> dict[str, list[Ref]]:
    """Each extension point's plugins, as kube-scheduler's framework would run them (with shoal's
    plugins' points), and a note for every plugin shoal lacks."""
    multi = merged_multi_point(plugins, f"{where}.{MULTI_POINT}")
    for ref in multi:
        if ref.name not in registry:
            why = WHY_MISSING.get(ref.name, "not a shoal plugin")
            notes.append(f"{where}: plugin {ref.name} (multiPoint) left out: {why}")
    points: dict[str, list[Ref]] = {}
    for point in POINTS:
        own = plugins.get(point) or {}
        enabled = _refs(own.get("enabled"), f"{where}.{point}.enabled")
        disabled = {r.name for r in _refs(own.get("disabled"), f"{where}.{point}.disabled")}
        expanded: list[Ref] = []
        if "*" not in disabled:
            expanded = [
                r
                for r in multi
                if r.name in registry and point in registry[r.name].points() and r.name not in disabled
            ]
        mine = {r.name for r in enabled}
        overrides = [r for r in enabled if any(m.name == r.name for m in expanded)]
        rest = [r for r in enabled if r not in overrides]
        points[point] = overrides + [r for r in expanded if r.name not in mine] + rest
    return {p: _shoal_refs(p, refs, registry, where, notes) for p, refs in points.items()}


def _shoal_refs(
    point: str, refs: list[Ref], registry: Mapping[str, PluginEntry], where: str, notes: list[str]
) -> list[Ref]:
    out: list[Ref] = []
    for ref in refs:
        entry = registry.get(ref.name)
        if entry is None:
            why = WHY_MISSING.get(ref.name, "not a shoal plugin")
            notes.append(f"{where}.{point}: plugin {ref.name} left out: {why}")
        elif point not in entry.points():
            notes.append(f"{where}.{point}: plugin {ref.name} left out: shoal's {ref.name} has no {point}")
        elif point == "score":
            weight = ref.weight or 1
            if weight > MAX_WEIGHT:
                notes.append(
                    f"{where}.score: {ref.name} weight {weight} lowered to shoal's maximum {MAX_WEIGHT}"
                )
            out.append(Ref(ref.name, min(weight, MAX_WEIGHT)))
        else:
            out.append(Ref(ref.name))
    return out


def _required_points(points: dict[str, list[Ref]], where: str, notes: list[str]) -> None:
    """A profile needs one QueueSort and a Bind plugin; when none of the source's survived."""
    if not points["queueSort"]:
        notes.append(
            f"{where}.queueSort: no shoal QueueSort plugin left; PrioritySort used (shoal places a "
            "gang in one cycle, so its members need not be sorted together)"
        )
        points["queueSort"] = [Ref("PrioritySort")]
    if not points["bind"]:
        notes.append(f"{where}.bind: no shoal Bind plugin left; DefaultBinder used")
        points["bind"] = [Ref("DefaultBinder")]


def _spec_plugins(points: Mapping[str, list[Ref]], defaults: PluginSet | None) -> JSON:
    """Only the points that differ from shoal's defaults (names and weights, order aside)."""
    out: JSON = {}
    for point, refs in points.items():
        default = defaults.point(point) if defaults is not None else None
        if default is not None:
            same = {(r.name, (r.weight or 1) if point == "score" else None) for r in default}
            if same == {(r.name, r.weight) for r in refs} and len(default) == len(refs):
                continue
        out[point] = [{"name": r.name, **({"weight": r.weight} if point == "score" else {})} for r in refs]
    return out


# -- args -----------------------------------------------------------------------------------------------
def coscheduling_args(args: Mapping[str, Any], where: str, notes: list[str]) -> JSON:
    """scheduler-plugins' CoschedulingArgs → shoal's Coscheduling args."""
    out: JSON = {}
    for key, value in args.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "permitWaitingTimeSeconds" and isinstance(value, int):
            seconds = min(max(value, 1), int(MAX_PERMIT_TIMEOUT))
            if seconds != value:
                notes.append(f"{where}: permitWaitingTimeSeconds {value} is {seconds} in shoal (1 to 900)")
            out["defaultScheduleTimeoutSeconds"] = seconds
        elif key == "podGroupBackoffSeconds":
            notes.append(
                f"{where}: podGroupBackoffSeconds dropped: shoal backs a failed gang off with each "
                "member's pod backoff (1 s to 10 s)"
            )
        else:
            notes.append(f"{where}: {key} dropped: shoal's Coscheduling has no such arg")
    return out


def plugin_args(
    name: str, args: Mapping[str, Any], entry: PluginEntry, where: str, notes: list[str]
) -> JSON | None:
    """Args shoal's plugin takes as they are (kube-scheduler's names), or None with a note."""
    if name == "Coscheduling":
        return coscheduling_args(args, where, notes)
    body = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
    try:
        entry.parse_args(body)
    except ValidationError as exc:
        for e in exc.errors(include_url=False):
            path = ".".join(str(p) for p in e["loc"])
            notes.append(f"{where}.{path}: {e['msg']}; args of {name} dropped (shoal's defaults apply)")
        return None
    except ValueError as exc:
        notes.append(f"{where}: {exc}; args dropped")
        return None
    return body


def plugin_config(
    items: Any, used: set[str], registry: Mapping[str, PluginEntry], where: str, notes: list[str]
) -> list[JSON]:
    out: list[JSON] = []
    for i, item in enumerate(items or ()):
        here = f"{where}[{i}]"
        if not isinstance(item, dict) or not item.get("name"):
            raise ConfigError(f"{here}: expected {{name, args}}")
        name = str(item["name"])
        entry = registry.get(name)
        if entry is None or name not in used:
            why = "not a shoal plugin" if entry is None else "the plugin is not in the profile"
            notes.append(f"{here}: args of {name} dropped: {why}")
            continue
        args = plugin_args(name, item.get("args") or {}, entry, f"{here}.args", notes)
        if args:
            out.append({"name": name, "args": args})
    return out


# -- the whole file ---------------------------------------------------------------------------------
def _percentage(profile: Mapping[str, Any], top: Any, where: str, notes: list[str]) -> int | None:
    value = profile.get("percentageOfNodesToScore", top)
    if value is None:
        return None
    if isinstance(value, int) and 1 <= value <= 100:
        return value
    notes.append(
        f"{where}.percentageOfNodesToScore: {value} (kube-scheduler's adaptive share) dropped: "
        "shoal scores every feasible node (100)"
    )
    return None


def convert_profile(
    profile: Mapping[str, Any],
    top: Mapping[str, Any],
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None,
    where: str,
) -> tuple[JSON, list[str]]:
    """One KubeSchedulerProfile → a SchedulingProfile object, and its notes."""
    notes: list[str] = []
    name = str(profile.get("schedulerName") or "default-scheduler")
    if name == "default-scheduler":
        notes.append(
            f"{where}: schedulerName default-scheduler is the cluster's default scheduler's: shoal "
            "would schedule every pod that names no scheduler; rename it unless shoal replaces kube-scheduler"
        )
    points = resolve(profile.get("plugins") or {}, registry, where + ".plugins", notes)
    _required_points(points, where + ".plugins", notes)
    spec: JSON = {"schedulerName": name}
    percentage = _percentage(profile, top.get("percentageOfNodesToScore"), where, notes)
    if percentage is not None:
        spec["percentageOfNodesToScore"] = percentage
    plugins = _spec_plugins(points, defaults)
    if plugins:
        spec["plugins"] = plugins
    used = {r.name for refs in points.values() for r in refs}
    config = plugin_config(profile.get("pluginConfig"), used, registry, where + ".pluginConfig", notes)
    if config:
        spec["pluginConfig"] = config
    try:
        validate_profile(spec, registry, defaults)
    except ProfileError as exc:
        notes.append(f"{where}: the converted profile is not valid in shoal: {exc}")
    obj = {"apiVersion": "shoal.dev/v1alpha1", "kind": "SchedulingProfile", "metadata": {"name": name}}
    return {**obj, "spec": spec}, notes


def convert(
    config: Mapping[str, Any], registry: Mapping[str, PluginEntry], defaults: PluginSet | None
) -> Conversion:
    """Every profile of ``config``; what is not carried over in ``notes``, in file order."""
    out = Conversion()
    for key in config:
        if key not in IGNORED_TOP:
            where = NOT_PROFILE.get(key, "nothing in shoal")
            out.notes.append(f"{key}: not a profile setting (shoal's equivalent: {where})")
    if config.get("featureGates"):
        out.notes.append("featureGates: not carried over (shoal follows Kubernetes 1.37's defaults)")
    profiles = config.get("profiles") or [{}]
    names: set[str] = set()
    for i, profile in enumerate(profiles):
        if not isinstance(profile, dict):
            raise ConfigError(f"profiles[{i}]: expected a mapping")
        obj, notes = convert_profile(profile, config, registry, defaults, f"profiles[{i}]")
        if obj["metadata"]["name"] in names:
            raise ConfigError(f"profiles[{i}]: schedulerName {obj['metadata']['name']} is listed twice")
        names.add(obj["metadata"]["name"])
        out.profiles.append(obj)
        out.notes.extend(notes)
    return out
