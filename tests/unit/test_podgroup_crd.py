"""shoal's PodGroup CRD says what scheduler-plugins' says (tests/data/scheduler-plugins/).

Kubeflow Trainer, KubeRay and kubectl users write PodGroups for scheduler-plugins; any field, type,
bound, printer column or description that differs is drift, reported field by field.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.core.state.objects import PodGroupInfo
from shoal.kube.crds import PODGROUP_PHASES, podgroup_crd, profile_crd
from tests.unit.crdfacts import crd_facts

UPSTREAM = Path(__file__).resolve().parents[1] / "data" / "scheduler-plugins" / "podgroup-crd.yaml"


def _upstream() -> dict[str, Any]:
    facts: dict[str, Any] = yaml.safe_load(UPSTREAM.read_text())
    return facts


def _differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    out = [
        f"{k}: shoal {ours[k]!r}, upstream {theirs[k]!r}"
        for k in ours
        if k != "versions" and ours[k] != theirs[k]
    ]
    for name, want in theirs["versions"].items():
        have = ours["versions"].get(name)
        if have is None:
            out.append(f"version {name} missing")
            continue
        for key in ("served", "storage", "subresources", "columns"):
            if have[key] != want[key]:
                out.append(f"{name} {key}: shoal {have[key]!r}, upstream {want[key]!r}")
        for path in sorted(set(have["fields"]) | set(want["fields"])):
            a, b = have["fields"].get(path), want["fields"].get(path)
            if a != b:
                out.append(f"{name} field {path}: shoal {a!r}, upstream {b!r}")
    return out


def test_shoal_podgroup_crd_matches_scheduler_plugins() -> None:
    assert _differences(crd_facts(podgroup_crd()), _upstream()) == []


def test_drift_is_reported_per_field() -> None:
    crd = podgroup_crd()
    drifted = copy.deepcopy(crd)
    spec = drifted["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["scheduleTimeoutSeconds"]["minimum"] = 1
    status = drifted["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["properties"]["scheduled"] = {"type": "integer", "format": "int64"}
    problems = _differences(crd_facts(drifted), _upstream())
    assert len(problems) == 2
    assert problems[0].startswith("v1alpha1 field .spec.scheduleTimeoutSeconds: shoal {")
    assert (
        problems[1]
        == "v1alpha1 field .status.scheduled: shoal {'type': 'integer', 'format': 'int64'}, upstream None"
    )


def test_removed_fields_and_phases_are_gone() -> None:
    schema = podgroup_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "scheduled" not in schema["properties"]["status"]["properties"]
    assert set(PODGROUP_PHASES) == {"Pending", "Scheduling", "Running", "Finished", "Failed", "Unknown"}


@pytest.mark.parametrize(("timeout", "seconds"), [(None, None), (0, None), (30, 30)])
def test_schedule_timeout_zero_means_the_default(timeout: int | None, seconds: int | None) -> None:
    """Kubeflow Trainer sends ``scheduleTimeoutSeconds: 0`` for "the default"."""
    spec: dict[str, Any] = {"minMember": 2}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    group = PodGroupInfo.from_dict({"metadata": {"name": "g", "namespace": "ns", "uid": "u"}, "spec": spec})
    assert group.schedule_timeout_seconds == seconds


def test_only_shoals_own_kind_is_in_the_shoal_category() -> None:
    """`kubectl get shoal` lists SchedulingProfiles; PodGroup keeps upstream's names (no category)."""
    assert profile_crd()["spec"]["names"]["categories"] == ["shoal"]
    assert "categories" not in podgroup_crd()["spec"]["names"]
    assert "categories" not in _upstream()["names"]
    drifted = podgroup_crd()
    drifted["spec"]["names"]["categories"] = ["shoal"]
    (problem,) = _differences(crd_facts(drifted), _upstream())
    assert problem.startswith("names: shoal {") and "'categories': ['shoal']" in problem
