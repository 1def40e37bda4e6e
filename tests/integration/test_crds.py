"""The generated CRDs are accepted by the real API server and served as declared."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.testing.controlplane import ControlPlane


async def test_crds_served_with_names_and_schema(api: client.ApiClient, crds: ControlPlane) -> None:
    custom: Any = client.CustomObjectsApi(api)
    resources = await custom.get_api_resources("shoal.dev", "v1alpha1")
    sp = next(r for r in resources.resources if r.name == "schedulingprofiles")
    assert sp.kind == "SchedulingProfile"
    assert sp.short_names == ["sp"]
    assert sp.namespaced is False
    assert any(r.name == "schedulingprofiles/status" for r in resources.resources)
    pg_resources = await custom.get_api_resources("scheduling.x-k8s.io", "v1alpha1")
    pg = next(r for r in pg_resources.resources if r.name == "podgroups")
    assert pg.kind == "PodGroup"
    assert pg.namespaced is True
    ext: Any = client.ApiextensionsV1Api(api)
    crd = await ext.read_custom_resource_definition("schedulingprofiles.shoal.dev")
    schema = crd.spec.versions[0].schema.open_apiv3_schema
    spec = schema.properties["spec"]
    assert set(spec.properties) >= {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}
    assert spec.properties["plugins"].x_kubernetes_validations
    assert [c.name for c in crd.spec.versions[0].additional_printer_columns] == [
        "Scheduler",
        "Ready",
        "Reason",
        "Age",
    ]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        pytest.param(
            {"schedulerName": "x", "plugins": {"queueSort": []}},
            "queueSort must list exactly one",
            id="cel-queuesort",
        ),
        pytest.param(
            {"schedulerName": "x", "plugins": {"bind": []}}, "bind must list at least one", id="cel-bind"
        ),
        pytest.param(
            {"schedulerName": "x", "plugins": {"filter": [{"name": "A", "weight": 2}]}},
            "weight is only allowed",
            id="cel-weight",
        ),
        pytest.param(
            {"schedulerName": "x", "plugins": {"score": [{"name": "A", "weight": 500}]}},
            "less than or equal to 100",
            id="schema-weight",
        ),
        pytest.param(
            {"schedulerName": "x", "plugins": {"filter": [{"name": "A"}, {"name": "A"}]}},
            "Duplicate value",
            id="list-map-duplicate",
        ),
        pytest.param({"schedulerName": "Not_Valid"}, "schedulerName", id="schema-pattern"),
        pytest.param({"plugins": {}}, "schedulerName: Required", id="schema-required"),
    ],
)
async def test_admission_refuses_invalid_profiles(
    crds: ControlPlane, api: client.ApiClient, spec: dict[str, Any], words: str
) -> None:
    custom: Any = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "bad-profile"},
        "spec": spec,
    }
    with pytest.raises(client.ApiException) as info:
        await custom.create_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles", body)
    assert info.value.status == 422
    assert words in str(info.value.body)


async def test_podgroup_as_kubeflow_trainer_writes_it_is_accepted(
    crds: ControlPlane, api: client.ApiClient, namespace: str
) -> None:
    """Trainer sends ``scheduleTimeoutSeconds: 0`` ("the default"); the CRD used to refuse it.
    ``kubectl get pg`` shows scheduler-plugins' columns."""
    custom: Any = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "trainer-job", "namespace": namespace},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 0, "minResources": {"cpu": "2", "memory": "1Gi"}},
    }
    made = await custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", body
    )
    assert made["spec"]["scheduleTimeoutSeconds"] == 0
    bad = {**body, "metadata": {"name": "zero", "namespace": namespace}, "spec": {"minMember": 0}}
    with pytest.raises(client.ApiException) as info:
        await custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", bad
        )
    assert info.value.status == 422 and "minMember" in str(info.value.body)
    ext: Any = client.ApiextensionsV1Api(api)
    crd = await ext.read_custom_resource_definition("podgroups.scheduling.x-k8s.io")
    columns = [c.name for c in crd.spec.versions[0].additional_printer_columns]
    assert columns == ["Phase", "MinMember", "Running", "Succeeded", "Failed", "Age"]
