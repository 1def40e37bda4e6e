"""The plugin registry: name -> PluginEntry, built-ins plus the entry-point group ``shoal.plugins``.

A third-party package registers a plugin without rebuilding shoal::

    [project.entry-points."shoal.plugins"]
    MyPlugin = "my_package.my_plugin"          # a module with NAME, new(args, handle), Args, ENTRY

The value may be a :class:`~shoal.core.framework.profile.PluginEntry`, or a module exposing ``ENTRY`` or
``NAME`` + ``new`` (+ optional ``Args``, ``PLUGIN_CLASS`` and ``CONTRACT``, a
:class:`~shoal.core.framework.contract.Contract`). A name registered twice is an
error, whether two packages or a package and a built-in claim it.

Also here: the default plugin lists and the default ``gpu-scheduler`` profile.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import replace
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from shoal.core.framework.contract import NO_CONTRACT, Contract
from shoal.core.framework.profile import PluginEntry, PluginSet
from shoal.plugins import (
    balancedallocation,
    coscheduling,
    defaultbinder,
    gpumemory,
    imagelocality,
    interpodaffinity,
    networklatency,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    prioritysort,
    schedulinggates,
    tainttoleration,
    volumerestrictions,
    volumezone,
)
from shoal.plugins.defaultpreemption import plugin as defaultpreemption
from shoal.plugins.dynamicresources import plugin as dynamicresources
from shoal.plugins.nodevolumelimits import plugin as nodevolumelimits
from shoal.plugins.topologyplacement import plugin as topologyplacement
from shoal.plugins.volumebinding import plugin as volumebinding

ENTRY_POINT_GROUP = "shoal.plugins"
PLUGINS_ENV = "SHOAL_PLUGINS"
BUILTIN: tuple[PluginEntry, ...] = (
    prioritysort.ENTRY,
    nodename.ENTRY,
    nodeunschedulable.ENTRY,
    noderesources.ENTRY,
    balancedallocation.ENTRY,
    tainttoleration.ENTRY,
    nodeaffinity.ENTRY,
    nodeports.ENTRY,
    gpumemory.ENTRY,
    coscheduling.ENTRY,
    defaultbinder.ENTRY,
    schedulinggates.ENTRY,
    interpodaffinity.ENTRY,
    networklatency.ENTRY,
    podtopologyspread.ENTRY,
    imagelocality.ENTRY,
    # a claim's four plugins, in the order a pod refused for leaving them out names them
    volumebinding.ENTRY,
    volumezone.ENTRY,
    volumerestrictions.ENTRY,
    nodevolumelimits.ENTRY,
    dynamicresources.ENTRY,
    topologyplacement.ENTRY,
    defaultpreemption.ENTRY,
    nodedeclaredfeatures.ENTRY,
)
DEFAULT_SCHEDULER_NAME = "gpu-scheduler"


class RegistryError(ValueError):
    """A plugin could not be registered (duplicate name, malformed entry point)."""


def _as_entry(obj: Any, source: str) -> PluginEntry:
    if isinstance(obj, PluginEntry):
        return replace(obj, source=source)
    if isinstance(obj, ModuleType) or hasattr(obj, "NAME"):
        entry = getattr(obj, "ENTRY", None)
        if isinstance(entry, PluginEntry):
            return _as_entry(entry, source)
        name, factory = getattr(obj, "NAME", None), getattr(obj, "new", None)
        if isinstance(name, str) and callable(factory):
            contract = getattr(obj, "CONTRACT", None)
            return PluginEntry(
                name,
                factory,
                getattr(obj, "Args", None),
                getattr(obj, "PLUGIN_CLASS", None),
                source,
                contract if isinstance(contract, Contract) else NO_CONTRACT,
            )
    raise RegistryError(f"{source}: not a plugin (expected a PluginEntry or a module with NAME and new)")


def build_registry(entries: Iterable[PluginEntry]) -> dict[str, PluginEntry]:
    registry: dict[str, PluginEntry] = {}
    for entry in entries:
        if entry.name in registry:
            first = registry[entry.name].source
            raise RegistryError(f"plugin name {entry.name!r} registered twice ({first} and {entry.source})")
        registry[entry.name] = entry
    return registry


def load_registry(*, third_party: bool = True, extra: Iterable[PluginEntry] = ()) -> dict[str, PluginEntry]:
    """Built-ins, then ``extra``, then every ``shoal.plugins`` entry point, then the modules named in
    ``$SHOAL_PLUGINS`` (comma-separated import paths: a plugin module on PYTHONPATH, no packaging)."""
    entries = list(BUILTIN) + list(extra)
    if third_party:
        for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
            source = f"${PLUGINS_ENV} module {name}"
            try:
                module = importlib.import_module(name)
            except Exception as exc:
                raise RegistryError(f"{source}: {type(exc).__name__}: {exc}") from exc
            entries.append(_as_entry(module, source))
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            source = f"entry point {ep.name} = {ep.value}"
            try:
                loaded = ep.load()
            except Exception as exc:
                raise RegistryError(f"{source}: {type(exc).__name__}: {exc}") from exc
            entries.append(_as_entry(loaded, source))
    return build_registry(entries)


def _refs(*names: str | tuple[str, int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in names:
        if isinstance(item, tuple):
            out.append({"name": item[0], "weight": item[1]})
        else:
            out.append({"name": item})
    return out


#: The default plugin at each extension point (a profile that omits a point gets this list).
DEFAULT_PLUGINS_SPEC: dict[str, list[dict[str, Any]]] = {
    "preEnqueue": _refs("SchedulingGates", "DefaultPreemption", "DynamicResources", "Coscheduling"),
    "queueSort": _refs("PrioritySort"),
    "preFilter": _refs(
        "NodeResourcesFit",
        "NodePorts",
        "NodeAffinity",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "DynamicResources",
        "GPUMemory",
        "PodTopologySpread",
        "InterPodAffinity",
        "Coscheduling",
        "NodeDeclaredFeatures",
    ),
    "filter": _refs(
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "DynamicResources",
        "GPUMemory",
        "PodTopologySpread",
        "InterPodAffinity",
        "TopologyPlacement",
        "NodeDeclaredFeatures",
    ),
    "postFilter": _refs("DynamicResources", "DefaultPreemption"),
    "preScore": _refs(
        "NodeResourcesFit",
        "NodeAffinity",
        "GPUMemory",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "ImageLocality",
        "NetworkLatency",
    ),
    "score": _refs(
        ("NodeResourcesFit", 3),
        ("TaintToleration", 1),
        ("NodeAffinity", 2),
        ("GPUMemory", 1),
        ("VolumeBinding", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DynamicResources", 2),
        ("ImageLocality", 1),
        ("NetworkLatency", 1),
    ),
    "reserve": _refs("VolumeBinding", "DynamicResources", "GPUMemory", "Coscheduling"),
    "permit": _refs("Coscheduling"),
    "placementFeasible": _refs("Coscheduling"),
    "preBind": _refs("VolumeBinding", "DynamicResources"),
    "bind": _refs("DefaultBinder"),
    "postBind": [],
}
DEFAULT_PLUGINS = PluginSet.model_validate(DEFAULT_PLUGINS_SPEC)

#: The ``gpu-scheduler`` profile the Helm chart installs: pack GPUs, spread nothing else.
DEFAULT_PROFILE_SPEC: dict[str, Any] = {
    "schedulerName": DEFAULT_SCHEDULER_NAME,
    "percentageOfNodesToScore": 100,
    "pluginConfig": [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [
                        {"name": "nvidia.com/gpu", "weight": 10},
                        {"name": "cpu", "weight": 1},
                        {"name": "memory", "weight": 1},
                    ],
                }
            },
        },
        {"name": "GPUMemory", "args": {"labelKey": "gpu-memory-free-gb"}},
        {"name": "Coscheduling", "args": {"defaultScheduleTimeoutSeconds": 60}},
        # no default spreading: pods spread only where they ask to (kube-scheduler's System
        # defaults would spread Deployment / StatefulSet / Service pods against the packing)
        {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
    ],
}
