"""CustomResourceDefinitions generated from the pydantic models (``shoal crds``).

Why generated: the profile spec the operator validates and the schema the API server enforces must
never drift; ``crds/`` and the Helm chart hold this module's output and a test fails when stale.

pydantic's JSON Schema is not a structural CRD schema, so it is rewritten: ``$defs``/``$ref`` are
inlined, ``Optional`` becomes ``nullable``, free-form dicts keep unknown fields, quantities become
``x-kubernetes-int-or-string``, and lists keyed by plugin name become ``x-kubernetes-list-type:
map`` (names unique per extension point, enforced by the API server). Cross-field rules are CEL
``x-kubernetes-validations``.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from shoal.core.framework.interfaces import POINTS
from shoal.core.framework.profile import ProfileSpec
from shoal.kube.wire import (
    PODGROUP_GROUP,
    PODGROUP_KIND,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    PROFILE_GROUP,
    PROFILE_KIND,
    PROFILE_PLURAL,
    PROFILE_VERSION,
)

JSON = dict[str, Any]
#: ``kubectl get shoal`` lists shoal's own kinds. Only SchedulingProfile is in it: PodGroup is
#: scheduler-plugins' API, whose CRD has no category, and shoal's copy says what upstream says.
CATEGORY = "shoal"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Condition(_Model):
    """A standard metav1.Condition."""

    type: str = Field(max_length=316)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    observed_generation: int | None = Field(default=None, ge=0)


class ProfileStatus(_Model):
    """``status`` of a SchedulingProfile, written by the leader."""

    observed_generation: int | None = Field(default=None, ge=0)
    conditions: list[Condition] = Field(default_factory=list, max_length=8)
    plugins: dict[str, list[str]] | None = Field(
        default=None, description="The plugins in effect per extension point (after defaults)."
    )


#: scheduler-plugins' PodGroup phases (``apis/scheduling/v1alpha1``); ``Unknown`` is defined there but
#: its controller never writes it, nor does shoal. The CRD leaves ``phase`` a free string, as upstream.
PODGROUP_PHASES = ("Pending", "Scheduling", "Running", "Finished", "Failed", "Unknown")

_INT32: JsonDict = {"format": "int32"}


class PodGroupSpec(_Model):
    """scheduler-plugins' PodGroupSpec (descriptions are its API documentation)."""

    min_member: int | None = Field(
        default=None,
        ge=1,
        description="MinMember defines the minimal number of members/tasks to run the pod group;\n"
        "if there's not enough resources to start all tasks, the scheduler\nwill not start any.\n"
        "The minimum is 1",
        json_schema_extra=_INT32,
    )
    min_resources: dict[str, str] | None = Field(
        default=None,
        description="MinResources defines the minimal resource of members/tasks to run the pod group;\n"
        "if there's not enough resources to start all tasks, the scheduler\nwill not start any.",
    )
    #: 0 (Kubeflow Trainer's "use the default") and absent both mean Coscheduling's default
    schedule_timeout_seconds: int | None = Field(
        default=None,
        description="ScheduleTimeoutSeconds defines the maximal time of members/tasks to wait before "
        "run the pod group;",
        json_schema_extra=_INT32,
    )


class PodGroupStatus(_Model):
    """scheduler-plugins' PodGroupStatus (no ``scheduled`` count: scheduler-plugins removed it)."""

    phase: str | None = Field(default=None, description="Current phase of PodGroup.")
    occupied_by: str | None = Field(
        default=None,
        description="OccupiedBy marks the workload (e.g., deployment, statefulset) UID that occupy the "
        "podgroup.\nIt is empty if not initialized.",
    )
    running: int | None = Field(
        default=None, description="The number of actively running pods.", json_schema_extra=_INT32
    )
    succeeded: int | None = Field(
        default=None,
        description="The number of pods which reached phase Succeeded.",
        json_schema_extra=_INT32,
    )
    failed: int | None = Field(
        default=None, description="The number of pods which reached phase Failed.", json_schema_extra=_INT32
    )
    schedule_start_time: str | None = Field(
        default=None,
        description="ScheduleStartTime of the group",
        json_schema_extra={"format": "date-time"},
    )


# -- pydantic JSON Schema -> structural schema ------------------------------------------------------
_DROP = {"title", "discriminator"}


def _structural(node: Any, defs: dict[str, Any], path: tuple[str, ...] = ()) -> Any:
    if isinstance(node, list):
        return [_structural(n, defs, path) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs, path)
    node = dict(node)
    any_of = node.pop("anyOf", None)
    if any_of is not None:
        kinds = [a for a in any_of if a.get("type") != "null"]
        nullable = len(kinds) != len(any_of)
        if len(kinds) == 1:
            inner = _structural(kinds[0], defs, path)
            node = {**inner, **{k: v for k, v in node.items() if k not in ("default",) or v is not None}}
            if nullable:
                node["nullable"] = True
        else:
            raise ValueError(f"cannot express anyOf {any_of} at {'.'.join(path)} in a structural schema")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "default" and value is None:
            continue
        if key == "additionalProperties" and value is False:
            continue  # structural schemas forbid it; unknown fields are pruned (and refused by kubectl)
        if key == "exclusiveMinimum" and not isinstance(value, bool):
            out["minimum"] = value
            out["exclusiveMinimum"] = True
            continue
        if key == "exclusiveMaximum" and not isinstance(value, bool):
            out["maximum"] = value
            out["exclusiveMaximum"] = True
            continue
        if key == "properties":
            out[key] = {k: _structural(v, defs, (*path, k)) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _structural(value, defs, (*path, key))
        else:
            out[key] = value
    if out.get("type") == "object" and out.get("additionalProperties") is True:
        del out["additionalProperties"]
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "integer" and "format" not in out:
        out["format"] = "int32" if out.get("maximum", 0) <= 2**31 - 1 and "maximum" in out else "int64"
    return out


def structural_schema(model: type[BaseModel]) -> JSON:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    out: JSON = _structural(raw, defs)
    return out


def _plugin_lists_as_maps(plugins: JSON) -> None:
    for schema in plugins["properties"].values():
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = ["name"]


def profile_crd() -> JSON:
    spec = structural_schema(ProfileSpec)
    _plugin_lists_as_maps(spec["properties"]["plugins"])
    spec["properties"]["pluginConfig"]["x-kubernetes-list-type"] = "map"
    spec["properties"]["pluginConfig"]["x-kubernetes-list-map-keys"] = ["name"]
    not_score = [p for p in POINTS if p != "score"]
    spec["properties"]["plugins"]["x-kubernetes-validations"] = [
        {
            "rule": "!has(self.queueSort) || size(self.queueSort) == 1",
            "message": "queueSort must list exactly one plugin",
        },
        {"rule": "!has(self.bind) || size(self.bind) >= 1", "message": "bind must list at least one plugin"},
        {
            "rule": " && ".join(f"(!has(self.{p}) || self.{p}.all(x, !has(x.weight)))" for p in not_score),
            "message": "weight is only allowed at score",
        },
    ]
    spec["properties"]["aliases"]["x-kubernetes-list-type"] = "set"
    spec["x-kubernetes-validations"] = [
        {"rule": "self.schedulerName == oldSelf.schedulerName", "message": "schedulerName is immutable"},
        {
            "rule": "!has(self.aliases) || !(self.schedulerName in self.aliases)",
            "message": "aliases must differ from schedulerName",
        },
    ]
    status = structural_schema(ProfileStatus)
    status["properties"]["conditions"]["x-kubernetes-list-type"] = "map"
    status["properties"]["conditions"]["x-kubernetes-list-map-keys"] = ["type"]
    ready = '.status.conditions[?(@.type=="Ready")]'
    return _crd(
        group=PROFILE_GROUP,
        kind=PROFILE_KIND,
        plural=PROFILE_PLURAL,
        version=PROFILE_VERSION,
        scope="Cluster",
        short=["sp"],
        categories=[CATEGORY],
        spec=spec,
        status=status,
        required=["spec"],
        columns=[
            {"name": "Scheduler", "type": "string", "jsonPath": ".spec.schedulerName"},
            {"name": "Ready", "type": "string", "jsonPath": f"{ready}.status"},
            {"name": "Reason", "type": "string", "jsonPath": f"{ready}.reason", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        description="Which plugins run at each extension point for one schedulerName, with weights and args.",
    )


def podgroup_crd() -> JSON:
    spec = structural_schema(PodGroupSpec)
    spec["properties"]["minResources"]["additionalProperties"] = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    status = structural_schema(PodGroupStatus)
    spec["description"] = "Specification of the desired behavior of the pod group."
    status["description"] = (
        "Status represents the current information about a pod group.\nThis data may not be up to date."
    )
    return _crd(
        group=PODGROUP_GROUP,
        kind=PODGROUP_KIND,
        plural=PODGROUP_PLURAL,
        version=PODGROUP_VERSION,
        scope="Namespaced",
        short=["pg", "pgs"],
        spec=spec,
        status=status,
        required=None,
        columns=[_column(*c) for c in _PODGROUP_COLUMNS],
        description="PodGroup is a collection of Pod; used for batch workload.",
    )


#: scheduler-plugins' printer columns: name, type, JSONPath, description
_PODGROUP_COLUMNS = (
    ("Phase", "string", ".status.phase", "Current phase of PodGroup."),
    (
        "MinMember",
        "integer",
        ".spec.minMember",
        "MinMember defines the minimal number of members/tasks to run the pod group.",
    ),
    ("Running", "integer", ".status.running", "The number of actively running pods."),
    ("Succeeded", "integer", ".status.succeeded", "The number of pods which reached phase Succeeded."),
    ("Failed", "integer", ".status.failed", "The number of pods which reached phase Failed."),
    ("Age", "date", ".metadata.creationTimestamp", "Age is the time PodGroup was created."),
)


def _column(name: str, kind: str, path: str, description: str) -> JSON:
    return {"name": name, "type": kind, "jsonPath": path, "description": description}


def _crd(
    *,
    group: str,
    kind: str,
    plural: str,
    version: str,
    scope: str,
    short: list[str],
    categories: list[str] | None = None,
    spec: JSON,
    status: JSON,
    required: list[str] | None,
    columns: list[JSON],
    description: str,
) -> JSON:
    if kind != PODGROUP_KIND:
        spec.pop("description", None)
        status.pop("description", None)
    schema: JSON = {
        "type": "object",
        "description": description,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }
    if required:
        schema["required"] = required
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                **({"categories": categories} if categories else {}),
            },
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def all_crds() -> dict[str, JSON]:
    """File name -> CRD, as written into crds/ and the Helm chart."""
    return {
        "schedulingprofiles.shoal.dev.yaml": profile_crd(),
        "podgroups.scheduling.x-k8s.io.yaml": podgroup_crd(),
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line descriptions as literal blocks (``|-``), as controller-gen writes them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_crd(crd: JSON) -> str:
    """A CRD as the YAML written into crds/ and the chart."""
    return yaml.dump(crd, Dumper=_Dumper, sort_keys=False, width=100)
