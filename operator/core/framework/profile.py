"""The SchedulingProfile spec (pydantic) and its validation against the plugin registry.

A profile says, for one ``schedulerName``, which plugins run at which extension point, the Score
weights and each plugin's args. An extension point left out of ``plugins`` keeps the default list
(the built-in ``gpu-scheduler`` profile's); a list given replaces the default for that point.

:func:`validate_profile` returns a spec or raises :class:`ProfileError` whose messages name the
field (``spec.plugins.filter[2].name: unknown plugin "Foo"``), so the operator can put them in the
SchedulingProfile's ``Ready=False`` condition and the CLI can print them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from shoal.core.framework.contract import NO_CONTRACT, Contract
from shoal.core.framework.interfaces import EXTENSION_POINTS, POINTS, Handle, Plugin, Store

MAX_PLUGINS_PER_POINT = 64
MAX_WEIGHT = 100
MAX_ALIASES = 16
SCHEDULER_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

SchedulerName = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=SCHEDULER_NAME_PATTERN)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PluginRef(_Model):
    """A plugin at one extension point. ``weight`` only matters at ``score`` (default 1)."""

    name: str = Field(min_length=1, max_length=128, description="Registered plugin name.")
    weight: int | None = Field(
        default=None, ge=1, le=MAX_WEIGHT, description="Score weight, 1-100 (score only; default 1)."
    )


class PluginSet(_Model):
    """Plugins per extension point. An omitted point keeps the default list."""

    pre_enqueue: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    queue_sort: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    pre_filter: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    filter: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    post_filter: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    pre_score: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    score: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    reserve: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    permit: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    placement_feasible: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    pre_bind: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    bind: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)
    post_bind: list[PluginRef] | None = Field(default=None, max_length=MAX_PLUGINS_PER_POINT)

    def point(self, point: str) -> list[PluginRef] | None:
        value: list[PluginRef] | None = getattr(self, _snake(point))
        return value


class PluginConfig(_Model):
    """Args for one plugin (validated by that plugin's args model)."""

    name: str = Field(min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)


class ProfileSpec(_Model):
    """``spec`` of a SchedulingProfile."""

    scheduler_name: SchedulerName = Field(
        description="Pods with this spec.schedulerName are scheduled by this profile.",
    )
    aliases: list[SchedulerName] = Field(
        default_factory=list,
        max_length=MAX_ALIASES,
        description="More schedulerNames this profile schedules, each claimed as schedulerName is "
        "(the oldest profile claiming a name wins), e.g. scheduler-plugins-scheduler, which KubeRay sets.",
    )
    percentage_of_nodes_to_score: int = Field(
        default=100,
        ge=1,
        le=100,
        description=(
            "Share of the nodes, at least 100, whose feasible ones are scored, as kube-scheduler's "
            "(100: every feasible node; shoal's default)."
        ),
    )
    plugins: PluginSet = Field(default_factory=PluginSet)
    plugin_config: list[PluginConfig] = Field(default_factory=list, max_length=MAX_PLUGINS_PER_POINT)

    @model_validator(mode="after")
    def _distinct_names(self) -> ProfileSpec:
        names = [self.scheduler_name, *self.aliases]
        if len(set(names)) != len(names):
            raise ValueError("aliases must differ from schedulerName and from each other")
        return self

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """Every schedulerName this profile claims: its own first, then its aliases."""
        return (self.scheduler_name, *self.aliases)

    def plugins_at(self, point: str, defaults: PluginSet | None = None) -> list[PluginRef]:
        given = self.plugins.point(point)
        if given is not None:
            return given
        if defaults is not None:
            return defaults.point(point) or []
        return []

    def args_for(self, name: str) -> dict[str, Any]:
        for cfg in self.plugin_config:
            if cfg.name == name:
                return cfg.args
        return {}


def _snake(point: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in point)


# -- registry entries -----------------------------------------------------------------------------
PluginFactory = Callable[[Any, Handle], Plugin]


@dataclass(frozen=True)
class PluginEntry:
    """How to build one plugin: its args model (None: no args) and factory ``new(args, handle)``."""

    name: str
    factory: PluginFactory
    args_model: type[BaseModel] | None = None
    plugin_class: type | None = None
    source: str = "builtin"
    #: what the plugin declares to the core (fields it evaluates, what its PreFilter and Filter read)
    contract: Contract = NO_CONTRACT
    #: the store classes (``interfaces.Store``) it reads, made by the scheduler when it starts so the
    #: objects watched before any profile exists are kept
    stores: tuple[type[Store], ...] = ()

    def points(self) -> set[str]:
        """Extension points the plugin class implements (all, if the class is unknown): those of
        the table EXTENSION_POINTS whose Protocol the class has the methods of."""
        if self.plugin_class is None:
            return set(POINTS)
        return {p.key for p in EXTENSION_POINTS if p.implemented_by(self.plugin_class)}

    def parse_args(self, args: Mapping[str, Any]) -> Any:
        if self.args_model is None:
            if args:
                raise ValueError(f"plugin {self.name} takes no args")
            return None
        return self.args_model.model_validate(dict(args))


# -- validation -----------------------------------------------------------------------------------
class ProfileError(ValueError):
    """An invalid profile. ``errors`` are (field path, message) pairs; str() lists them all."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


def _loc(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


@dataclass(frozen=True)
class ValidatedProfile:
    spec: ProfileSpec
    points: dict[str, list[PluginRef]]
    args: dict[str, Any]


def _check_points(
    spec: ProfileSpec,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None,
    errors: list[tuple[str, str]],
) -> tuple[dict[str, list[PluginRef]], set[str]]:
    """Each point's plugins (given or default), checked against the registry and the
    extension-point table; the names of the plugins used. Appends to ``errors``."""
    points: dict[str, list[PluginRef]] = {}
    used: set[str] = set()
    for point in POINTS:
        refs = spec.plugins_at(point, defaults)
        source = "spec.plugins" if spec.plugins.point(point) is not None else "default plugins"
        seen: set[str] = set()
        for i, ref in enumerate(refs):
            where = f"{source}.{point}[{i}]"
            entry = registry.get(ref.name)
            if entry is None:
                known = ", ".join(sorted(registry))
                errors.append((f"{where}.name", f'unknown plugin "{ref.name}" (known: {known})'))
                continue
            if ref.name in seen:
                errors.append((f"{where}.name", f'plugin "{ref.name}" is listed twice at {point}'))
                continue
            seen.add(ref.name)
            if point not in entry.points():
                errors.append((f"{where}.name", f'plugin "{ref.name}" does not implement {point}'))
                continue
            if ref.weight is not None and point != "score":
                errors.append((f"{where}.weight", "weight is only allowed at score"))
            used.add(ref.name)
        points[point] = refs
    if len(points["queueSort"]) != 1:
        errors.append(
            ("spec.plugins.queueSort", f"exactly one plugin required, got {len(points['queueSort'])}")
        )
    if not points["bind"]:
        errors.append(("spec.plugins.bind", "at least one plugin required"))
    _check_companions(points, registry, errors)
    return points, used


#: a plugin class attribute naming the point whose state another point of it reads:
#: ``needs_pre_filter = True`` (its Filter reads what its PreFilter wrote), ``needs_pre_score``
_COMPANIONS = (("filter", "preFilter", "needs_pre_filter"), ("score", "preScore", "needs_pre_score"))


def _check_companions(
    points: Mapping[str, list[PluginRef]], registry: Mapping[str, PluginEntry], errors: list[tuple[str, str]]
) -> None:
    """A plugin whose Filter (Score) reads its PreFilter (PreScore) state must be listed at both:
    kube-scheduler fails every such pod with an Error at run time; shoal refuses the profile."""
    for point, companion, flag in _COMPANIONS:
        listed = {r.name for r in points[companion]}
        for i, ref in enumerate(points[point]):
            entry = registry.get(ref.name)
            cls = entry.plugin_class if entry is not None else None
            if cls is not None and getattr(cls, flag, False) and ref.name not in listed:
                errors.append(
                    (
                        f"spec.plugins.{point}[{i}].name",
                        f'plugin "{ref.name}" at {point} needs its {companion}: list it at {companion} too',
                    )
                )


def _parse_plugin_config(
    spec: ProfileSpec, registry: Mapping[str, PluginEntry], errors: list[tuple[str, str]]
) -> dict[str, Any]:
    """Each ``pluginConfig`` entry's args, parsed by its plugin's args model. Appends to ``errors``."""
    args: dict[str, Any] = {}
    configured: set[str] = set()
    for i, cfg in enumerate(spec.plugin_config):
        where = f"spec.pluginConfig[{i}]"
        if cfg.name in configured:
            errors.append((f"{where}.name", f'plugin "{cfg.name}" is configured twice'))
            continue
        configured.add(cfg.name)
        entry = registry.get(cfg.name)
        if entry is None:
            errors.append((f"{where}.name", f'unknown plugin "{cfg.name}"'))
            continue
        try:
            args[cfg.name] = entry.parse_args(cfg.args)
        except ValidationError as exc:
            for e in exc.errors(include_url=False):
                # a validator's own message, without pydantic's "Value error, " in front
                errors.append(
                    (_loc(f"{where}.args", tuple(e["loc"])), e["msg"].removeprefix("Value error, "))
                )
        except ValueError as exc:
            errors.append((f"{where}.args", str(exc)))
    return args


def validate_profile(
    data: Mapping[str, Any] | ProfileSpec,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None = None,
) -> ValidatedProfile:
    """Check a profile spec against the schema and the registry; errors name the field."""
    if isinstance(data, ProfileSpec):
        spec = data
    else:
        try:
            spec = ProfileSpec.model_validate(dict(data))
        except ValidationError as exc:
            raise ProfileError(
                [(_loc("spec", tuple(e["loc"])), e["msg"]) for e in exc.errors(include_url=False)]
            ) from None
    errors: list[tuple[str, str]] = []
    points, used = _check_points(spec, registry, defaults, errors)
    args = _parse_plugin_config(spec, registry, errors)
    if errors:
        raise ProfileError(errors)
    for name in used - set(args):
        args[name] = registry[name].parse_args({})
    return ValidatedProfile(spec, points, args)


class ArgsModel(BaseModel):
    """Base for plugin args: camelCase keys in YAML, unknown keys refused, defaults everywhere."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)
