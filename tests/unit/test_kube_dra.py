"""DynamicResources' writes on the API server (kube/dra.py), against a recording client: the
finalizer first, then allocation and reservedFor on /status, each guarded by resourceVersion; a
409 is an Error naming the claim."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shoal.core.state.objects import PodInfo
from shoal.kube.dra import KubeClaimWriter
from shoal.kube.rest import RawClient
from shoal.plugins.dynamicresources.objects import ResourceClaimInfo, consumer
from tests.unit.dra_objects import allocated, claim, claim_pod


class Recorder:
    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.calls: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        self.calls.append((method, path, body))
        code = self.codes.pop(0)
        return code, {"metadata": {"resourceVersion": "2"}} if code < 300 else {"message": "conflict"}


def writer(rec: Recorder) -> KubeClaimWriter:
    raw: RawClient = rec  # type: ignore[assignment]
    return KubeClaimWriter(raw)


async def test_allocation_writes_finalizer_then_status_guarded_by_resource_version() -> None:
    rec = Recorder([200, 200])
    mine = ResourceClaimInfo.from_dict(claim("c"))
    held = replace(ResourceClaimInfo.from_dict(allocated(claim("c"), "n1", ["gpu-3"])), allocation_config=())
    pod = PodInfo.from_dict(claim_pod("p", [{"name": "gpu", "resourceClaimName": "c"}]))
    status = await writer(rec).reserve_claim(mine, held, consumer(pod.name, pod.uid))
    assert status.ok
    (m1, p1, b1), (m2, p2, b2) = rec.calls
    assert m2 == "PATCH"
    assert (m1, p1) == ("PATCH", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c")
    assert b1 == {
        "metadata": {"resourceVersion": "1", "finalizers": ["resource.kubernetes.io/delete-protection"]}
    }
    assert p2.endswith("/resourceclaims/c/status")
    assert b2["metadata"] == {"resourceVersion": "2"}  # the version the finalizer write returned
    assert b2["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert b2["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-3"}
    ]
    field = b2["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
    assert field == {"key": "metadata.name", "operator": "In", "values": ["n1"]}


async def test_shared_claim_adds_the_pod_to_the_consumers_and_a_conflict_is_an_error() -> None:
    shared = ResourceClaimInfo.from_dict(allocated(claim("s"), "n1", ["gpu-0"], reserved=("first",)))
    pod = PodInfo.from_dict(claim_pod("p", [{"name": "gpu", "resourceClaimName": "s"}]))
    rec = Recorder([200])
    assert (await writer(rec).reserve_claim(shared, None, consumer(pod.name, pod.uid))).ok
    [(_, path, body)] = rec.calls
    assert path.endswith("/status") and "allocation" not in body["status"]
    assert [c["uid"] for c in body["status"]["reservedFor"]] == ["first", "uid-p"]
    status = await writer(Recorder([409])).reserve_claim(shared, None, consumer(pod.name, pod.uid))
    assert not status.ok and "add reservation to claim default/s: HTTP 409: conflict" in status.message
