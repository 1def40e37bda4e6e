"""Three more DRA scenarios of ``make bench``, shaped after kube-scheduler 1.37.2's scheduler_perf
DRA workloads (test/integration/scheduler_perf/dra/), shoal and kube-scheduler side by side.

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

The partitionable and shared ones use templates, so kube-controller-manager's resourceclaim
controller makes the claims (bench/e2e.py starts it as for ``dra``). Measured as ``dra``: pods
bound per second, first created to last bound (``<scenario>_ratio`` = shoal ÷ kube-scheduler);
checked: every bound pod's claim allocated on its node, no bound pod without one, no device (or
share) twice, and for these two no counter nor shared capacity overdrawn.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from kubernetes_asyncio import client

from bench.e2e_dra import API, GPU, Usage, measure
from bench.e2e_workloads import scheduler_perf_node
from bench.harness import Harness
from shoal.core.state.quantity import parse_quantity

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
    counters = {
        "driver": GPU,
        "sharedCounters": [
            {"name": counter_set(g), "counters": {k: {"value": v} for k, v in gpu_counters().items()}}
            for g in range(gpus)
        ],
    }
    devices = {"driver": GPU, "devices": [d for g in range(gpus) for d in mig_devices(g)]}
    slices = [node_slice(n, f"{n}-counters", 2, counters) for n in names]
    slices += [node_slice(n, f"{n}-devices", 2, devices) for n in names]
    return [cls, *templates, *(scheduler_perf_node(n) for n in names), *slices]


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
