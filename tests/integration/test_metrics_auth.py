"""The secure metrics port against the real API server, and the chart's monitoring objects.

shoal runs as the chart's ServiceAccount with the chart's RBAC (rendered by helm, applied here), so
its TokenReviews and SubjectAccessReviews go through the grants the chart gives. Scrapers present
ServiceAccount tokens (TokenRequest): none → 401, a ServiceAccount not bound to
``<fullname>-metrics-reader`` → 403, one bound by the chart's ``metrics.reader.subjects`` → 200;
the probes' paths answer without a token. The ServiceMonitor and PrometheusRule the chart renders
are created, with strict field validation, against CRDs shaped like prometheus-operator's (the
fields shoal uses), so a misspelt or misplaced field fails here rather than in a user's cluster.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from shoal.kube.rest import RawClient
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane
from shoal.testing.objects import make_node, make_pod, make_profile
from tests.integration.conftest import wait_ready

pytestmark = pytest.mark.slow

CHART = Path(__file__).resolve().parents[2] / "helm" / "shoal"
MONITORING = CHART / "files" / "monitoring"
RELEASE = "mt"
FULLNAME = "mt-shoal"

#: where each kind is created (its REST collection; namespaced ones take the namespace)
PLURALS = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Service": ("/api/v1", "services", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "CustomResourceDefinition": ("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ServiceMonitor": ("/apis/monitoring.coreos.com/v1", "servicemonitors", True),
    "PrometheusRule": ("/apis/monitoring.coreos.com/v1", "prometheusrules", True),
}


def helm(*args: str) -> str:
    binary = Binaries.locate().helm
    if not binary.exists():
        pytest.fail(f"{binary} missing: run `make cluster-bin`")
    out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def render(namespace: str, *flags: str) -> list[dict[str, Any]]:
    out = helm("template", RELEASE, str(CHART), "-n", namespace, "--set", "crds.enabled=false", *flags)
    return [d for d in yaml.safe_load_all(out) if d]


async def post(raw: RawClient, doc: dict[str, Any], namespace: str) -> tuple[int, Any]:
    """Create ``doc`` with strict field validation (an unknown field is an error, not dropped)."""
    base, plural, namespaced = PLURALS[doc["kind"]]
    where = f"/namespaces/{namespace}" if namespaced else ""
    return await raw.request("POST", f"{base}{where}/{plural}?fieldValidation=Strict", doc)


async def apply(raw: RawClient, docs: list[dict[str, Any]], namespace: str) -> None:
    for doc in docs:
        status, body = await post(raw, doc, namespace)
        assert status in (200, 201, 409), (doc["kind"], doc["metadata"]["name"], body)


async def token_of(api: client.ApiClient, namespace: str, account: str) -> str:
    core: Any = client.CoreV1Api(api)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    return str((await core.create_namespaced_service_account_token(account, namespace, request)).status.token)


async def scrape(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{port}{path}", headers=headers, ssl=False) as resp,
    ):
        return resp.status, await resp.text()


@pytest.fixture
async def release_ns(api: client.ApiClient) -> AsyncIterator[str]:
    """A namespace for the release; the chart's cluster-scoped objects are deleted with it."""
    name = f"mt-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    rbac: Any = client.RbacAuthorizationV1Api(api)
    for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
        for suffix in ("", "-metrics-reader"):
            try:
                await delete(FULLNAME + suffix)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    await client.CoreV1Api(api).delete_namespace(name)


def sa_kubeconfig(cp: ControlPlane, token: str, path: Path) -> Path:
    doc = json.loads(cp.kubeconfig.read_text())
    doc["users"] = [{"name": "admin", "user": {"token": token}}]
    path.write_text(json.dumps(doc))
    return path


async def test_metrics_need_a_token_allowed_to_get_them(
    clean: client.ApiClient, control_plane: ControlPlane, release_ns: str, tmp_path: Path
) -> None:
    api, ns = clean, release_ns
    raw = RawClient(api)
    reader = [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}]
    docs = render(
        ns, "--set-json", "profiles=[]", "--set-json", f"metrics.reader.subjects={json.dumps(reader)}"
    )
    kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"}
    await apply(raw, [d for d in docs if d["kind"] in kinds], ns)
    for account in ("scraper", "nobody"):
        await apply(raw, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}], ns)
    kubeconfig = sa_kubeconfig(control_plane, await token_of(api, ns, FULLNAME), tmp_path / "kubeconfig")
    await create(api, make_profile("gpu-scheduler", DEFAULT_PROFILE_SPEC))
    await create(api, make_node("metrics-node", gpus=8, gpu_memory_free_gb=80))
    scraper, nobody = await token_of(api, ns, "scraper"), await token_of(api, ns, "nobody")
    op = OperatorProcess(
        kubeconfig, tmp_path / "op.log", identity="metrics-auth", lease_name="shoal-scheduler",
        extra=["--lease-namespace", ns, "--logging-format", "json"],
    )  # fmt: skip
    with op:
        wait_ready(op)
        port = op.secure_port
        assert (await scrape(port, "/metrics"))[0] == 401
        assert (await scrape(port, "/metrics", "not-a-token"))[0] == 401
        status, text = await scrape(port, "/metrics", nobody)
        assert status == 403, text
        assert f'User "system:serviceaccount:{ns}:nobody" cannot get path "/metrics"' in text
        status, text = await scrape(port, "/metrics", scraper)
        assert status == 200, text
        assert "shoal_leader" in text and "process_resident_memory_bytes" in text
        for path in ("/healthz", "/readyz", "/livez"):  # the kubelet's probes carry no token
            assert await scrape(port, path) == (200, "ok")
        with pytest.raises(aiohttp.ClientError):  # HTTPS only on the secure port
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/healthz") as r:
                await r.read()

        # a bound pod is observed in the SLI, labelled with its attempts, as kube-scheduler's
        await create(api, make_pod("metrics-pod", gpus=1, gpu_memory_gb=10))

        async def sli() -> str | None:
            status, text = await scrape(port, "/metrics", scraper)
            line = 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1.0'
            return text if status == 200 and line in text else None

        await wait_for(sli, 30, what="the pod in the scheduling SLI")
        assert "forbidden" not in op.tail(200).lower(), op.tail(200)
    # --logging-format=json: the log is JSON lines, klog-shaped
    started = [
        e for e in map(json_line, op.log.read_text().splitlines()) if "shoal started as" in e.get("msg", "")
    ]
    assert len(started) == 1 and started[0]["v"] == 0 and started[0]["logger"] == "shoal.operator", started


def json_line(line: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def crd(kind: str, plural: str, spec_schema: dict[str, Any]) -> dict[str, Any]:
    """A CRD of prometheus-operator's group, kind and plural, with the schema of the fields shoal
    renders (its real schema has many more, all optional)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List", "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {"spec": spec_schema},
                        }
                    },
                }
            ],
        },
    }


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


STR: dict[str, Any] = {"type": "string"}
#: prometheus-operator's Duration
DURATION = "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
LABELS: dict[str, Any] = {"type": "object", "additionalProperties": STR}
SECRET_KEY = _obj(name=STR, key=STR)
SERVICE_MONITOR = crd(
    "ServiceMonitor",
    "servicemonitors",
    {
        "type": "object",
        "required": ["selector", "endpoints"],
        "properties": {
            "jobLabel": STR,
            "namespaceSelector": _obj(any={"type": "boolean"}, matchNames={"type": "array", "items": STR}),
            "selector": _obj(matchLabels=LABELS),
            "endpoints": {
                "type": "array",
                "items": _obj(
                    port=STR,
                    path=STR,
                    interval={"type": "string", "pattern": DURATION},
                    scheme={"type": "string", "enum": ["http", "https"]},
                    bearerTokenFile=STR,
                    tlsConfig=_obj(
                        insecureSkipVerify={"type": "boolean"},
                        serverName=STR,
                        caFile=STR,
                        ca=_obj(secret=SECRET_KEY, configMap=SECRET_KEY),
                    ),
                ),
            },
        },
    },
)
PROMETHEUS_RULE = crd(
    "PrometheusRule",
    "prometheusrules",
    _obj(
        groups={
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "rules"],
                "properties": {
                    "name": STR,
                    "interval": STR,
                    "rules": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["expr"],
                            "properties": {
                                "alert": STR,
                                "record": STR,
                                "expr": STR,
                                "for": STR,
                                "labels": LABELS,
                                "annotations": LABELS,
                            },
                        },
                    },
                },
            },
        }
    ),
)


async def test_the_charts_monitoring_objects_are_accepted(api: client.ApiClient, release_ns: str) -> None:
    ns = release_ns
    flags = [
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true",
    ]
    lint = helm("lint", "--strict", str(CHART), *flags)
    assert "0 chart(s) failed" in lint and "[WARNING]" not in lint
    docs = render(ns, *flags)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}

    monitor = by_kind[("ServiceMonitor", FULLNAME)]
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    service = by_kind[("Service", f"{FULLNAME}-metrics")]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    deploy = by_kind[("Deployment", FULLNAME)]["spec"]["template"]["spec"]["containers"][0]
    assert deploy["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert deploy["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"

    dashboard = by_kind[("ConfigMap", f"{FULLNAME}-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["shoal.json"]) == json.loads(
        (MONITORING / "dashboard.json").read_text()
    )
    rule = by_kind[("PrometheusRule", FULLNAME)]
    selector = f'job="{FULLNAME}-metrics",namespace="{ns}"'
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert len(exprs) == 6 and all(selector in e for e in exprs), exprs

    raw = RawClient(api)
    for definition in (SERVICE_MONITOR, PROMETHEUS_RULE):
        await apply(raw, [definition], ns)

    # Each object is posted until it is created once (a CRD can be Established a moment before its
    # resource is served); one created is not posted again, where it would answer 409.
    pending = {"ServiceMonitor": monitor, "PrometheusRule": rule}
    last: dict[str, int] = {}

    async def accepted() -> bool:
        for kind, doc in list(pending.items()):
            last[kind] = (await post(raw, doc, ns))[0]
            if last[kind] == 201:
                del pending[kind]
        return not pending

    try:
        await wait_for(accepted, 30, what="the ServiceMonitor and PrometheusRule created")
    except TimeoutError:
        pytest.fail(f"not created in 30 s; the last answers: {last}")
    # the CRDs validate: a misplaced field is refused (so the acceptance above means something)
    wrong = {**monitor, "metadata": {"name": "wrong"}, "spec": {**monitor["spec"], "tlsConfig": {}}}
    status, body = await post(raw, wrong, ns)
    assert status == 400 and 'unknown field "spec.tlsConfig"' in body["message"], body
    await apply(raw, [dashboard], ns)
