"""Bootstrap profiles on the real API server (``shoal run --bootstrap-profiles``), across restarts:
created when absent, a user's edit kept while the file is unchanged, the file's new spec applied to
a profile shoal made, a profile made by hand never touched, a bad entry or file never fatal."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from shoal.kube.bootstrap import HASH_ANNOTATION, MANAGED_BY_LABEL, spec_hash
from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, create, create_many, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_profile
from tests.integration.conftest import wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

SP = ("shoal.dev", "v1alpha1", "schedulingprofiles")
MERGE = {"_content_type": "application/merge-patch+json"}


async def get(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    custom: Any = client.CustomObjectsApi(api)
    try:
        obj: dict[str, Any] = await custom.get_cluster_custom_object(*SP, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


async def wait_profile(
    api: client.ApiClient, name: str, spec: dict[str, Any], generation: int
) -> dict[str, Any]:
    """``name`` once it has ``spec``, ``generation``, and the operator reports that generation Ready."""

    async def check() -> dict[str, Any] | None:
        obj = await get(api, name)
        if obj is None or obj["spec"] != spec or obj["metadata"]["generation"] != generation:
            return None
        conds = (obj.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        return obj if ready and obj["status"].get("observedGeneration") == generation else None

    result: dict[str, Any] = await wait_for(check, 30, what=f"profile {name} generation {generation} Ready")
    return result


def wait_log(op: OperatorProcess, words: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if words in op.log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{words!r} not logged in {timeout} s:\n{op.tail()}")


def write_file(path: Path, entries: dict[str, dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump([{"name": n, "spec": s} for n, s in entries.items()]))
    return path


def start(cp: ControlPlane, log: Path, path: Path, identity: str) -> OperatorProcess:
    op = OperatorProcess(
        cp.kubeconfig, log, identity=identity, leader_elect=False, extra=["--bootstrap-profiles", str(path)]
    )
    op.start()
    wait_ready(op)
    return op


async def test_created_kept_updated_and_hand_made_left_alone(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    custom: Any = client.CustomObjectsApi(api)
    core: Any = client.CoreV1Api(api)
    u = uuid.uuid4().hex[:6]
    ours, hand, broken = f"boot-{u}", f"hand-{u}", f"broken-{u}"
    v1 = {**DEFAULT_PROFILE_SPEC, "schedulerName": ours}
    hand_spec = {"schedulerName": hand, "percentageOfNodesToScore": 30}
    await create(api, make_profile(hand, hand_spec))  # made by hand, before shoal ever ran
    hand_before = await get(api, hand)
    assert hand_before is not None
    path = tmp_path / "profiles.yaml"
    write_file(
        path,
        {
            ours: v1,
            hand: {"schedulerName": hand, "percentageOfNodesToScore": 90},
            broken: {"schedulerName": broken, "plugins": {"filter": [{"name": "NoSuchPlugin"}]}},
        },
    )
    await create_many(api, [make_node(f"n{i}-{u}", gpus=8) for i in range(2)])

    # 1. absent: created with the label and the file's hash, used for scheduling
    op = start(crds, tmp_path / "op1.log", path, "boot-1")
    try:
        created = await wait_profile(api, ours, v1, 1)
        assert created["metadata"]["labels"] == {MANAGED_BY_LABEL: "shoal"}
        assert created["metadata"]["annotations"] == {HASH_ANNOTATION: spec_hash(v1)}
        await create(api, make_pod("p1", namespace=namespace, gpus=1, scheduler_name=ours))

        async def bound() -> str | None:
            node: str | None = (await core.read_namespaced_pod("p1", namespace)).spec.node_name
            return node

        await wait_for(bound, 30, what="a pod scheduled by the bootstrapped profile")
        wait_log(op, f"bootstrap profile {hand} not applied")
        wait_log(op, f"bootstrap profile {broken} is invalid, skipped")
        assert await get(api, broken) is None
        assert op.alive()
    finally:
        op.stop()

    # 2. a user's edit survives a restart with the same file
    weight = {"plugins": {"score": [{"name": "NodeResourcesFit", "weight": 7}]}}
    await custom.patch_cluster_custom_object(*SP, ours, {"spec": weight}, **MERGE)
    edited = {**v1, **weight}
    op = start(crds, tmp_path / "op2.log", path, "boot-2")
    try:
        wait_log(op, f"bootstrap profile {ours}: hash {spec_hash(v1)} unchanged, left as is")
        kept = await wait_profile(api, ours, edited, 2)  # and the operator schedules with the edit
        assert kept["metadata"]["uid"] == created["metadata"]["uid"]
    finally:
        op.stop()

    # 3. a changed file updates the profile shoal made: the file's spec, in place
    v2 = {**v1, "percentageOfNodesToScore": 50}
    write_file(
        path,
        {ours: v2, hand: {"schedulerName": hand, "percentageOfNodesToScore": 80}},
    )
    op = start(crds, tmp_path / "op3.log", path, "boot-3")
    try:
        updated = await wait_profile(api, ours, v2, 3)  # the user's edit is replaced too
        assert updated["metadata"]["annotations"] == {HASH_ANNOTATION: spec_hash(v2)}
        assert updated["metadata"]["uid"] == created["metadata"]["uid"]  # never deleted
        assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
        wait_log(op, f"bootstrap profile {ours} updated (hash {spec_hash(v1)} -> {spec_hash(v2)})")
        wait_log(op, f"bootstrap profile {hand} not applied")
    finally:
        op.stop()

    # 4. the hand-made profile of the same name was never written, through three leaderships
    hand_after = await get(api, hand)
    assert hand_after is not None
    assert hand_after["spec"] == hand_spec
    assert hand_after["metadata"]["generation"] == hand_before["metadata"]["generation"]
    assert hand_after["metadata"].get("labels") is None
    assert hand_after["metadata"].get("annotations") is None
    assert hand_after["metadata"]["uid"] == hand_before["metadata"]["uid"]


async def test_a_bad_file_is_logged_and_scheduling_goes_on(
    clean: client.ApiClient, namespace: str, crds: ControlPlane, tmp_path: Path
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    sched = f"s-{uuid.uuid4().hex[:6]}"
    await create(api, make_profile(sched, DEFAULT_PROFILE_SPEC, scheduler_name=sched))
    await create(api, make_node(f"n-{sched}", gpus=8))
    path = tmp_path / "profiles.yaml"
    path.write_text("- name: [unclosed\n")
    op = start(crds, tmp_path / "op.log", path, "boot-bad")
    try:
        wait_log(op, "bootstrap profiles not applied")
        await create(api, make_pod("p", namespace=namespace, gpus=1, scheduler_name=sched))

        async def bound() -> str | None:
            node: str | None = (await core.read_namespaced_pod("p", namespace)).spec.node_name
            return node

        await wait_for(bound, 30, what="a pod scheduled with the API's profile")
        assert op.alive()
    finally:
        op.stop()
