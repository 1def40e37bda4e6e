"""More DRA scenarios of ``make bench``, shoal and kube-scheduler side by side: three shaped after
kube-scheduler 1.37.2's scheduler_perf DRA workloads (test/integration/scheduler_perf/dra/), and
one gang kube-scheduler cannot place.

* ``dra_extended``: its ExtendedResource ``Explicit_25classes_5000pods_500nodes`` (threshold 120
  pods/s upstream). 500 nodes, each with one ResourceSlice of 10 devices of its test driver
  (``test-driver.cdi.k8s.io``, the attributes of its resourceslice-basic-devices template); 25
  DeviceClasses ``test-class-<i>`` selecting the driver, each with ``extendedResourceName:
  example.com/gpu-<i>``; 5,000 pods, pod ``i`` asking ``example.com/gpu-<i mod 25>: 1`` in requests
  and limits (no other request), so the cluster's 5,000 devices end all taken. Nodes list no
  ``example.com/gpu-*`` in their allocatable and there is no claim template: the scheduler makes
  each pod's claim itself (annotated ``resource.kubernetes.io/extended-resource-claim``, the pod its
  owner), so no resourceclaim controller runs. Upstream creates 2,500 pods first and measures
  2,500 more; here all 5,000 are created at once and measured.
* ``dra_partitionable``: its Partitionable workload (the ``performance`` ones: 500 or 1,000 nodes,
  empty, half or full): per node one pool of two ResourceSlices, one with the shared counters
  and one with devices consuming them. Here the devices are MIG partitions of 4 A100-SXM4-80GB
  per node (``gpu.nvidia.com``, as bench/e2e_dra.py): per GPU a counter set (multiprocessors 98,
  memory 80Gi, memory slices 0..7) and 15 devices (the whole GPU, 7 x 1g.10gb, 3 x 2g.20gb, 2 x
  3g.40gb, 4g.40gb, 7g.80gb at their placements). Pods take, in turn, a 1g.10gb, a 2g.20gb and a
  3g.40gb MIG device through one of three ResourceClaimTemplates (a CEL selector on the profile),
  so allocations of different profiles compete for the same counters (upstream's claim of two
  disjoint devices never does); 1,000 nodes and 5,000 pods created at once (upstream: up to 990
  claims allocated first, then 10 pods in a steady state for 10 s).
* ``dra_shared``: its ConsumableCapacity workload (same node counts): per node one ResourceSlice of
  4 shareable devices (``allowMultipleAllocations``) with a capacity ``requestPolicy``, and a
  template asking two of them with distinct ``index`` and a share of capacity on each. Here the
  devices are GPUs of 80Gi memory (upstream: 10G of bandwidth) and each share 20Gi (upstream:
  2500M), so 8 pods fit a node as upstream; 1,000 nodes and 5,000 pods created at once.
* ``dra_gang`` (kubernetes/kubernetes#138765): 50 nodes, each with one MIG-partitionable A100 (a
  pool of two slices as ``dra_partitionable``'s, one GPU), the DeviceClass ``gpu.nvidia.com``
  (every device of the driver, the whole GPU too) and, per node, a native gang of two
  (``scheduling.k8s.io/v1beta1`` PodGroup, ``gang.minCount`` 2, for both schedulers) pinned to it
  by ``nodeSelector``: ``gang-<i>-first``'s claim (template ``greedy``) asks through
  ``firstAvailable`` the whole GPU, else a 3g.40gb; ``gang-<i>-second``'s (template ``half``) a
  3g.40gb. The GPU holds two 3g.40gb, so every gang fits its node if its first member takes a
  half; a scheduler allocating member by member gives it the whole GPU and has nothing left for
  the second (kube-scheduler 1.37: no gang placed). Every first member is created before any
  second (upstream queues by creation time: the first member is tried first). Measured: gangs placed (both members bound), refused (a
  member marked ``PodScheduled=False``, Unschedulable) and undecided after 300 s, and the seconds
  from the first pod created to the last gang decided; checked: each placed gang's members hold
  two different 3g.40gb of its node.

The partitionable, shared and gang ones use templates, so kube-controller-manager's resourceclaim
controller makes the claims (bench/e2e.py starts it as for ``dra``). The first three are measured
as ``dra``: pods bound per second, first created to last bound (``<scenario>_ratio`` = shoal ÷
kube-scheduler); checked: every bound pod's claim allocated on its node, no bound pod without one,
no device (or share) twice, and for partitionable and shared no counter nor shared capacity
overdrawn (so for the gangs too).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from kubernetes_asyncio import client

from bench.e2e_dra import API, GPU, GROUP, VERSION, Usage, check, measure
from bench.e2e_workloads import scheduler_perf_node
from bench.harness import Harness
from shoal.core.state.quantity import parse_quantity
from shoal.testing.cluster import list_all
from shoal.testing.objects import make_native_pod_group

PAUSE = "registry.k8s.io/pause:3.10"


def node_names(nodes: int) -> list[str]:
    """Node ``i``'s name; each node's pool is named after it (what ``e2e_dra.check`` compares)."""
    return [f"node-{i:05d}" for i in range(nodes)]


def node_slice(node: str, name: str, count: int, body: dict[str, Any]) -> dict[str, Any]:
    """One ResourceSlice of ``node``'s pool of ``count`` slices, its spec ``body`` (devices or counters)."""
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
            **body,
        },
    }


def device_class(name: str, expression: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def template_pods(
    count: int, namespace: str, scheduler_name: str, prefix: str, template_of: Callable[[int], str]
) -> list[dict[str, Any]]:
    """scheduler_perf's pod-with-claim-template: one pause container using the claim ``resource``
    made from the template ``template_of(i)``; no cpu or memory request."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i:06d}", "namespace": namespace},
            "spec": {
                "schedulerName": scheduler_name,
                "containers": [
                    {"name": "pause", "image": PAUSE, "resources": {"claims": [{"name": "resource"}]}}
                ],
                "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": template_of(i)}],
            },
        }
        for i in range(count)
    ]


# -- dra_extended: scheduler_perf's ExtendedResource ---------------------------------------------
TEST_DRIVER = "test-driver.cdi.k8s.io"
EXTENDED_NODES, EXTENDED_PODS = 500, 5000
EXTENDED_CLASSES, EXTENDED_DEVICES = 25, 10
EXTENDED_RESOURCE = "example.com/gpu"


def basic_device(i: int, pci_roots: int = 2) -> dict[str, Any]:
    """Device ``i`` of scheduler_perf's resourceslice-basic-devices template (an Intel GPU's attributes)."""
    root = i % pci_roots
    return {
        "name": f"basic-device-{i}",
        "attributes": {
            "driver": {"string": "xe"},
            "driverVersion": {"version": "1.2.3"},
            "resource.k8s.io/pciRoot": {"string": str(root)},
            "family": {"string": "Arc Pro B-Series"},
            "health": {"string": "Healthy"},
            "model": {"string": "B60"},
            "pciAddress": {"string": f"0000:0{i}:00.0"},
            "pciId": {"string": "0xe211"},
            "pciRoot": {"string": f"0{root}"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:0{i}:00.0"},
            "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"},
            "sriov": {"bool": True},
            "type": {"string": "gpu"},
        },
        "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
    }


def extended_objects(
    nodes: int = EXTENDED_NODES, classes: int = EXTENDED_CLASSES, devices: int = EXTENDED_DEVICES
) -> list[dict[str, Any]]:
    """The DeviceClasses, the nodes and their slices (created before the scheduler)."""
    selector = f'device.driver == "{TEST_DRIVER}"'
    out = [device_class(f"test-class-{i}", selector, f"{EXTENDED_RESOURCE}-{i}") for i in range(classes)]
    names = node_names(nodes)
    out += [scheduler_perf_node(n) for n in names]
    body = {"driver": TEST_DRIVER, "devices": [basic_device(i) for i in range(devices)]}
    return out + [node_slice(n, f"{n}-devices", 1, body) for n in names]


def extended_pods(
    count: int, namespace: str, scheduler_name: str, classes: int = EXTENDED_CLASSES
) -> list[dict[str, Any]]:
    """scheduler_perf's pod-with-extended-resource: ``example.com/gpu-<i mod classes>: 1``."""
    out = []
    for i in range(count):
        amount = {f"{EXTENDED_RESOURCE}-{i % classes}": "1"}
        container = {"name": "pause", "image": PAUSE, "resources": {"requests": amount, "limits": amount}}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"ext-{i:06d}", "namespace": namespace},
                "spec": {"schedulerName": scheduler_name, "containers": [container]},
            }
        )
    return out


async def run_extended(
    b: Harness, api: client.ApiClient, namespace: str, pods: int, timeout: float
) -> dict[str, Any]:
    objs = extended_pods(pods, namespace, b.scheduler_name)
    got = await measure(b, api, namespace, objs, timeout, "dra_extended", extended=True)
    return {"classes": EXTENDED_CLASSES, "devices_per_node": EXTENDED_DEVICES, **got}


# -- dra_partitionable: scheduler_perf's Partitionable, as MIG partitions ------------------------
PARTITIONABLE_NODES, PARTITIONABLE_PODS = 1000, 5000
MIG_CLASS = "mig.nvidia.com"
MIG_GPUS = 4
A100 = "NVIDIA A100-SXM4-80GB"
#: A100-SXM4-80GB's MIG profiles: name -> (multiprocessors, memory, memory slices, placements:
#: the first memory slice of each). ``gpu``: the whole GPU (no MIG), taking all of it.
MIG_PROFILES: dict[str, tuple[int, str, int, tuple[int, ...]]] = {
    "gpu": (98, "80Gi", 8, (0,)),
    "1g.10gb": (14, "10Gi", 1, (0, 1, 2, 3, 4, 5, 6)),
    "2g.20gb": (28, "20Gi", 2, (0, 2, 4)),
    "3g.40gb": (42, "40Gi", 4, (0, 4)),
    "4g.40gb": (56, "40Gi", 4, (0,)),
    "7g.80gb": (98, "80Gi", 8, (0,)),
}
#: the profiles pods ask for, in turn. Each placement of these lies in one half of the GPU's memory
#: slices (0-3 or 4-7) and a free half hosts any of them within the counters, so the pods fit
#: whatever the allocator's choices as long as there are no more than halves (8 a node).
MIG_ASKED = ("1g.10gb", "2g.20gb", "3g.40gb")
MIG_PODS_PER_NODE = 2 * MIG_GPUS


def counter_set(gpu: int) -> str:
    return f"gpu-{gpu}-counter-set"


def gpu_counters() -> dict[str, str]:
    mp, memory, slices, _ = MIG_PROFILES["gpu"]
    return {"multiprocessors": str(mp), "memory": memory, **{f"memory-slice-{k}": "1" for k in range(slices)}}


def mig_template(profile: str) -> str:
    return "mig-" + profile.replace(".", "-")


def mig_devices(gpu: int) -> list[dict[str, Any]]:
    """The whole GPU and every MIG placement of it, each consuming its share of the GPU's counters."""
    out = []
    for profile, (mp, memory, slices, starts) in MIG_PROFILES.items():
        for start in starts:
            whole = profile == "gpu"
            name = f"gpu-{gpu}" if whole else f"gpu-{gpu}-mig-{profile.replace('.', '-')}-{start}"
            counters = {"multiprocessors": str(mp), "memory": memory}
            counters |= {f"memory-slice-{k}": "1" for k in range(start, start + slices)}
            attributes: dict[str, Any] = {
                "type": {"string": "gpu" if whole else "mig"},
                "productName": {"string": A100},
                "uuid": {"string": f"GPU-{gpu}" if whole else f"MIG-{gpu}-{profile}-{start}"},
            }
            if whole:
                attributes["index"] = {"int": gpu}
            else:
                attributes |= {
                    "profile": {"string": profile},
                    "parentIndex": {"int": gpu},
                    "placementStart": {"int": start},
                    "placementSize": {"int": slices},
                }
            out.append(
                {
                    "name": name,
                    "attributes": attributes,
                    "capacity": {"multiprocessors": {"value": str(mp)}, "memory": {"value": memory}},
                    "consumesCounters": [
                        {
                            "counterSet": counter_set(gpu),
                            "counters": {k: {"value": v} for k, v in counters.items()},
                        }
                    ],
                }
            )
    return out


def partitionable_objects(nodes: int, namespace: str, gpus: int = MIG_GPUS) -> list[dict[str, Any]]:
    """The DeviceClass, the three templates, the nodes and each node's pool of two slices."""
    cls = device_class(MIG_CLASS, f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "mig"')
    templates = [
        {
            "apiVersion": API,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": mig_template(p), "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "mig",
                                "exactly": {
                                    "deviceClassName": MIG_CLASS,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.attributes["{GPU}"].profile == "{p}"'
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                }
            },
        }
        for p in MIG_ASKED
    ]
    names = node_names(nodes)
    return [cls, *templates, *(scheduler_perf_node(n) for n in names), *mig_slices(names, gpus)]


def mig_slices(names: list[str], gpus: int) -> list[dict[str, Any]]:
    """Each node's pool of two slices: the counters of its ``gpus`` GPUs, and their devices."""
    counters = {
        "driver": GPU,
        "sharedCounters": [
            {"name": counter_set(g), "counters": {k: {"value": v} for k, v in gpu_counters().items()}}
            for g in range(gpus)
        ],
    }
    devices = {"driver": GPU, "devices": [d for g in range(gpus) for d in mig_devices(g)]}
    slices = [node_slice(n, f"{n}-counters", 2, counters) for n in names]
    return slices + [node_slice(n, f"{n}-devices", 2, devices) for n in names]


def mig_budget(gpus: int = MIG_GPUS) -> tuple[Usage, dict[str, Decimal]]:
    """What an allocated MIG device takes of its pool's counters, and the counters there are."""
    takes = {
        d["name"]: {
            f"{c['counterSet']}/{k}": parse_quantity(v["value"])
            for c in d["consumesCounters"]
            for k, v in c["counters"].items()
        }
        for g in range(gpus)
        for d in mig_devices(g)
    }
    limits = {
        f"{counter_set(g)}/{k}": parse_quantity(v) for g in range(gpus) for k, v in gpu_counters().items()
    }

    def usage(result: Any) -> dict[str, Decimal]:
        return takes.get(result["device"], {})

    return usage, limits


async def run_partitionable(
    b: Harness, api: client.ApiClient, namespace: str, pods: int, timeout: float
) -> dict[str, Any]:
    objs = template_pods(
        pods, namespace, b.scheduler_name, "mig", lambda i: mig_template(MIG_ASKED[i % len(MIG_ASKED)])
    )
    usage, limits = mig_budget()
    got = await measure(b, api, namespace, objs, timeout, "dra_partitionable", usage=usage, limits=limits)
    return {"gpus_per_node": MIG_GPUS, "profiles": list(MIG_ASKED), **got}


# -- dra_shared: scheduler_perf's ConsumableCapacity, as GPUs shared by memory -----------------------
SHARED_NODES, SHARED_PODS = 1000, 5000
SHARED_CLASS = "shared-gpu.nvidia.com"
SHARED_TEMPLATE = "two-gpu-shares"
SHARED_GPUS, SHARED_MEMORY, SHARE = 4, "80Gi", "20Gi"
#: 8 pods fill a node (4 GPUs x 4 shares, 2 shares a pod); 6 fit it whatever the allocator chose
#: (after 6 pods three GPUs may be full, the fourth untouched: the next pod needs two GPUs)
SHARED_PODS_PER_NODE = 6


def shared_devices(gpus: int = SHARED_GPUS) -> list[dict[str, Any]]:
    return [
        {
            "name": f"gpu-{g}",
            "allowMultipleAllocations": True,
            "attributes": {
                "index": {"int": g},
                "productName": {"string": A100},
                "uuid": {"string": f"GPU-{g}"},
            },
            "capacity": {
                "memory": {
                    "value": SHARED_MEMORY,
                    "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
                }
            },
        }
        for g in range(gpus)
    ]


def shared_objects(nodes: int, namespace: str) -> list[dict[str, Any]]:
    """The DeviceClass, the template (two shares on distinct GPUs), the nodes and their slices."""
    cls = device_class(SHARED_CLASS, f'device.driver == "{GPU}" && device.allowMultipleAllocations == true')
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": SHARED_CLASS, "count": 2, "capacity": {"requests": {"memory": SHARE}}},
    }
    template = {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": SHARED_TEMPLATE, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [request],
                    "constraints": [{"requests": ["gpu"], "distinctAttribute": f"{GPU}/index"}],
                }
            }
        },
    }
    names = node_names(nodes)
    body = {"driver": GPU, "devices": shared_devices()}
    return [cls, template, *(scheduler_perf_node(n) for n in names)] + [
        node_slice(n, f"{n}-gpus", 1, body) for n in names
    ]


def shared_budget() -> tuple[Usage, dict[str, Decimal]]:
    """What a share takes of its GPU's capacity (its ``consumedCapacity``), and the capacity there is."""

    def usage(result: Any) -> dict[str, Decimal]:
        consumed = result.get("consumedCapacity") or {}
        return {f"{result['device']}/{k}": parse_quantity(v) for k, v in consumed.items()}

    return usage, {f"gpu-{g}/memory": parse_quantity(SHARED_MEMORY) for g in range(SHARED_GPUS)}


async def run_shared(
    b: Harness, api: client.ApiClient, namespace: str, pods: int, timeout: float
) -> dict[str, Any]:
    objs = template_pods(pods, namespace, b.scheduler_name, "share", lambda i: SHARED_TEMPLATE)
    usage, limits = shared_budget()
    got = await measure(b, api, namespace, objs, timeout, "dra_shared", usage=usage, limits=limits)
    return {"gpus_per_node": SHARED_GPUS, "memory": SHARED_MEMORY, "share": SHARE, **got}


# -- dra_gang: a gang whose first member would starve the second (kubernetes/kubernetes#138765) ---
GANG_NODES = 50
GANG_TIMEOUT_S = 300.0
#: seconds between two looks at the pods while the gangs are being decided
GANG_POLL_S = 0.5
HALF = "3g.40gb"
#: a gang's members in the order they are created, each with its claim's template: ``greedy`` asks
#: the whole GPU, else a half (``firstAvailable``); ``half`` a half
GANG_MEMBERS = (("first", "greedy"), ("second", "half"))


def gang_name(i: int) -> str:
    return f"gang-{i}"


def gang_member(i: int, member: str) -> str:
    return f"{gang_name(i)}-{member}"


def claim_template(name: str, namespace: str, request: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def gang_objects(nodes: int, namespace: str) -> list[dict[str, Any]]:
    """The DeviceClass (every device of the driver: whole GPUs and MIG partitions alike), the
    templates ``greedy`` and ``half``, the nodes, each node's pool of two slices for one GPU, and
    one native PodGroup of two a node (``gang-<i>``, for node ``i``)."""
    attr = f'device.attributes["{GPU}"]'
    whole = [{"cel": {"expression": f'{attr}.type == "gpu"'}}]
    half = [{"cel": {"expression": f'{attr}.type == "mig" && {attr}.profile == "{HALF}"'}}]
    requests: dict[str, dict[str, Any]] = {
        "greedy": {
            "name": "gpu",
            "firstAvailable": [
                {"name": "whole", "deviceClassName": GPU, "selectors": whole},
                {"name": "half", "deviceClassName": GPU, "selectors": half},
            ],
        },
        "half": {"name": "gpu", "exactly": {"deviceClassName": GPU, "selectors": half}},
    }
    templates = [claim_template(name, namespace, request) for name, request in requests.items()]
    names = node_names(nodes)
    groups = [
        make_native_pod_group(gang_name(i), namespace=namespace, min_count=len(GANG_MEMBERS))
        for i in range(nodes)
    ]
    cls = device_class(GPU, f'device.driver == "{GPU}"')
    return [cls, *templates, *(scheduler_perf_node(n) for n in names), *mig_slices(names, 1), *groups]


def gang_pods(gangs: int, namespace: str, scheduler_name: str) -> list[list[dict[str, Any]]]:
    """Per member, first then second, every gang's pod: gang ``i``'s pinned to node ``i`` (a GPU
    of its own), linked to its PodGroup, one pause container using the claim ``gpu`` made from
    the member's template."""
    names = node_names(gangs)
    return [
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": gang_member(i, member), "namespace": namespace},
                "spec": {
                    "schedulerName": scheduler_name,
                    "schedulingGroup": {"podGroupName": gang_name(i)},
                    "nodeSelector": {"kubernetes.io/hostname": names[i]},
                    "containers": [
                        {"name": "pause", "image": PAUSE, "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                },
            }
            for i in range(gangs)
        ]
        for member, template in GANG_MEMBERS
    ]


def unschedulable(pod: dict[str, Any]) -> bool:
    """The scheduler marked the pod unschedulable (``PodScheduled=False``, reason Unschedulable)."""
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


async def gang_outcomes(
    api: client.ApiClient, namespace: str, gangs: int, began: float, timeout: float
) -> dict[int, tuple[str, float]]:
    """Gang -> ("placed" (both members bound) or "refused" (a member marked unschedulable), when
    first seen so), from the pods listed every ``GANG_POLL_S`` until every gang is one or the other
    or ``timeout`` has passed since ``began``. A gang is looked at anew on each listing (one seen
    refused and later bound counts placed); undecided gangs are absent."""
    core: Any = client.CoreV1Api(api)
    seen: dict[int, tuple[str, float]] = {}
    last_print = 0.0
    while True:
        pods = {p["metadata"]["name"]: p for p in await list_all(core.list_namespaced_pod, namespace)}
        now = time.monotonic()
        for i in range(gangs):
            members = [pods.get(gang_member(i, m)) for m, _ in GANG_MEMBERS]
            if all(p is not None and p["spec"].get("nodeName") for p in members):
                state = "placed"
            elif any(p is not None and unschedulable(p) for p in members):
                state = "refused"
            else:
                seen.pop(i, None)
                continue
            if i not in seen or seen[i][0] != state:
                seen[i] = (state, now)
        placed = sum(1 for state, _ in seen.values() if state == "placed")
        if now - last_print >= 2:
            print(
                f"    [dra_gang] placed {placed:,}, refused {len(seen) - placed:,} of {gangs:,}", flush=True
            )
            last_print = now
        if len(seen) == gangs or now - began >= timeout:
            return seen
        await asyncio.sleep(GANG_POLL_S)


async def claim_devices(api: client.ApiClient, namespace: str) -> dict[str, list[tuple[str, str]]]:
    """Pod -> the (pool, device) of every allocation result of the claims it owns."""
    custom: Any = client.CustomObjectsApi(api)
    claims = await list_all(custom.list_namespaced_custom_object, GROUP, VERSION, namespace, "resourceclaims")
    out: dict[str, list[tuple[str, str]]] = {}
    for c in claims:
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or ()
        for o in c["metadata"].get("ownerReferences") or ():
            if o.get("kind") == "Pod":
                out.setdefault(o["name"], []).extend((r["pool"], r["device"]) for r in results)
    return out


def gang_misallocated(placed: list[int], gangs: int, held: dict[str, list[tuple[str, str]]]) -> int:
    """Placed gangs whose members do not hold one 3g.40gb each, two different ones, of the gang's node."""
    halves = {d["name"] for d in mig_devices(0) if d["attributes"].get("profile") == {"string": HALF}}
    names = node_names(gangs)
    bad = 0
    for i in placed:
        got = [held.get(gang_member(i, m), []) for m, _ in GANG_MEMBERS]
        devices = [d for member in got for d in member]
        ok = all(len(member) == 1 for member in got) and len(set(devices)) == len(devices)
        bad += not (ok and all(pool == names[i] and device in halves for pool, device in devices))
    return bad


async def run_gang(
    b: Harness, api: client.ApiClient, namespace: str, gangs: int, timeout: float = GANG_TIMEOUT_S
) -> dict[str, Any]:
    """The gangs' pods created while the scheduler runs, every gang's first member before any
    second; each gang's outcome; the seconds from the first pod created to the last gang decided
    (a placed gang: its last member seen bound by the watch); the claims checked."""
    first = time.monotonic()
    for pods in gang_pods(gangs, namespace, b.scheduler_name):
        await b.create_all(pods, label="dra_gang")
    seen = await gang_outcomes(api, namespace, gangs, first, timeout)
    times = b.bound_times()
    placed = sorted(i for i, (state, _) in seen.items() if state == "placed")
    decided = []
    for i, (state, when) in seen.items():
        bound = [times.get(gang_member(i, m)) for m, _ in GANG_MEMBERS]
        exact = state == "placed" and all(t is not None for t in bound)
        decided.append(max(t for t in bound if t is not None) if exact else when)
    usage, limits = mig_budget(gpus=1)
    return {
        "gangs": gangs,
        "pods": gangs * len(GANG_MEMBERS),
        "timeout_s": timeout,
        "placed": len(placed),
        "refused": len(seen) - len(placed),
        "undecided": gangs - len(seen),
        "seconds": max(decided) - first if decided else None,
        "placed_misallocated": gang_misallocated(placed, gangs, await claim_devices(api, namespace)),
        **await check(api, namespace, b.bound_nodes(), usage=usage, limits=limits),
    }


# -- sizes ------------------------------------------------------------------------------------------
#: scenario -> (default nodes, default pods, pods that fit a node whatever the allocator's choices)
SIZES: dict[str, tuple[int, int, int]] = {
    "dra_extended": (EXTENDED_NODES, EXTENDED_PODS, EXTENDED_DEVICES),
    "dra_partitionable": (PARTITIONABLE_NODES, PARTITIONABLE_PODS, MIG_PODS_PER_NODE),
    "dra_shared": (SHARED_NODES, SHARED_PODS, SHARED_PODS_PER_NODE),
}


def size_error(scenario: str, nodes: int, pods: int) -> str | None:
    """Why ``pods`` on ``nodes`` would not all fit (then the run would only time out), or None."""
    per_node = SIZES[scenario][2]
    if nodes < 1 or pods < 1:
        return f"{scenario}: nodes and pods must be at least 1"
    if pods > nodes * per_node:
        return (
            f"{scenario}: {pods:,} pods on {nodes:,} nodes: at most {per_node} a node ({nodes * per_node:,})"
        )
    return None
