"""VolumeBinding's writes (its port: plugins/volumebinding/ports.py) on the API server, as
kube-scheduler's volume binder writes them: a PV's ``claimRef`` for a static match, a claim's
``volume.kubernetes.io/selected-node`` for provisioning. Each is one merge patch carrying the
resourceVersion the scheduler read (kube-scheduler sends an update of the object it read: the same
optimistic concurrency, so a PV someone else bound meanwhile is a 409, never overwritten).
"""

from __future__ import annotations

import aiohttp

from shoal.core.state.status import Status
from shoal.kube.rest import RawClient, message_of
from shoal.kube.wire import MERGE_PATCH, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from shoal.plugins.volumebinding.objects import BOUND_BY_CONTROLLER, SELECTED_NODE, PVCInfo, PVInfo


class KubeVolumeWriter:
    def __init__(self, raw: RawClient) -> None:
        self.raw = raw

    async def bind_volume(self, pv: PVInfo, claim: PVCInfo) -> Status:
        ref = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
            "resourceVersion": claim.resource_version,
        }
        meta = {"resourceVersion": pv.resource_version, "annotations": {BOUND_BY_CONTROLLER: "yes"}}
        body = {"metadata": meta, "spec": {"claimRef": ref}}
        return await self._patch(PERSISTENT_VOLUMES.path(pv.name), body, f"persistentvolume {pv.name}")

    async def select_node(self, claim: PVCInfo, node: str) -> Status:
        meta = {"resourceVersion": claim.resource_version, "annotations": {SELECTED_NODE: node}}
        path = PERSISTENT_VOLUME_CLAIMS.path(claim.name, namespace=claim.namespace)
        return await self._patch(path, {"metadata": meta}, f"persistentvolumeclaim {claim.key}")

    async def _patch(self, path: str, body: dict[str, object], what: str) -> Status:
        try:
            code, reply = await self.raw.request("PATCH", path, body, content_type=MERGE_PATCH)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Status.error(f"binding volumes: updating {what}: {exc}")
        if code >= 300:
            return Status.error(f"binding volumes: updating {what}: HTTP {code}: {message_of(reply)}")
        return Status()
