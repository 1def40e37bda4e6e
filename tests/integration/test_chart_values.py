"""The chart's operational values (docs/chart.md): the PodDisruptionBudget, extraEnv / extraVolumes /
extraVolumeMounts and the third-party plugin recipe run end to end, the `helm test` hook and its
check against live servers, image.digest, kubeVersion, and the schema of the new values."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod
from tests.integration.conftest import wait_ready
from tests.integration.test_helm import CHART, NS, RELEASE, helm, helm_env, one, template

pytestmark = pytest.mark.slow
__all__ = ["helm_env"]  # the fixture, shared with test_helm.py

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "examples" / "chart-plugin-values.yaml"
PLUGIN = ROOT / "tests" / "unit" / "fixtures" / "extra_plugin.py"
DIGEST = "sha256:" + "ab" * 32


def kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def hook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = [d for d in kinds(docs, "Pod") if d["metadata"]["annotations"].get("helm.sh/hook") == "test"]
    return pod


def test_budget_only_with_more_than_one_replica(helm_env: dict[str, str]) -> None:
    docs = template(helm_env)
    pdb = one(docs, "PodDisruptionBudget")
    deploy = one(docs, "Deployment")
    assert pdb["metadata"]["name"] == RELEASE
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": deploy["spec"]["selector"],
    }
    assert not kinds(template(helm_env, "--set", "replicaCount=1"), "PodDisruptionBudget")
    assert not kinds(template(helm_env, "--set", "podDisruptionBudget.enabled=false"), "PodDisruptionBudget")
    three = template(helm_env, "--set", "replicaCount=3,podDisruptionBudget.minAvailable=2")
    assert one(three, "Deployment")["spec"]["replicas"] == 3
    assert one(three, "PodDisruptionBudget")["spec"] == {  # minAvailable replaces maxUnavailable
        "minAvailable": 2,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": deploy["spec"]["selector"],
    }
    zero = one(template(helm_env, "--set", "podDisruptionBudget.minAvailable=0"), "PodDisruptionBudget")
    assert zero["spec"]["minAvailable"] == 0  # 0 is a value, not "unset"
    percent = one(
        template(
            helm_env,
            "--set-string",
            "podDisruptionBudget.maxUnavailable=50%",
            "--set",
            "podDisruptionBudget.unhealthyPodEvictionPolicy=IfHealthyBudget",
        ),
        "PodDisruptionBudget",
    )
    assert (percent["spec"]["maxUnavailable"], percent["spec"]["unhealthyPodEvictionPolicy"]) == (
        "50%",
        "IfHealthyBudget",
    )


def test_extra_env_volumes_and_mounts_render_into_the_deployment(helm_env: dict[str, str]) -> None:
    pod = one(template(helm_env, "-f", str(RECIPE)), "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "PYTHONPATH", "value": "/opt/shoal-plugins"},
        {"name": "SHOAL_PLUGINS", "value": "only_even_nodes"},
    ]
    assert container["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "profiles", "mountPath": "/etc/shoal", "readOnly": True},
        {"name": "plugins", "mountPath": "/opt/shoal-plugins", "readOnly": True},
    ]
    assert pod["volumes"][-1] == {"name": "plugins", "configMap": {"name": "shoal-plugins"}}
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "profiles", "plugins"]
    # valueFrom passes through as written
    docs = template(
        helm_env,
        "--set-json",
        'extraEnv=[{"name":"NODE","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]',
    )
    env = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def test_docs_show_the_recipe_the_tests_run() -> None:
    assert RECIPE.read_text() in (ROOT / "docs" / "chart.md").read_text()


def test_digest_replaces_the_tag(helm_env: dict[str, str]) -> None:
    def images(*flags: str) -> set[str]:
        docs = template(helm_env, *flags)
        pods = [one(docs, "Deployment")["spec"]["template"]["spec"], hook(docs)["spec"]]
        return {c["image"] for p in pods for c in p["containers"]}

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert images() == {f"ghcr.io/shoal-dev/shoal:{chart['appVersion']}"}
    assert images("--set", "image.tag=1.2.3") == {"ghcr.io/shoal-dev/shoal:1.2.3"}
    assert images("--set", f"image.tag=1.2.3,image.digest={DIGEST}") == {f"ghcr.io/shoal-dev/shoal@{DIGEST}"}


def test_lint_strict_passes_with_the_new_values(helm_env: dict[str, str]) -> None:
    out = helm(
        helm_env,
        "lint",
        "--strict",
        str(CHART),
        "-f",
        str(RECIPE),
        "--set",
        f"image.digest={DIGEST},replicaCount=3,podDisruptionBudget.minAvailable=2",
    )
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout


def test_kube_version_is_enforced(helm_env: dict[str, str]) -> None:
    old = helm(helm_env, "template", RELEASE, str(CHART), "--kube-version", "1.29.9", check=False)
    assert old.returncode != 0
    assert (
        "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.9" in old.stderr
    )
    for version in ("1.30.0", "1.30.4-eks-a1b2c3", "1.37.2"):
        helm(helm_env, "template", RELEASE, str(CHART), "--kube-version", version)


def test_the_test_hook_renders(helm_env: dict[str, str]) -> None:
    docs = template(helm_env)
    pod = hook(docs)
    meta = pod["metadata"]
    assert meta["name"] == f"{RELEASE}-test-healthz"
    assert meta["annotations"]["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= meta["labels"].items()  # no ReplicaSet, Service or budget adopts it
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["command"] == ["python", "-c", (CHART / "files" / "test-healthz.py").read_text()]
    assert container["env"] == [
        {"name": "SHOAL_HEALTHZ", "value": f"{RELEASE}-metrics.{NS}.svc:10259/healthz"}
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert not [d for d in template(helm_env, "--set", "helmTest.enabled=false") if d["kind"] == "Pod"]
    assert not [d for d in template(helm_env, "--set", "metrics.service.enabled=false") if d["kind"] == "Pod"]
    moved = hook(template(helm_env, "--set", "metrics.service.port=8443"))
    assert moved["spec"]["containers"][0]["env"][0]["value"].endswith(".svc:8443/healthz")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        pytest.param(
            ("--set", "extraEnv=PYTHONPATH"), "at '/extraEnv': got string, want array", id="env-not-list"
        ),
        pytest.param(
            ("--set-json", 'extraEnv=[{"value":"x"}]'),
            "at '/extraEnv/0': missing property 'name'",
            id="env-no-name",
        ),
        pytest.param(
            ("--set-json", 'extraEnv=[{"name":"A","val":"x"}]'),
            "at '/extraEnv/0': additional properties 'val' not allowed",
            id="env-typo",
        ),
        pytest.param(
            ("--set-json", 'extraVolumes=[{"name":"Plugins","emptyDir":{}}]'),
            "at '/extraVolumes/0/name': 'Plugins' does not match pattern",
            id="volume-name",
        ),
        pytest.param(
            ("--set-json", 'extraVolumeMounts=[{"name":"plugins"}]'),
            "at '/extraVolumeMounts/0': missing property 'mountPath'",
            id="mount-no-path",
        ),
        pytest.param(
            ("--set-string", "podDisruptionBudget.enabled=yes"),
            "at '/podDisruptionBudget/enabled': got string, want boolean",
            id="pdb-enabled",
        ),
        pytest.param(
            ("--set-string", "podDisruptionBudget.maxUnavailable=many"),
            "at '/podDisruptionBudget/maxUnavailable': 'many' does not match pattern '^[0-9]+%$'",
            id="pdb-max",
        ),
        pytest.param(
            ("--set", "podDisruptionBudget.minAvailable=-1"),
            "at '/podDisruptionBudget/minAvailable': minimum: got -1, want 0",
            id="pdb-min-negative",
        ),
        pytest.param(
            ("--set", "podDisruptionBudget.unhealthyPodEvictionPolicy=Never"),
            "at '/podDisruptionBudget/unhealthyPodEvictionPolicy': value must be one of",
            id="pdb-policy",
        ),
        pytest.param(
            ("--set", "image.digest=latest"),
            "at '/image/digest': 'latest' does not match pattern",
            id="digest",
        ),
        pytest.param(
            ("--set-string", "helmTest.enabled=no"),
            "at '/helmTest/enabled': got string, want boolean",
            id="test",
        ),
    ],
)
def test_schema_rejects_bad_new_values(helm_env: dict[str, str], flags: tuple[str, ...], words: str) -> None:
    out = helm(helm_env, "template", RELEASE, str(CHART), *flags, check=False)
    assert out.returncode != 0
    assert words in out.stderr, out.stderr


# -- the hook's check against live servers ------------------------------------------------------------
def run_check(docs: list[dict[str, Any]], target: str) -> subprocess.CompletedProcess[str]:
    """The test Pod's command, here: `python -c SCRIPT` with its env pointed at ``target``."""
    (container,) = hook(docs)["spec"]["containers"]
    assert container["command"][0] == "python"
    return subprocess.run(
        [sys.executable, *container["command"][1:]],
        env={"SHOAL_HEALTHZ": target, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_hook_check_passes_on_a_live_scheduler(
    helm_env: dict[str, str], crds: ControlPlane, tmp_path: Path
) -> None:
    docs = template(helm_env)
    op = OperatorProcess(crds.kubeconfig, tmp_path / "op.log", identity="hook", lease_name="shoal-hook")
    with op:
        wait_ready(op)
        out = run_check(docs, f"127.0.0.1:{op.metrics_port}/healthz")
        assert out.returncode == 0, out.stdout
        assert f"http://127.0.0.1:{op.metrics_port}/healthz: 200 ok" in out.stdout
        port = op.metrics_port
    down = run_check(docs, f"127.0.0.1:{port}/healthz")  # stopped: nothing listens
    assert down.returncode == 1
    assert down.stdout.count("Connection refused") == 6  # 3 attempts x (https, http)


@pytest.fixture
def https_healthz(tmp_path: Path) -> Iterator[int]:
    """A /healthz behind HTTPS with a self-signed certificate (as a secured metrics port may serve)."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=shoal"]
    subprocess.run(
        ["openssl", *request, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )

    class Healthz(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"no")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthz)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_hook_check_accepts_https_with_a_self_signed_certificate(
    helm_env: dict[str, str], https_healthz: int
) -> None:
    docs = template(helm_env)
    out = run_check(docs, f"127.0.0.1:{https_healthz}/healthz")
    assert out.returncode == 0, out.stdout
    assert out.stdout.splitlines() == [f"https://127.0.0.1:{https_healthz}/healthz: 200 ok"]
    missing = run_check(docs, f"127.0.0.1:{https_healthz}/nothing")
    assert missing.returncode == 1  # a 404 is no answer
    assert "HTTP Error 404" in missing.stdout


# -- the plugin recipe, end to end ---------------------------------------------------------------------
async def test_plugin_recipe_from_a_configmap(
    helm_env: dict[str, str], crds: ControlPlane, clean: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """docs/chart.md's recipe: the plugin module in a ConfigMap, mounted, on PYTHONPATH, named in
    SHOAL_PLUGINS; the profile that lists it schedules with it."""
    api = clean
    docs = template(helm_env, "-f", str(RECIPE))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # the ConfigMap as `kubectl create configmap shoal-plugins --from-file=only_even_nodes.py` makes it
    volume = next(v for v in pod["volumes"] if v["name"] == "plugins")
    cm_name = volume["configMap"]["name"]
    core: Any = client.CoreV1Api(api)
    body = {"metadata": {"name": cm_name}, "data": {"only_even_nodes.py": PLUGIN.read_text()}}
    await core.create_namespaced_config_map(namespace, body)
    # the kubelet's part: the ConfigMap's files at the mount path (here a folder of the test)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "plugins")["mountPath"]
    mounted = tmp_path / "plugins"
    mounted.mkdir()
    stored = await core.read_namespaced_config_map(cm_name, namespace)
    for name, text in stored.data.items():
        (mounted / name).write_text(text)
    env = {
        e["name"]: e["value"].replace(mount, str(mounted))
        for e in container["env"]
        if "value" in e and e["name"] != "POD_NAME"
    }
    assert set(env) == {"PYTHONPATH", "SHOAL_PLUGINS"}
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(one(docs, "ConfigMap")["data"]["profiles.yaml"])
    await create_many(api, [make_node("node-1", cpu="4"), make_node("node-2", cpu="4")])
    op = OperatorProcess(
        crds.kubeconfig,
        tmp_path / "op.log",
        identity="recipe",
        lease_name="shoal-recipe",
        extra=["--bootstrap-profiles", str(profiles)],
        env=env,
    )
    with op:
        wait_ready(op)
        custom: Any = client.CustomObjectsApi(api)

        async def ready() -> dict[str, Any] | None:
            try:
                obj = await custom.get_cluster_custom_object(
                    "shoal.dev", "v1alpha1", "schedulingprofiles", "even-scheduler"
                )
            except client.ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            conds = (obj.get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "Ready" and c["status"] == "True"), None)

        await wait_for(ready, 30, what="the even-scheduler profile Ready (its plugin loaded)")
        await create(api, make_pod("even", namespace=namespace, scheduler_name="even-scheduler"))

        async def bound() -> str | None:
            node: str | None = (await core.read_namespaced_pod("even", namespace)).spec.node_name
            return node

        assert await wait_for(bound, 30, what="the pod bound by the plugin's profile") == "node-2"
        assert "registered twice" not in op.tail(200)
