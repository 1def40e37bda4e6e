"""The Helm chart, with the helm built by the project, on a fresh control plane of its own:
lint, schema, server-side dry-run, install, least-privilege RBAC, profiles bootstrapped by the
operator from the chart's ConfigMap, upgrade, uninstall."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.dynamic import DynamicClient

from shoal.kube.bootstrap import HASH_ANNOTATION, MANAGED_BY_LABEL, parse_bootstrap_profiles, spec_hash
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, apply_crds, create, create_many, list_all, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane
from shoal.testing.objects import (
    VOLCANO_GROUP_ANNOTATION,
    make_native_pod_group,
    make_node,
    make_pod,
    make_pod_group,
    make_volcano_pod_group,
)
from shoal.testing.thirdparty import volcano_podgroup_crd
from tests.integration.conftest import wait_ready

pytestmark = pytest.mark.slow

CHART = Path(__file__).resolve().parents[2] / "helm" / "shoal"
NS = "shoal-system"
RELEASE = "shoal"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    """A control plane of its own: the chart must install into a cluster without shoal's CRDs."""
    plane = ControlPlane()
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    return {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def helm(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = Binaries.locate().helm
    if not binary.exists():
        pytest.fail(f"{binary} missing: run `make cluster-bin`")
    out = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out


@pytest.fixture
async def api(cp: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await config.new_client_from_config(config_file=str(cp.kubeconfig))
    try:
        yield api_client
    finally:
        await api_client.close()


def template(env: dict[str, str], *flags: str) -> list[dict[str, Any]]:
    out = helm(env, "template", RELEASE, str(CHART), "-n", NS, *flags).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    return found[0]


def profile_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    return [r for r in role["rules"] if r["resources"] == ["schedulingprofiles"]]


def write_values(path: Path, **profile: Any) -> Path:
    """A values file whose only profile is the default gpu-scheduler with ``profile`` changes."""
    item = {"name": "gpu-scheduler", **DEFAULT_PROFILE_SPEC, **profile}
    path.write_text(yaml.safe_dump({"profiles": [item]}))
    return path


def test_lint_is_clean(helm_env: dict[str, str]) -> None:
    out = helm(helm_env, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout
    assert "[ERROR]" not in out.stdout


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        pytest.param(
            "replicaCount=two",
            "at '/replicaCount': got string, want integer",
            id="replicas-string",
        ),
        pytest.param("replicaCount=0", "at '/replicaCount': minimum: got 0, want 1", id="replicas-zero"),
        pytest.param(
            "image.pullPolicy=Sometimes",
            "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
            id="pull-policy",
        ),
        pytest.param("crds.keep=maybe", "at '/crds/keep': got string, want boolean", id="keep-not-bool"),
        pytest.param(
            "terminationGracePeriodSeconds=-1",
            "at '/terminationGracePeriodSeconds': minimum: got -1, want 0",
            id="grace-negative",
        ),
        pytest.param("replicasCount=2", "additional properties 'replicasCount' not allowed", id="typo"),
    ],
)
def test_values_schema_rejects_bad_values(helm_env: dict[str, str], flag: str, words: str) -> None:
    setter = "--set-string" if flag.startswith(("replicaCount=two", "crds.keep")) else "--set"
    out = helm(helm_env, "template", RELEASE, str(CHART), setter, flag, check=False)
    assert out.returncode != 0
    assert words in out.stderr


def test_two_replicas_need_leader_election(helm_env: dict[str, str]) -> None:
    out = helm(
        helm_env, "template", RELEASE, str(CHART), "--set", "leaderElection.enabled=false", check=False
    )
    assert out.returncode != 0
    assert "replicaCount > 1 needs leaderElection.enabled=true" in out.stderr
    single = helm(
        helm_env, "template", RELEASE, str(CHART), "--set", "leaderElection.enabled=false,replicaCount=1"
    )
    assert "--no-leader-elect" in single.stdout
    assert "kind: Role\n" not in single.stdout


def test_the_fleet_page_is_off_until_enabled_and_then_guarded(helm_env: dict[str, str]) -> None:
    """``web.enabled`` adds ``--web`` and the fleet-viewer ClusterRole (get on /fleet and
    /fleet/*), bound to ``web.viewer.subjects`` when given; off by default, neither exists."""

    def viewer(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith("-fleet-viewer")]

    def args(docs: list[dict[str, Any]]) -> list[str]:
        return list(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    off = template(helm_env)
    assert "--web" not in args(off) and not viewer(off, "ClusterRole")
    on = template(helm_env, "--set", "web.enabled=true")
    assert "--web" in args(on)
    (role,) = viewer(on, "ClusterRole")
    assert role["rules"] == [{"nonResourceURLs": ["/fleet", "/fleet/*"], "verbs": ["get"]}]
    assert not viewer(on, "ClusterRoleBinding")
    bound = template(
        helm_env,
        "--set",
        "web.enabled=true,web.viewer.subjects[0].kind=Group,web.viewer.subjects[0].name=platform",
    )
    (binding,) = viewer(bound, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "Group", "name": "platform"}]


def test_crd_switches(helm_env: dict[str, str]) -> None:
    def kinds(out: str) -> list[str]:
        return [
            d["metadata"]["name"]
            for d in yaml.safe_load_all(out)
            if d and d["kind"] == "CustomResourceDefinition"
        ]

    assert kinds(helm(helm_env, "template", RELEASE, str(CHART)).stdout) == [
        "schedulingprofiles.shoal.dev",
        "podgroups.scheduling.x-k8s.io",
    ]
    assert kinds(
        helm(helm_env, "template", RELEASE, str(CHART), "--set", "crds.podGroup.enabled=false").stdout
    ) == ["schedulingprofiles.shoal.dev"]
    assert kinds(helm(helm_env, "template", RELEASE, str(CHART), "--set", "crds.enabled=false").stdout) == []
    docs = list(yaml.safe_load_all(helm(helm_env, "template", RELEASE, str(CHART)).stdout))
    crd = next(d for d in docs if d and d["kind"] == "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    deploy = next(d for d in docs if d and d["kind"] == "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = pod["containers"][0]["securityContext"]
    assert sc == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert deploy["spec"]["replicas"] == 2
    assert "priorityClassName" not in pod  # none by default: some clusters refuse system-* classes
    assert pod["terminationGracePeriodSeconds"] == 60  # outlasts the 30 s drain of bindings
    overridden = yaml.safe_load_all(
        helm(
            helm_env,
            "template",
            RELEASE,
            str(CHART),
            "--set",
            "priorityClassName=system-cluster-critical,terminationGracePeriodSeconds=90",
        ).stdout
    )
    pod = next(d for d in overridden if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["terminationGracePeriodSeconds"] == 90


def test_profile_aliases_from_values(helm_env: dict[str, str], tmp_path: Path) -> None:
    """KubeRay's pods name scheduler-plugins-scheduler: a values file claims it for a profile."""
    values = tmp_path / "aliases.yaml"
    values.write_text(
        yaml.safe_dump(
            {"profiles": [{"schedulerName": "gpu-scheduler", "aliases": ["scheduler-plugins-scheduler"]}]}
        )
    )
    cm = one(template(helm_env, "-f", str(values)), "ConfigMap")
    (entry,) = parse_bootstrap_profiles(cm["data"]["profiles.yaml"])
    assert entry.spec == {"schedulerName": "gpu-scheduler", "aliases": ["scheduler-plugins-scheduler"]}
    values.write_text(yaml.safe_dump({"profiles": [{"schedulerName": "gpu", "aliases": ["Not_Valid"]}]}))
    bad = helm(helm_env, "template", RELEASE, str(CHART), "-f", str(values), check=False)
    assert bad.returncode != 0 and "/profiles/0/aliases/0" in bad.stderr


def test_profiles_are_a_configmap_the_operator_bootstraps(helm_env: dict[str, str], tmp_path: Path) -> None:
    docs = template(helm_env)
    assert not [d for d in docs if d["kind"] == "SchedulingProfile"]  # Helm never needs the kind
    cm = one(docs, "ConfigMap")
    assert cm["metadata"]["name"] == f"{RELEASE}-profiles"
    data = cm["data"]["profiles.yaml"]
    (entry,) = parse_bootstrap_profiles(data)  # the operator's own parser reads what the chart wrote
    assert entry.name == "gpu-scheduler"
    assert entry.spec == DEFAULT_PROFILE_SPEC  # values.yaml's default is the documented profile
    deploy = one(docs, "Deployment")
    pod = deploy["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert "--bootstrap-profiles=/etc/shoal/profiles.yaml" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/shoal")
    assert mount["readOnly"] is True
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == f"{RELEASE}-profiles"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    checksum = pod["metadata"]["annotations"]["checksum/profiles"]
    assert checksum == hashlib.sha256(data.encode()).hexdigest()
    assert profile_rules(docs) == [
        {"apiGroups": ["shoal.dev"], "resources": ["schedulingprofiles"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["shoal.dev"], "resources": ["schedulingprofiles"], "verbs": ["create"]},
        {
            "apiGroups": ["shoal.dev"],
            "resources": ["schedulingprofiles"],
            "resourceNames": ["gpu-scheduler"],
            "verbs": ["patch"],
        },
    ]

    # a changed profile changes the pod template, so `helm upgrade` rolls the pods
    changed = template(helm_env, "-f", str(write_values(tmp_path / "v.yaml", percentageOfNodesToScore=50)))
    changed_pod = one(changed, "Deployment")["spec"]["template"]
    assert changed_pod["metadata"]["annotations"]["checksum/profiles"] != checksum
    # the same values render the same pod template: no rollout without a change
    assert one(template(helm_env), "Deployment")["spec"]["template"] == pod

    # an object name apart from the schedulerName, and podAnnotations next to the checksum
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"profiles": [{"name": "team-a", "schedulerName": "a"}]}))
    docs = template(helm_env, "-f", str(named), "--set", "podAnnotations.team=ml")
    (entry,) = parse_bootstrap_profiles(one(docs, "ConfigMap")["data"]["profiles.yaml"])
    assert (entry.name, entry.spec) == ("team-a", {"schedulerName": "a"})
    assert profile_rules(docs)[2]["resourceNames"] == ["team-a"]
    annotations = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert set(annotations) == {"checksum/profiles", "team"}

    # no profiles: no ConfigMap, no flag, no volume, no write verbs on profiles
    empty = tmp_path / "empty.yaml"
    empty.write_text("profiles: []\n")
    docs = template(helm_env, "-f", str(empty))
    assert not [d for d in docs if d["kind"] == "ConfigMap"]
    pod = one(docs, "Deployment")["spec"]["template"]
    assert not [a for a in pod["spec"]["containers"][0]["args"] if "bootstrap" in a]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["tmp"]
    assert "annotations" not in pod["metadata"]
    assert [r["verbs"] for r in profile_rules(docs)] == [["get", "list", "watch"]]


async def test_template_passes_server_side_dry_run_then_installs(
    cp: ControlPlane, api: client.ApiClient, helm_env: dict[str, str]
) -> None:
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    rendered = helm(helm_env, "template", RELEASE, str(CHART), "-n", NS).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert not [d for d in docs if d["kind"] == "SchedulingProfile"]  # nothing needs the new CRDs' kinds
    dyn = await DynamicClient(api)
    for doc in docs:
        resource = await dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        await dyn.create(resource, body=doc, namespace=NS if resource.namespaced else None, dry_run="All")
    ext: Any = client.ApiextensionsV1Api(api)
    assert not [c for c in (await ext.list_custom_resource_definition()).items if "shoal" in c.metadata.name]

    out = helm(helm_env, "install", RELEASE, str(CHART), "-n", NS, "--kubeconfig", str(cp.kubeconfig))
    assert "STATUS: deployed" in out.stdout
    assert "kubectl get schedulingprofiles" in out.stdout  # NOTES.txt
    dyn = await DynamicClient(api)  # fresh discovery: the CRDs exist now
    hooks = [d for d in docs if "helm.sh/hook" in (d["metadata"].get("annotations") or {})]
    assert [d["kind"] for d in hooks] == ["Pod"]  # the `helm test` Pod: dry-run above, made by `helm test`
    for doc in docs:
        if doc in hooks:
            continue
        resource = await dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        got = await dyn.get(
            resource, name=doc["metadata"]["name"], namespace=NS if resource.namespaced else None
        )
        assert got.metadata.name == doc["metadata"]["name"]
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1  # installed (2 replicas)
    profiles = await dyn.resources.get(api_version="shoal.dev/v1alpha1", kind="SchedulingProfile")
    assert profiles.categories == ["shoal"]  # `kubectl get shoal`
    core: Any = client.CoreV1Api(api)
    cm = await core.read_namespaced_config_map(f"{RELEASE}-profiles", NS)
    assert cm.data == one(docs, "ConfigMap")["data"]
    # Helm created no profile: the operator's leader does, at start-up (see the RBAC test)
    custom: Any = client.CustomObjectsApi(api)

    async def listed() -> tuple[list[Any]] | None:
        try:
            reply = await custom.list_cluster_custom_object("shoal.dev", "v1alpha1", "schedulingprofiles")
        except client.ApiException as exc:
            if exc.status == 429:  # a CRD just created: "storage is (re)initializing"
                return None
            raise
        return (reply["items"],)

    assert await wait_for(listed, 30, what="the SchedulingProfile list") == ([],)
    # what the operator will create passes the CRD's schema and CEL rules
    resource = await dyn.resources.get(api_version="shoal.dev/v1alpha1", kind="SchedulingProfile")
    for entry in parse_bootstrap_profiles(cm.data["profiles.yaml"]):
        doc = {
            "apiVersion": "shoal.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": f"dry-{uuid.uuid4().hex[:6]}"},
            "spec": entry.spec,
        }
        await dyn.create(resource, body=doc, dry_run="All")


def test_notes(cp: ControlPlane, helm_env: dict[str, str]) -> None:
    def notes(*flags: str) -> str:
        proc = helm(
            helm_env,
            "install",
            "notes",
            str(CHART),
            "-n",
            NS,
            "--dry-run=client",
            "--set",
            "crds.enabled=false",  # the release "shoal" may own them already
            "--kubeconfig",
            str(cp.kubeconfig),
            *flags,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        return out[out.index("NOTES:") :]

    text = notes()
    assert "from ConfigMap notes-shoal-profiles" in text
    assert "  - gpu-scheduler: pods with `schedulerName: gpu-scheduler`" in text
    assert f"kubectl -n {NS} get lease shoal-scheduler" in text
    forward = next(line for line in text.splitlines() if "port-forward" in line)
    assert forward.rstrip().endswith("port-forward deploy/notes-shoal 10259")  # it blocks: nothing after
    assert "https://localhost:10259/metrics" in text and "notes-shoal-metrics-reader" in text
    assert "curl localhost:10259/metrics" in notes("--set", "metrics.secure=false")
    alone = notes("--set", "leaderElection.enabled=false,replicaCount=1")
    assert "lease" not in alone.lower()
    assert "Profiles: none from the chart" in notes("--set-json", "profiles=[]")


async def sa_kubeconfig(api: client.ApiClient, cp: ControlPlane, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of the chart's ServiceAccount."""
    core: Any = client.CoreV1Api(api)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    token = (await core.create_namespaced_service_account_token(RELEASE, NS, request)).status.token
    config_doc = json.loads(cp.kubeconfig.read_text())
    config_doc["users"] = [{"name": "admin", "user": {"token": token}}]
    path.write_text(json.dumps(config_doc))  # noqa: ASYNC240 - a small file, once
    return path


def chart_replica(kubeconfig: Path, profiles: Path, log: Path, identity: str) -> OperatorProcess:
    """`shoal run` as the chart's pod would run it: its ServiceAccount, Lease and profiles file."""
    return OperatorProcess(
        kubeconfig,
        log,
        identity=identity,
        lease_name="shoal-scheduler",
        extra=["--lease-namespace", NS, "--bootstrap-profiles", str(profiles)],
    )


def bootstrap_file(docs: list[dict[str, Any]], path: Path) -> Path:
    """The chart's ConfigMap as the pod sees it, mounted at /etc/shoal/profiles.yaml."""
    path.write_text(one(docs, "ConfigMap")["data"]["profiles.yaml"])
    return path


async def get_profile(api: client.ApiClient, name: str = "gpu-scheduler") -> dict[str, Any]:
    custom: Any = client.CustomObjectsApi(api)
    obj: dict[str, Any] = await custom.get_cluster_custom_object(
        "shoal.dev", "v1alpha1", "schedulingprofiles", name
    )
    return obj


async def wait_bootstrapped(api: client.ApiClient, spec: dict[str, Any]) -> dict[str, Any]:
    """The gpu-scheduler profile, once it carries ``spec``'s hash and the leader reports it Ready."""

    async def check() -> dict[str, Any] | None:
        try:
            obj = await get_profile(api)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        meta = obj["metadata"]
        conds = (obj.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        ours = (meta.get("annotations") or {}).get(HASH_ANNOTATION) == spec_hash(spec)
        return (
            obj if ready and ours and obj["status"].get("observedGeneration") == meta["generation"] else None
        )

    result: dict[str, Any] = await wait_for(check, 30, what="the bootstrapped gpu-scheduler profile, Ready")
    return result


DRA = ("resource.k8s.io", "v1")


async def dra_objects(custom: Any) -> None:
    """A DeviceClass, one GPU on gpu-0 and a claim for it (the class may exist from other tests)."""
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]},
    }
    try:
        await custom.create_cluster_custom_object(*DRA, "deviceclasses", cls)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    spec = {
        "driver": "gpu.nvidia.com",
        "nodeName": "gpu-0",
        "pool": {"name": "gpu-0", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}}],
    }
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "rbac-gpu-0"},
        "spec": spec,
    }
    await custom.create_cluster_custom_object(*DRA, "resourceslices", body)
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "rbac-claim"},
        "spec": {"devices": {"requests": [request]}},
    }
    await custom.create_namespaced_custom_object(*DRA, "default", "resourceclaims", claim)


async def test_chart_rbac_is_enough_and_no_more(
    cp: ControlPlane, api: client.ApiClient, helm_env: dict[str, str], tmp_path: Path
) -> None:
    kubeconfig = await sa_kubeconfig(api, cp, tmp_path / "sa-kubeconfig")
    profiles = bootstrap_file(template(helm_env), tmp_path / "profiles.yaml")
    claims = json.loads(
        base64.urlsafe_b64decode(
            json.loads(kubeconfig.read_text())["users"][0]["user"]["token"].split(".")[1] + "=="
        )
    )
    assert claims["sub"] == f"system:serviceaccount:{NS}:{RELEASE}"
    await create_many(api, [make_node(f"gpu-{i}", gpus=8, gpu_memory_free_gb=80) for i in range(3)])
    await apply_crds(api, crds=[volcano_podgroup_crd()])  # a cluster where Volcano was installed
    op = chart_replica(kubeconfig, profiles, tmp_path / "op.log", "rbac-replica")
    with op:
        wait_ready(op)
        # the leader creates the chart's profile with the ServiceAccount's create grant
        profile = await wait_bootstrapped(api, DEFAULT_PROFILE_SPEC)
        assert profile["metadata"]["labels"][MANAGED_BY_LABEL] == "shoal"
        assert profile["spec"] == DEFAULT_PROFILE_SPEC
        assert profile["status"]["conditions"][0]["reason"] == "Valid"
        # a gang too: its PodGroup status is written through podgroups/status; a native gang,
        # whose condition is written through scheduling.k8s.io's podgroups/status; and a Volcano
        # gang, whose phase is patched on the object (Volcano's CRD has no status subresource)
        # a DRA claim: allocated and reserved through resourceclaims and resourceclaims/status
        custom_dra: Any = client.CustomObjectsApi(api)
        await dra_objects(custom_dra)
        dra_pod = make_pod("dra", gpus=0)
        dra_pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "rbac-claim"}]
        await create(api, dra_pod)
        await create(api, make_pod_group("rbac-gang", min_member=3))
        await create(api, make_native_pod_group("rbac-native", min_count=2))
        await create(api, make_volcano_pod_group("rbac-volcano", min_member=2))  # status: patch on the object
        volcano_link = {VOLCANO_GROUP_ANNOTATION: "rbac-volcano"}
        await create_many(
            api,
            [
                make_pod("fits", gpus=1, gpu_memory_gb=10),
                make_pod("never", gpus=64),
                *(make_pod(f"rbac-gang-{i}", gpus=4, pod_group="rbac-gang") for i in range(3)),
                *(make_pod(f"rbac-native-{i}", gpus=4, scheduling_group="rbac-native") for i in range(2)),
                *(make_pod(f"rbac-volcano-{i}", gpus=1, annotations=volcano_link) for i in range(2)),
            ],
        )
        core: Any = client.CoreV1Api(api)
        custom: Any = client.CustomObjectsApi(api)

        async def done() -> bool:
            pods = {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, "default")}
            cond = [c for c in pods["never"]["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
            return (
                bool(pods["fits"]["spec"].get("nodeName"))
                and bool(cond)
                and cond[0]["reason"] == "Unschedulable"
            )

        await wait_for(done, 30, what="scheduling with the chart's ServiceAccount")

        async def gang_status() -> dict[str, Any] | None:
            group = await custom.get_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", "rbac-gang"
            )
            status: dict[str, Any] = group.get("status") or {}
            return status if status.get("phase") == "Scheduling" and status.get("scheduleStartTime") else None

        status = await wait_for(gang_status, 30, what="the PodGroup status written with the chart's RBAC")
        assert "scheduled" not in status  # its members are bound below; none runs (no kubelet)

        async def native_condition() -> dict[str, Any] | None:
            group = await custom.get_namespaced_custom_object(
                "scheduling.k8s.io", "v1beta1", "default", "podgroups", "rbac-native"
            )
            conds = (group.get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "PodGroupInitiallyScheduled"), None)

        cond = await wait_for(native_condition, 30, what="the native PodGroup's condition, chart RBAC")

        async def volcano_running() -> dict[str, Any] | None:
            group = await custom.get_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", "default", "podgroups", "rbac-volcano"
            )
            status: dict[str, Any] = group.get("status") or {}
            return status if status.get("phase") == "Running" else None

        await wait_for(volcano_running, 30, what="the Volcano PodGroup's phase, chart RBAC")

        async def claim_allocated() -> dict[str, Any] | None:
            got = await custom.get_namespaced_custom_object(*DRA, "default", "resourceclaims", "rbac-claim")
            status: dict[str, Any] = got.get("status") or {}
            return status if status.get("allocation") and status.get("reservedFor") else None

        await wait_for(claim_allocated, 30, what="the DRA claim allocated with the chart's RBAC")
        assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
        gang_nodes = {
            p["metadata"]["name"]: p["spec"].get("nodeName")
            for p in await list_all(core.list_namespaced_pod, "default")
            if p["metadata"]["name"].startswith("rbac-gang-")
        }
        assert len(gang_nodes) == 3
        assert all(gang_nodes.values()), gang_nodes
        events: Any = client.EventsV1Api(api)
        reasons = {e["reason"] for e in await list_all(events.list_namespaced_event, "default")}
        assert {"Scheduled", "FailedScheduling"} <= reasons
        lease = await client.CoordinationV1Api(api).read_namespaced_lease("shoal-scheduler", NS)
        assert lease.spec.holder_identity == "rbac-replica"
        assert "forbidden" not in op.tail(200).lower(), op.tail(200)

    # a profile of another name, made by hand: the ServiceAccount may patch only the chart's names
    hand_made = {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "by-hand"},
        "spec": {"schedulerName": "by-hand"},
    }
    await create(api, hand_made)
    sa_api = await config.new_client_from_config(config_file=str(kubeconfig))
    try:
        sa_core: Any = client.CoreV1Api(sa_api)
        sa_lease: Any = client.CoordinationV1Api(sa_api)
        sa_custom: Any = client.CustomObjectsApi(sa_api)
        sa_storage: Any = client.StorageV1Api(sa_api)
        # the volume plugins' kinds: listed (and watched) with the chart's grants, never written
        await sa_core.list_persistent_volume()
        await sa_core.list_persistent_volume_claim_for_all_namespaces()
        await sa_storage.list_storage_class()
        await sa_storage.list_csi_node()
        await sa_storage.list_volume_attachment()
        await sa_storage.list_csi_storage_capacity_for_all_namespaces()
        for plural in ("deviceclasses", "resourceslices", "devicetaintrules"):
            await sa_custom.list_cluster_custom_object(*DRA, plural)
        await sa_custom.list_cluster_custom_object(*DRA, "resourceclaims")
        # the claim DynamicResources makes for a pod's DRA-backed extended resources: created, read
        # and deleted (a failed bind, a claim left over)
        made = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"generateName": "rbac-extended-resources-"},
            "spec": {},
        }
        made = await sa_custom.create_namespaced_custom_object(*DRA, "default", "resourceclaims", made)
        await sa_custom.get_namespaced_custom_object(
            *DRA, "default", "resourceclaims", made["metadata"]["name"]
        )
        await sa_custom.delete_namespaced_custom_object(
            *DRA, "default", "resourceclaims", made["metadata"]["name"]
        )
        # DefaultPreemption: PDBs listed and watched; pods deleted (victims) -- as kube-scheduler's role
        await client.PolicyV1Api(sa_api).list_pod_disruption_budget_for_all_namespaces()
        # PodTopologySpread's default constraints: what selects a pod, listed and watched only
        sa_apps: Any = client.AppsV1Api(sa_api)
        await sa_core.list_service_for_all_namespaces()
        await sa_core.list_replication_controller_for_all_namespaces()
        await sa_apps.list_replica_set_for_all_namespaces()
        await sa_apps.list_stateful_set_for_all_namespaces()
        sp = ("shoal.dev", "v1alpha1", "schedulingprofiles")
        merge = {"_content_type": "application/merge-patch+json"}
        await sa_custom.patch_cluster_custom_object(
            *sp, "gpu-scheduler", {"metadata": {"labels": {"x": "y"}}}, **merge
        )
        for call in (
            lambda: sa_custom.patch_cluster_custom_object(
                *sp, "by-hand", {"spec": {"percentageOfNodesToScore": 5}}, **merge
            ),
            lambda: sa_custom.delete_cluster_custom_object(*sp, "gpu-scheduler"),
            lambda: sa_core.list_namespaced_secret(NS),
            lambda: sa_core.read_namespaced_secret("anything", "default"),
            lambda: sa_core.patch_node("gpu-0", {"metadata": {"labels": {"x": "y"}}}),
            lambda: sa_core.create_namespaced_pod("default", make_pod("sneaky")),
            lambda: sa_core.delete_persistent_volume("anything"),
            lambda: sa_core.read_namespaced_persistent_volume_claim("anything", "default"),
            lambda: sa_storage.delete_storage_class("anything"),
            lambda: sa_storage.read_csi_node("gpu-0"),
            lambda: sa_storage.delete_volume_attachment("anything"),
            lambda: sa_core.delete_namespaced_service("anything", "default"),
            lambda: sa_apps.read_namespaced_replica_set("anything", "default"),
            lambda: sa_apps.patch_namespaced_stateful_set("anything", "default", {"spec": {}}),
            # DRA: read through the watch, claims patched (and made for extended resources); slices
            # and classes never written
            lambda: sa_custom.delete_cluster_custom_object(*DRA, "resourceslices", "rbac-gpu-0"),
            lambda: sa_custom.create_cluster_custom_object(*DRA, "deviceclasses", {}),
            # the Lease is renewed with get + update; the Role grants no patch
            lambda: sa_lease.patch_namespaced_lease(
                "shoal-scheduler", NS, {"metadata": {"labels": {"x": "y"}}}
            ),
        ):
            with pytest.raises(client.ApiException) as info:
                await cast(Callable[[], Awaitable[Any]], call)()
            assert info.value.status == 403
    finally:
        await sa_api.close()


async def test_upgrade_leaves_profiles_to_the_operator(
    cp: ControlPlane, api: client.ApiClient, helm_env: dict[str, str], tmp_path: Path
) -> None:
    """Helm never touches the profile; changed values roll the pods, whose leader patches it."""
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)

    async def checksum() -> str:
        deploy = await apps.read_namespaced_deployment(RELEASE, NS)
        return str(deploy.spec.template.metadata.annotations["checksum/profiles"])

    before = await get_profile(api)
    first = await checksum()
    out = helm(helm_env, "upgrade", RELEASE, str(CHART), "-n", NS, "--kubeconfig", str(cp.kubeconfig))
    assert "STATUS: deployed" in out.stdout
    assert await checksum() == first  # same values: the pods are not rolled
    assert (await get_profile(api))["metadata"] == before["metadata"]  # not re-created, not even written

    values = write_values(tmp_path / "values.yaml", percentageOfNodesToScore=50)
    helm(
        helm_env,
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        NS,
        "-f",
        str(values),
        "--kubeconfig",
        str(cp.kubeconfig),
    )
    data = (await core.read_namespaced_config_map(f"{RELEASE}-profiles", NS)).data["profiles.yaml"]
    assert await checksum() == hashlib.sha256(data.encode()).hexdigest() != first  # the pods roll
    assert (await get_profile(api))["metadata"] == before["metadata"]  # Helm still left it alone

    # the new pods' leader: the installed ConfigMap, the chart's ServiceAccount (patch by name)
    path = tmp_path / "profiles.yaml"
    path.write_text(data)
    kubeconfig = await sa_kubeconfig(api, cp, tmp_path / "sa-kubeconfig")
    op = chart_replica(kubeconfig, path, tmp_path / "op.log", "upgraded-replica")
    with op:
        wait_ready(op)
        wanted = {**DEFAULT_PROFILE_SPEC, "percentageOfNodesToScore": 50}
        after = await wait_bootstrapped(api, wanted)
        assert after["spec"] == wanted
        assert after["metadata"]["uid"] == before["metadata"]["uid"]  # patched, never re-created
        assert after["metadata"]["creationTimestamp"] == before["metadata"]["creationTimestamp"]
        assert "forbidden" not in op.tail(200).lower(), op.tail(200)


async def test_uninstall_keeps_crds(
    cp: ControlPlane, api: client.ApiClient, helm_env: dict[str, str]
) -> None:
    uid = (await get_profile(api))["metadata"]["uid"]  # exists before (404 raises)
    helm(helm_env, "uninstall", RELEASE, "-n", NS, "--kubeconfig", str(cp.kubeconfig))
    apps: Any = client.AppsV1Api(api)
    assert not (await apps.list_namespaced_deployment(NS)).items
    core: Any = client.CoreV1Api(api)
    assert not [c for c in (await core.list_namespaced_config_map(NS)).items if "profiles" in c.metadata.name]
    ext: Any = client.ApiextensionsV1Api(api)
    names = {c.metadata.name for c in (await ext.list_custom_resource_definition()).items}
    assert {"schedulingprofiles.shoal.dev", "podgroups.scheduling.x-k8s.io"} <= names
    # the operator made the profile, not Helm: it stays with its CRD
    assert (await get_profile(api))["metadata"]["uid"] == uid
