"""The "null scheduler" of ``make bench``: binds every pending pod of its scheduler name to the next
node, round-robin, deciding nothing, over shoal's own HTTP stack (``RawClient`` and
``post_binding``, 64 bindings in flight as shoal's binder). What it reaches in pods/s is the ceiling
the API server and etcd put on any scheduler on this machine (issue 17): a scheduler's pods/s is
reported as a fraction of it.

Run as its own process (so its CPU is its own, as a scheduler's is)::

    python -m bench.nullscheduler --kubeconfig K [--scheduler-name null-scheduler] [--ready FILE] [--events]

``--events``: after each binding, also post the ``Scheduled`` event (events.k8s.io/v1, shaped as
shoal's and kube-scheduler's) that every real scheduler writes per pod: the ceiling of a scheduler
that reports as kube-scheduler does, the API server's share of the work being one write more per pod.

It lists the nodes once, lists the pending pods, then watches from the list's resourceVersion;
``--ready FILE`` is written once it is watching.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kubernetes_asyncio import config

from shoal.kube.binder import post_binding
from shoal.kube.reporter import event_body
from shoal.kube.rest import RawClient
from shoal.kube.wire import EVENTS

NAME = "null-scheduler"


async def _list(raw: RawClient, path: str) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        sep = "&" if "?" in path else "?"
        code, body = await raw.request(
            "GET", f"{path}{sep}limit=5000" + (f"&continue={token}" if token else "")
        )
        if code >= 300:
            raise RuntimeError(f"GET {path}: HTTP {code}")
        items += body.get("items") or []
        token = (body.get("metadata") or {}).get("continue") or ""
        if not token:
            return items, str(body["metadata"]["resourceVersion"])


async def run(
    kubeconfig: str, scheduler_name: str, ready: Path | None, concurrency: int = 64, events: bool = False
) -> None:
    api = await config.new_client_from_config(config_file=kubeconfig)
    raw = RawClient(api)
    nodes, _ = await _list(raw, "/api/v1/nodes")
    targets = itertools.cycle(sorted(n["metadata"]["name"] for n in nodes))
    selector = quote(f"spec.schedulerName={scheduler_name},spec.nodeName=")
    pending: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
    seen: set[str] = set()

    def offer(pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta["uid"] not in seen and not meta.get("deletionTimestamp"):
            seen.add(meta["uid"])
            pending.put_nowait((meta["namespace"], meta["name"], meta["uid"]))

    async def binder() -> None:
        while True:
            namespace, name, uid = await pending.get()
            node = next(targets)
            for _ in range(3):
                code, _message = await post_binding(raw, namespace, name, uid, node)
                if code < 300 or code in (404, 409):
                    break
            if events and code < 300:
                note = f"Successfully assigned {namespace}/{name} to {node}"
                body = event_body(
                    namespace,
                    name,
                    uid,
                    controller=scheduler_name,
                    instance=f"{scheduler_name}-null",
                    kind="Normal",
                    reason="Scheduled",
                    action="Binding",
                    note=note,
                    when=time.time(),
                )
                await raw.request("POST", EVENTS.path(namespace=namespace), body)

    workers = [asyncio.create_task(binder()) for _ in range(concurrency)]
    pods, version = await _list(raw, f"/api/v1/pods?fieldSelector={selector}")
    for pod in pods:
        offer(pod)
    if ready is not None:
        await asyncio.to_thread(ready.write_text, "watching\n")
    try:
        while True:
            path = f"/api/v1/pods?watch=1&fieldSelector={selector}&resourceVersion={version}"
            async for event in raw.stream(path, timeout=3600):
                obj = event.get("object") or {}
                if event.get("type") == "ADDED":
                    offer(obj)
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
    finally:
        for worker in workers:
            worker.cancel()
        await api.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.nullscheduler", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default=NAME)
    parser.add_argument("--ready", type=Path, help="file written once the scheduler watches")
    parser.add_argument("--events", action="store_true", help="also post a Scheduled event per pod")
    args = parser.parse_args()
    asyncio.run(run(args.kubeconfig, args.scheduler_name, args.ready, events=args.events))


if __name__ == "__main__":
    main()
