"""DefaultPreemption's API effects, as kube-scheduler 1.37's preemption executor makes them.

For a preemption the plugin decided (:class:`~shoal.plugins.defaultpreemption.evaluator.PreemptionExecutor`),
in
one task that the scheduling cycle does not wait for (upstream's asynchronous preemption):

1. the preemptor's ``status.nominatedNodeName`` (a status patch, as upstream's ``updatePod``),
   carrying the ``PodScheduled=False`` condition of the cycle that preempted when the reporter
   has not written it yet (upstream writes both in one patch; two writes would cost the API
   server one more per preemptor);
2. lower-priority pods nominated to that node lose their nomination;
3. each victim, in parallel: a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``,
   message ``<schedulerName>: preempting to accommodate a higher priority pod``), then a delete
   (default grace period: the kubelet stops it), then a Normal ``Preempted`` event on the victim,
   related to the preemptor, worded as 1.37's: ``Preempted by pod <uid> on node <node>``.

A victim already gone (404) counts as preempted. Every write carries the pod's UID as a
precondition, so a pod recreated under the same name is never touched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from shoal.core.state.objects import PREEMPTION_BY_SCHEDULER, PodInfo
from shoal.kube.rest import RawClient, message_of
from shoal.kube.wire import EVENTS, PODS, STRATEGIC_MERGE_PATCH, micro_time, rfc3339

log = logging.getLogger("shoal.preemption")


def _ref(pod: PodInfo) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}


class KubePreemptionExecutor:
    def __init__(
        self,
        raw: RawClient,
        *,
        instance: str = "shoal",
        claim_condition: Callable[[str], dict[str, Any] | None] = lambda uid: None,
    ) -> None:
        self.raw = raw
        self.instance = instance
        #: the reporter's queued PodScheduled=False condition for a pod, taken to be written with
        #: the preemptor's nomination (``KubeReporter.claim_condition``)
        self.claim_condition = claim_condition
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def preempt(
        self,
        preemptor: PodInfo,
        node: str,
        victims: Sequence[PodInfo],
        unnominate: Sequence[PodInfo],
        done: Callable[[bool], None],
    ) -> None:
        self._spawn(self._preempt(preemptor, node, victims, unnominate, done), f"preempt for {preemptor.key}")

    def nominate(self, pod: PodInfo, node: str) -> None:
        self._spawn(self._nominate(pod, node), f"nominate {pod.key}")

    async def _preempt(
        self,
        preemptor: PodInfo,
        node: str,
        victims: Sequence[PodInfo],
        unnominate: Sequence[PodInfo],
        done: Callable[[bool], None],
    ) -> None:
        ok = False
        try:
            ok = await self._nominate(preemptor, node, claim=True)
            for pod in unnominate:
                await self._nominate(pod, "")
            results = await asyncio.gather(*(self._evict(preemptor, node, v) for v in victims))
            ok = ok and all(results)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning("preemption for %s on %s: %s", preemptor.key, node, exc)
        finally:
            done(ok)

    async def _status_patch(self, pod: PodInfo, status: dict[str, Any]) -> int:
        body = {"metadata": {"uid": pod.uid}, "status": status}
        path = PODS.path(pod.name, namespace=pod.namespace, sub="status")
        code, reply = await self.raw.request("PATCH", path, body, content_type=STRATEGIC_MERGE_PATCH)
        if code >= 300 and code != 404:
            log.warning("patching the status of %s: HTTP %s %s", pod.key, code, message_of(reply)[:300])
        return code

    async def _nominate(self, pod: PodInfo, node: str, *, claim: bool = False) -> bool:
        status: dict[str, Any] = {"nominatedNodeName": node or None}
        condition = self.claim_condition(pod.uid) if claim else None
        if condition is not None:  # the cycle's PodScheduled=False, in the same write (as upstream)
            status["conditions"] = [condition]
        code = await self._status_patch(pod, status)
        return code < 300 or code == 404

    async def _evict(self, preemptor: PodInfo, node: str, victim: PodInfo) -> bool:
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
            "lastTransitionTime": rfc3339(time.time()),
        }
        code = await self._status_patch(victim, {"conditions": [condition]})
        if code == 404:
            return True  # already gone
        if code >= 300:
            return False
        path = PODS.path(victim.name, namespace=victim.namespace)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
        code, reply = await self.raw.request("DELETE", path, body)
        if code == 404:
            return True
        if code >= 300:
            log.warning("deleting %s: HTTP %s %s", victim.key, code, message_of(reply)[:300])
            return False
        log.info("pod %s preempted %s on %s", preemptor.key, victim.key, node)
        await self._event(preemptor, node, victim)
        return True

    async def _event(self, preemptor: PodInfo, node: str, victim: PodInfo) -> None:
        profile = preemptor.scheduler_name
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{victim.name}.{time.time_ns():x}"[:253], "namespace": victim.namespace},
            "eventTime": micro_time(time.time()),
            "reportingController": profile,
            "reportingInstance": f"{profile}-{self.instance}"[:128],
            "action": "Preempting",
            "reason": "Preempted",
            "type": "Normal",
            "note": f"Preempted by pod {preemptor.uid} on node {node}",
            "regarding": _ref(victim),
            "related": _ref(preemptor),
        }
        code, reply = await self.raw.request("POST", EVENTS.path(namespace=victim.namespace), body)
        if code >= 300:
            log.warning("event Preempted for %s: HTTP %s %s", victim.key, code, message_of(reply)[:300])
