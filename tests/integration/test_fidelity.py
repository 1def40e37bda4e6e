"""Fidelity on the real API server: real objects, gated pods, and fields shoal does not evaluate."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.core.state.objects import PodInfo
from shoal.kube.binder import KubeBinder
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.sim.cluster import load_objects
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
MERGE = {"_content_type": "application/merge-patch+json"}


def as_new(obj: dict[str, Any], namespace: str | None = None, scheduler: str | None = None) -> dict[str, Any]:
    """A dumped object made creatable: server-set metadata, finalizers and owners dropped."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for key in (
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "finalizers",
        "ownerReferences",
        "generateName",
    ):
        meta.pop(key, None)
    if namespace is not None:
        meta["namespace"] = namespace
    if scheduler is not None:
        out["spec"]["schedulerName"] = scheduler
    return out


async def pod(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    core: Any = client.CoreV1Api(api)
    resp = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    try:
        body: dict[str, Any] = await resp.json()
        return body
    finally:
        resp.release()


async def test_binding_a_gated_pod_is_retried_not_forgotten(clean: client.ApiClient, namespace: str) -> None:
    """The API server answers 409 for a gated pod: not 'someone else bound it'."""
    await create(clean, make_node("n1"))
    obj = make_pod("gated", namespace=namespace)
    obj["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    created = await create(clean, obj)
    status = await KubeBinder(clean).bind(PodInfo.from_dict(created), "n1")
    assert not status.ok
    assert status.requeue, status
    assert "non-empty .spec.schedulingGates" in status.message
    # a UID mismatch is a 409 too, and that one is forgotten
    stale = PodInfo.from_dict(created)
    stale.uid = str(uuid.uuid4())
    status = await KubeBinder(clean).bind(stale, "n1")
    assert not status.ok and not status.requeue


async def test_real_objects_on_the_real_api_server(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """Kubelet-shaped nodes and controller-shaped pods: placed, gated or refused as they ask."""
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, [as_new(n) for n in load_objects(REAL / "nodes.yaml")])
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    pods = [as_new(p, namespace, sched) for p in load_objects(REAL / "pods.yaml")]
    expect = {p["metadata"]["name"]: p["metadata"]["annotations"]["shoal.dev/expect"] for p in pods}
    await create_many(api, pods)
    core: Any = client.CoreV1Api(api)
    ev: Any = client.EventsV1Api(api)

    def as_expected(name: str, got: str | None) -> bool:
        want = expect[name]
        if want == "placed":
            return got is not None and got.startswith("node:")
        if want == "gated" or want.startswith("held: "):
            return got is None
        return got is not None and want.removeprefix("unschedulable: ") in got

    async def settled() -> dict[str, str | None] | None:
        """name -> "node:<node>" or its latest FailedScheduling note, once every pod is as its
        annotation says (a transient note, say before the nodes reached the cache, is waited out)."""
        notes: dict[str, str] = {}
        for e in sorted(await list_all(ev.list_namespaced_event, namespace), key=lambda e: e["eventTime"]):
            if e["reason"] == "FailedScheduling":
                notes[e["regarding"]["name"]] = e["note"]
        out: dict[str, str | None] = {}
        for p in await list_all(core.list_namespaced_pod, namespace):
            name = p["metadata"]["name"]
            node = p["spec"].get("nodeName")
            out[name] = f"node:{node}" if node else notes.get(name)
        return out if all(as_expected(n, out.get(n)) for n in expect) else None

    got = await wait_for(settled, 90, what="every real pod placed, gated or refused as annotated")
    assert got["finetune-0-h2j4k"] == "node:ip-10-0-12-34.ec2.internal"  # tolerates the GPU taint

    async def refused_condition() -> dict[str, Any] | None:
        """The condition is written behind the event: wait for it rather than read it once."""
        conds = (await pod(api, namespace, "pg-0"))["status"].get("conditions") or []
        return next(
            (c for c in conds if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None
        )

    cond = await wait_for(refused_condition, 30, what="PodScheduled=False on the refused pod")
    assert cond["status"] == "False"

    # Kueue admits the gated pod: it removes the gate, and shoal places the pod.
    await core.patch_namespaced_pod("sweep-3", namespace, {"spec": {"schedulingGates": None}}, **MERGE)

    async def ungated_bound() -> str | None:
        node: str | None = (await pod(api, namespace, "sweep-3"))["spec"].get("nodeName")
        return node

    assert await wait_for(ungated_bound, 30, what="the ungated pod bound")


async def test_namespace_selector_reads_namespace_labels(
    clean: client.ApiClient, operator: OperatorProcess
) -> None:
    """Anti-affinity against pods of namespaces labelled team=b: the operator watches namespaces."""
    api = clean
    sched = f"s-{uuid.uuid4().hex[:6]}"
    suffix = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"team-a-{suffix}", f"team-b-{suffix}"
    for ns, team in ((ns_a, "a"), (ns_b, "b")):
        await create(
            api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": team}}}
        )
    await create_many(api, [make_node("n1"), make_node("n2")])
    await create(api, make_pod("noisy", namespace=ns_b, node_name="n1", labels={"app": "x"}))
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    # Namespaces arrive on their own watch: a probe that can only be placed once the operator knows
    # that ns_b is team=b (required affinity to app=x pods of team=b namespaces) proves it does.
    probe = make_pod("probe", namespace=ns_a, scheduler_name=sched)
    probe["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "namespaceSelector": {"matchLabels": {"team": "b"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    await create(api, probe)

    async def probe_placed() -> str | None:
        node: str | None = (await pod(api, ns_a, "probe"))["spec"].get("nodeName")
        return node

    assert await wait_for(probe_placed, 30, what="the probe placed next to team b's pod") == "n1"
    picky = make_pod("picky", namespace=ns_a, scheduler_name=sched)
    picky["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "namespaceSelector": {"matchLabels": {"team": "b"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    await create(api, picky)

    async def placed() -> str | None:
        node: str | None = (await pod(api, ns_a, "picky"))["spec"].get("nodeName")
        return node

    assert await wait_for(placed, 30, what="the anti-affine pod bound") == "n2"
