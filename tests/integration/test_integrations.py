"""Kubeflow Trainer v2, JobSet and Kueue on the real API server, with pods (and PodGroups) shaped
as those controllers write them (``shoal.testing.integrations``): owner references to a real Job
owned by a JobSet, their labels, annotations, affinity terms, gates and node selectors.

No Trainer, JobSet or Kueue controller runs: each test does, step by step, what the controller
does (create the PodGroup, the Jobs, the pods; admit; ungate) and asserts what shoal does."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.integrations import (
    ANCESTOR_STEP,
    KUEUE_ADMISSION_GATE,
    KUEUE_REQUIRED_TOPOLOGY,
    KUEUE_TOPOLOGY_GATE,
    POD_GROUP_LABEL,
    exclusive_affinity,
    job_pod,
    kueue_admit,
    kueue_pod,
    make_job,
    trainjob_pod_group,
)
from shoal.testing.objects import make_node, make_pod, make_profile

pytestmark = pytest.mark.slow

ZONE = "topology.kubernetes.io/zone"
RACK = "topology.shoal.dev/rack"
MERGE = {"_content_type": "application/merge-patch+json"}


async def start(api: client.ApiClient, nodes: list[dict[str, Any]]) -> str:
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create_many(api, nodes)
    await create(api, make_profile(sched, {**DEFAULT_PROFILE_SPEC}, scheduler_name=sched))
    return sched


async def create_job(api: client.ApiClient, job: dict[str, Any]) -> dict[str, Any]:
    """Create a Job (suspended: no Job controller runs) and return it as the API server stored it."""
    batch: Any = client.BatchV1Api(api)
    resp = await batch.create_namespaced_job(job["metadata"]["namespace"], job, _preload_content=False)
    try:
        created: dict[str, Any] = await resp.json()
        return created
    finally:
        resp.release()


async def pods(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    core: Any = client.CoreV1Api(api)
    return {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, namespace)}


async def placed(api: client.ApiClient, namespace: str, names: list[str]) -> dict[str, str] | None:
    """name -> node once every named pod is bound, else None."""
    got = {n: (await pods(api, namespace))[n]["spec"].get("nodeName") for n in names}
    return got if all(got.values()) else None


async def notes(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    ev: Any = client.EventsV1Api(api)
    return [
        e["note"]
        for e in await list_all(ev.list_namespaced_event, namespace)
        if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == name
    ]


def zone_of(nodes: list[dict[str, Any]]) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}


async def test_trainer_gang_all_or_nothing_with_timeout_zero(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """A TrainJob's JobSet pods and the PodGroup Trainer writes (scheduleTimeoutSeconds 0, meaning
    the default; minResources the sum): nothing binds while the gang does not fit, all of it once
    it does."""
    api = clean
    sched = await start(api, [make_node(f"g{i}", gpus=8) for i in range(3)])
    trainjob_uid = str(uuid.uuid4())
    group = await create(
        api,
        trainjob_pod_group(
            namespace, "llama", trainjob_uid, members=4, per_pod={"nvidia.com/gpu": 8, "cpu": 1}
        ),
    )
    assert group["spec"]["scheduleTimeoutSeconds"] == 0  # the CRD takes Trainer's 0
    job = await create_job(
        api,
        make_job(namespace, "llama", "node", 1, 0, pods=4, template_labels={ANCESTOR_STEP: "trainer"}),
    )
    members = [
        job_pod(job, i, scheduler_name=sched, gpus=8, extra_labels={POD_GROUP_LABEL: "llama"})
        for i in range(4)
    ]
    await create_many(api, members)
    names = [p["metadata"]["name"] for p in members]

    async def refused() -> list[str]:
        return await notes(api, namespace, names[0])

    note = (await wait_for(refused, 30, what="FailedScheduling for the gang that does not fit"))[0]
    assert "pod group" in note and "llama" in note, note
    now = await pods(api, namespace)
    assert not any(now[n]["spec"].get("nodeName") for n in names)

    await create(api, make_node("g3", gpus=8))

    async def gang_bound() -> dict[str, str] | None:
        return await placed(api, namespace, names)

    got = await wait_for(gang_bound, 60, what="the whole TrainJob gang bound once a fourth node exists")
    assert sorted(got.values()) == ["g0", "g1", "g2", "g3"]


async def test_jobset_exclusive_placement_one_domain_per_job(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """JobSet's exclusive placement with its webhook's real terms: each Job's leader in a zone of
    its own (a second JobSet's too), followers pinned by the nodeSelector the webhook writes, and
    a Job with no free zone left refused for the anti-affinity."""
    api = clean
    nodes = [make_node(f"{z}-{i}", zone=z) for z in ("za", "zb", "zc") for i in range(2)]
    sched = await start(api, nodes)
    zones = zone_of(nodes)
    js_uid = {name: str(uuid.uuid4()) for name in ("llama", "gemma", "phi")}
    jobs = [
        await create_job(
            api, make_job(namespace, js, "workers", reps, i, pods=2, exclusive=ZONE, jobset_uid=js_uid[js])
        )
        for js, reps in (("llama", 2), ("gemma", 1))
        for i in range(reps)
    ]
    leaders = []
    for job in jobs:
        leader = job_pod(job, 0, scheduler_name=sched)
        leader["spec"]["affinity"] = exclusive_affinity(leader)
        leaders.append(leader)
    await create_many(api, leaders)
    leader_names = [p["metadata"]["name"] for p in leaders]

    async def leaders_bound() -> dict[str, str] | None:
        return await placed(api, namespace, leader_names)

    got = await wait_for(leaders_bound, 60, what="the three Jobs' leaders bound")
    leader_zone = {name: zones[node] for name, node in got.items()}
    assert len(set(leader_zone.values())) == 3, leader_zone  # one zone per Job, across both JobSets

    # the webhook admits followers once their leader is bound, pinned to its zone
    followers = []
    for job, leader in zip(jobs, leader_names, strict=True):
        followers.append(job_pod(job, 1, scheduler_name=sched, node_selector={ZONE: leader_zone[leader]}))
    await create_many(api, followers)

    async def followers_bound() -> dict[str, str] | None:
        return await placed(api, namespace, [p["metadata"]["name"] for p in followers])

    got_f = await wait_for(followers_bound, 60, what="the followers bound")
    for follower, leader in zip(followers, leader_names, strict=True):
        assert zones[got_f[follower["metadata"]["name"]]] == leader_zone[leader]

    # a third JobSet's Job: every zone holds another Job's pods
    late_job = await create_job(
        api, make_job(namespace, "phi", "workers", 1, 0, pods=2, exclusive=ZONE, jobset_uid=js_uid["phi"])
    )
    late = job_pod(late_job, 0, scheduler_name=sched)
    late["spec"]["affinity"] = exclusive_affinity(late)
    await create(api, late)

    async def late_refused() -> list[str]:
        return await notes(api, namespace, late["metadata"]["name"])

    note = (await wait_for(late_refused, 30, what="the Job without a free zone refused"))[0]
    assert "anti-affinity" in note, note
    assert not (await pods(api, namespace))[late["metadata"]["name"]]["spec"].get("nodeName")


async def test_kueue_gated_pods_wait_quietly_then_follow_kueues_node_selector(
    clean: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """Kueue's gated pods: untouched (no event, no Unschedulable condition) until Kueue lifts the
    gate with its flavor's nodeSelector and tolerations, then placed by them; a TAS pod is placed
    on the domain Kueue's topology ungater writes; the TAS annotation without Kueue's selector is
    refused, naming it."""
    api = clean
    spot_taint = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    nodes = [make_node(f"od-{i}", labels={"flavor": "on-demand"}, rack=f"r{i}") for i in range(2)]
    nodes += [
        make_node(f"spot-{i}", labels={"flavor": "spot"}, taints=[spot_taint], rack="r9") for i in range(2)
    ]
    sched = await start(api, nodes)
    core: Any = client.CoreV1Api(api)
    try:
        await kueue_steps(api, namespace, sched)
    finally:  # Kueue's finalizer: no Kueue here to drop it, and the wipe could not delete the pods
        for name in ("sweep-0", "tas-0"):
            with contextlib.suppress(ApiException):  # not created, if the test failed early
                await core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}}, **MERGE)


async def kueue_steps(api: client.ApiClient, namespace: str, sched: str) -> None:
    core: Any = client.CoreV1Api(api)
    sweep = await create(api, kueue_pod("sweep-0", namespace, scheduler_name=sched))
    tas = await create(
        api, kueue_pod("tas-0", namespace, scheduler_name=sched, topology=(KUEUE_REQUIRED_TOPOLOGY, RACK))
    )
    # a pod created after the gated ones, bound: the operator has seen them and acted (or not)
    await create(api, make_pod("canary", namespace=namespace, scheduler_name=sched))

    async def canary() -> dict[str, str] | None:
        return await placed(api, namespace, ["canary"])

    await wait_for(canary, 30, what="the canary bound")
    now = await pods(api, namespace)
    for name in ("sweep-0", "tas-0"):
        assert not now[name]["spec"].get("nodeName")
        assert await notes(api, namespace, name) == []  # no FailedScheduling for a gated pod
        conds = [c for c in now[name]["status"].get("conditions") or () if c["type"] == "PodScheduled"]
        assert [c["reason"] for c in conds] in ([], ["SchedulingGated"]), conds  # not shoal's Unschedulable

    # Kueue admits sweep-0 on the spot flavor
    toleration = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    patch = kueue_admit(sweep, {"flavor": "spot"}, tolerations=[toleration])
    await core.patch_namespaced_pod("sweep-0", namespace, patch, **MERGE)

    async def sweep_bound() -> dict[str, str] | None:
        return await placed(api, namespace, ["sweep-0"])

    assert (await wait_for(sweep_bound, 30, what="the admitted pod bound"))["sweep-0"].startswith("spot-")

    # TAS: admission lifts the admission gate, the topology gate still holds the pod ...
    await core.patch_namespaced_pod("tas-0", namespace, kueue_admit(tas, {"flavor": "on-demand"}), **MERGE)
    tas_now = (await pods(api, namespace))["tas-0"]
    assert [g["name"] for g in tas_now["spec"]["schedulingGates"]] == [KUEUE_TOPOLOGY_GATE]
    # ... until the topology ungater writes the domain, down to the lowest level (the hostname)
    domain = {RACK: "r1", "kubernetes.io/hostname": "od-1"}
    ungate = kueue_admit(tas_now, domain, gates=(KUEUE_TOPOLOGY_GATE,))
    await core.patch_namespaced_pod("tas-0", namespace, ungate, **MERGE)

    async def tas_bound() -> dict[str, str] | None:
        return await placed(api, namespace, ["tas-0"])

    assert (await wait_for(tas_bound, 30, what="the TAS pod bound"))["tas-0"] == "od-1"
    assert await notes(api, namespace, "tas-0") == []
    assert KUEUE_ADMISSION_GATE not in str(tas_now["spec"].get("schedulingGates"))

    # the TAS annotation on a pod Kueue did not place: refused, naming it
    stray = make_pod(
        "stray", namespace=namespace, scheduler_name=sched, annotations={KUEUE_REQUIRED_TOPOLOGY: RACK}
    )
    await create(api, stray)

    async def stray_refused() -> list[str]:
        return await notes(api, namespace, "stray")

    note = (await wait_for(stray_refused, 30, what="the stray TAS pod refused"))[0]
    assert f"metadata.annotations[{KUEUE_REQUIRED_TOPOLOGY}]" in note and "Kueue assigns" in note, note
