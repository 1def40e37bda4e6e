"""``make demo``: shoal scheduling a simulated GPU fleet on a real local control plane.

Starts etcd + kube-apiserver (built from Go modules by ``make cluster-bin``), installs the CRDs,
creates 24 GPU nodes (8-GPU and 4-GPU, with ``gpu-memory-free-gb``, GFD labels, zones and racks, one
tainted), applies the ``gpu-scheduler`` profile, runs ``shoal run`` as a real process, submits a
workload and prints where every pod went and why: two training gangs that prefer one rack, then
one zone (the first fits a rack, the second falls back to a zone), and where each gang went; then
writes the fleet page of that state (build/demo/fleet.html, from the operator's own /fleet data).
Everything is stopped at the end and its work directory (``/tmp/shoal-demo-*``: the control
plane's files, the operator log) removed, unless the demo failed (the logs are kept for the message
that names them); with ``--keep`` (``KEEP=1 make demo``) it keeps running until Ctrl-C, prints the
KUBECONFIG line and keeps the files.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.cluster import OperatorProcess, apply_crds, create, create_many, list_all, wait_for
from shoal.testing.controlplane import Binaries, ControlPlane, ControlPlaneError
from shoal.testing.objects import (
    POD_GROUP_LABEL,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
    make_profile,
)
from shoal.views.page import render

NS = "default"
#: where the demo writes the fleet page of its final state (kept after the demo)
PAGE = Path("build/demo/fleet.html")
INFERENCE_TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}


TOPOLOGY = {"shoal.dev/topology-preferred": "topology.shoal.dev/rack,topology.kubernetes.io/zone"}


def fleet() -> list[dict[str, Any]]:
    """16 A100 nodes in zones a and b, two racks of 4 each per zone; 8 L40S nodes in zone c."""
    nodes = []
    for i in range(16):
        zone = ("zone-a", "zone-b")[i // 8]
        nodes.append(
            make_node(
                f"a100-{i:02d}",
                cpu="96",
                memory="1Ti",
                gpus=8,
                gpu_memory_mib=81920,
                gpu_product="NVIDIA-A100-SXM4-80GB",
                gpu_memory_free_gb=640,
                zone=zone,
                rack=f"{zone}-r{(i // 4) % 2}",
            )
        )
    for i in range(8):
        nodes.append(
            make_node(
                f"l40s-{i:02d}",
                cpu="48",
                memory="384Gi",
                gpus=4,
                gpu_memory_mib=49152,
                gpu_product="NVIDIA-L40S",
                gpu_memory_free_gb=192,
                zone="zone-c",
                rack=f"zone-c-r{i // 4}",
                taints=[INFERENCE_TAINT] if i == 0 else (),
            )
        )
    return nodes


def gang(name: str, members: int, gpus: int, cpu: str, memory: str) -> list[dict[str, Any]]:
    """A training gang that prefers one rack, then one zone (its PodGroup's annotation)."""
    objs = [
        make_pod_group(
            name, namespace=NS, min_member=members, schedule_timeout_seconds=120, annotations=TOPOLOGY
        )
    ]
    for i in range(members):
        objs.append(
            make_pod(
                f"{name}-{i}",
                namespace=NS,
                cpu=cpu,
                memory=memory,
                gpus=gpus,
                pod_group=name,
                priority_class="training",
            )
        )
    return objs


def workload() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [make_priority_class("training", 100)]
    for i in range(12):  # notebooks run on the inference-class GPUs
        objs.append(
            make_pod(
                f"notebook-{i:02d}",
                namespace=NS,
                cpu="4",
                memory="32Gi",
                gpus=1,
                gpu_memory_gb=20,
                node_selector={"nvidia.com/gpu.product": "NVIDIA-L40S"},
            )
        )
    objs += gang("llm-train", 8, 4, "16", "128Gi")  # 32 GPUs: one rack of four 8-GPU nodes holds it
    objs += gang("llm-pretrain", 6, 8, "32", "256Gi")  # 6 whole nodes: no rack holds it, a zone does
    objs.append(make_pod("too-big", namespace=NS, cpu="8", gpus=16))
    for i in range(3):
        objs.append(make_pod(f"web-{i}", namespace=NS, cpu="500m", scheduler_name="default-scheduler"))
    return objs


def gang_notes(events: list[dict[str, Any]]) -> list[str]:
    """Where each gang went, from its members' Scheduled events (the part in parentheses)."""
    notes = set()
    for e in events:
        note = str(e.get("note") or "")
        if e.get("reason") == "Scheduled" and " (pod group " in note:
            notes.add(note[note.index(" (pod group ") + 2 : -1])
    return sorted(notes)


def pod_of(event: dict[str, Any]) -> str:
    """The pod an event is about ("" for events about anything else: the API server itself writes
    some into this namespace, e.g. the ServiceCIDR controller's, with no object name)."""
    ref = event.get("regarding") or {}
    return str(ref.get("name") or "") if ref.get("kind") == "Pod" else ""


def outcomes(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each pod's latest scheduling outcome, ``"<reason>: <note>"``, by the events' ``eventTime``
    (the time of what they report, whatever order they were written in)."""
    last: dict[str, str] = {}
    for e in sorted(events, key=lambda e: e.get("eventTime") or ""):
        if pod_of(e):
            last[pod_of(e)] = f"{e['reason']}: {e['note']}"
    return last


def settled(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> bool:
    """Every gpu-scheduler pod is bound and its ``Scheduled`` event written, or is pending with a
    ``FailedScheduling`` as its latest event. A gang member is settled only when bound: the demo's
    gang fits, and its members report FailedScheduling while they wait for the rest of the gang."""
    why = outcomes(events)
    for p in pods:
        if p["spec"].get("schedulerName") != "gpu-scheduler":
            continue
        if p["spec"].get("nodeName"):
            wanted = "Scheduled: "
        elif POD_GROUP_LABEL in (p["metadata"].get("labels") or {}):
            return False
        else:
            wanted = "FailedScheduling: "
        if not why.get(p["metadata"]["name"], "").startswith(wanted):
            return False
    return True


async def settle(api: client.ApiClient, timeout: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Wait until the workload has :func:`settled`; its pods and events then."""
    core: Any = client.CoreV1Api(api)
    events: Any = client.EventsV1Api(api)

    async def done() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        pods = await list_all(core.list_namespaced_pod, NS)
        evs = await list_all(events.list_namespaced_event, NS)
        return (pods, evs) if settled(pods, evs) else None

    return await wait_for(done, timeout, interval=0.5, what="the workload to settle")


def table(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    last = outcomes(events)
    rows = [("POD", "SCHEDULER", "NODE", "WHY")]
    for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name = p["metadata"]["name"]
        node = p["spec"].get("nodeName") or "<pending>"
        why = last.get(name, "left alone (another scheduler's pod)")
        if why.startswith("Scheduled: "):
            why = "Scheduled"
        rows.append((name, p["spec"]["schedulerName"], node, why))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows]
    notes = gang_notes(events)
    return "\n".join(lines + (["", "GANGS", *notes] if notes else []))


async def run_demo(cp: ControlPlane, workdir: Path, keep: bool, page_path: Path = PAGE) -> int:
    api = await config.new_client_from_config(config_file=str(cp.kubeconfig))
    try:
        print("shoal demo: installing CRDs, 24 GPU nodes (zones, racks) and the gpu-scheduler profile")
        await apply_crds(api)
        await create_many(api, fleet())
        await create(api, make_profile("gpu-scheduler", DEFAULT_PROFILE_SPEC))
        with OperatorProcess(
            cp.kubeconfig, workdir / "shoal.log", identity="shoal-demo", extra=["--web"]
        ) as op:
            print(f"shoal demo: started `shoal run` (pid {op.pid}, metrics on 127.0.0.1:{op.metrics_port})")
            await asyncio.sleep(1.0)
            began = time.monotonic()
            print(
                "shoal demo: submitting 12 notebooks, two training gangs (8 and 6 pods), "
                "a 16-GPU pod, 3 web pods"
            )
            objs = workload()
            await create(api, objs[0])  # the PriorityClass first: admission resolves it for the gang
            await create_many(api, objs[1:])
            pods, events = await settle(api, 60)
            print(f"shoal demo: settled in {time.monotonic() - began:.1f} s\n")
            print(table(pods, events))
            page = save_page(await fleet_data(op.metrics_port), page_path)
            print(f"\nshoal demo: the fleet page of this state (open it in a browser): {page}")
            if keep:
                print(f"  live while the demo runs: http://127.0.0.1:{op.metrics_port}/fleet")
            if keep:
                print(f"\nshoal demo: still running; in another shell:\n  export KUBECONFIG={cp.kubeconfig}")
                print("  (Ctrl-C here stops the operator and the control plane)")
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
    finally:
        await api.close()
    return 0


async def fleet_data(port: int) -> dict[str, Any]:
    """The operator's own fleet document: ``/fleet/data.json`` on its plain-HTTP port (what its
    cache holds)."""
    url = f"http://127.0.0.1:{port}/fleet/data.json"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        doc: dict[str, Any] = await resp.json()
    return doc


def save_page(doc: dict[str, Any], path: Path) -> Path:
    """``doc`` drawn as the offline fleet page, into ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(doc), encoding="utf-8")
    return path.resolve()


def demo(workdir: Path, keep: bool, page: Path = PAGE) -> int:
    """Start the control plane in ``workdir``, run the demo, stop the control plane."""
    cp = ControlPlane(workdir=workdir / "cluster", keep_workdir=keep)
    print("shoal demo: starting etcd + kube-apiserver on loopback")
    try:
        cp.start()
    except ControlPlaneError as exc:
        print(f"shoal demo: {exc}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(run_demo(cp, workdir, keep, page))
    except TimeoutError as exc:
        print(f"shoal demo: {exc}; operator log: {workdir / 'shoal.log'}", file=sys.stderr)
        return 1
    finally:
        cp.stop()
        print("shoal demo: control plane stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.demo")
    parser.add_argument("--keep", action="store_true", help="keep running until Ctrl-C, and keep the files")
    parser.add_argument(
        "--page", type=Path, default=PAGE, help=f"where to write the fleet page of the final state ({PAGE})"
    )
    args = parser.parse_args(argv)
    missing = Binaries.locate().missing()
    if missing:
        print(f"shoal demo: missing binaries {missing}; run `make cluster-bin`", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="shoal-demo-"))
    failed = True  # until demo() returns 0; a failure keeps the logs its message points at
    try:
        code = demo(workdir, args.keep, args.page)
        failed = code != 0
        return code
    except KeyboardInterrupt:
        failed = False
        raise
    finally:
        if args.keep or failed:
            print(f"shoal demo: files kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
