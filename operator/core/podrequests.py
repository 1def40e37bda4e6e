"""A pod's requests and host ports as kube-scheduler adds them up (``resourcehelper.PodRequests``).

Containers and sidecars (restartable init containers) run together and are summed; a plain init
container runs alone beside the sidecars started before it; overhead comes on top. Scoring uses
the same sum with kube-scheduler's non-zero defaults for a container that leaves cpu or memory out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.core.quantity import QuantityError, to_int

JSON = Mapping[str, Any]
#: kube-scheduler scores pods without requests as if they asked for this much (non-zero requests).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def _container_requests(container: JSON, problems: dict[str, str]) -> dict[str, int]:
    """A container's requests as the API server stores them, explicit zeros kept.

    A key that is present is the container's own answer, even ``"0"``: kube-scheduler's non-zero
    defaults apply only where the key is absent (``NonMissingContainerRequests``).
    """
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    # As the API server defaults: a limit without a request is the request.
    for name, value in (resources.get("limits") or {}).items():
        requests.setdefault(name, value)
    out: dict[str, int] = {}
    for name, value in requests.items():
        try:
            amount = to_int(str(name), value)
        except QuantityError as exc:
            problems[f"requests.{name}"] = str(exc)
            continue
        if amount >= 0:
            out[str(name)] = amount
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v > into.get(k, 0):
            into[k] = v


#: kube-scheduler's defaults for a container that leaves cpu or memory out (scoring only)
NON_MISSING_DEFAULTS: Mapping[str, int] = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}


def aggregate_requests(
    containers: Sequence[Mapping[str, int]],
    init_containers: Sequence[tuple[Mapping[str, int], bool]],
    overhead: Mapping[str, int],
    defaults: Mapping[str, int] | None = None,
    pod_level: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """A pod's requests as kube-scheduler's ``PodRequests`` adds them up.

    App containers and sidecars (restartable init containers) run together and are summed; a plain
    init container runs alone beside the sidecars started before it, so the pod needs the larger of
    the two; pod-level requests (``spec.resources.requests``: cpu, memory, hugepages-*) replace
    that sum for their resources; overhead comes on top. ``defaults`` fill a key a container leaves
    out, per container (init containers included), never one it sets, even to zero.
    """

    def own(req: Mapping[str, int]) -> Mapping[str, int]:
        if not defaults:
            return req
        out = dict(req)
        for k, v in defaults.items():
            out.setdefault(k, v)
        return out

    total: dict[str, int] = {}
    for req in containers:
        _add(total, own(req))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for req, restartable in init_containers:
        mine = own(req)
        if restartable:
            _add(total, mine)
            _add(sidecars, mine)
            _max(init_peak, sidecars)
        else:
            alone = dict(sidecars)
            _add(alone, mine)
            _max(init_peak, alone)
    _max(total, init_peak)
    total.update(pod_level or {})
    _add(total, overhead)
    return total


def is_pod_level_resource(name: str) -> bool:
    """The resources a pod may request as a whole (the PodLevelResources feature, beta and on)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_level_requests(spec: JSON, problems: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in ((spec.get("resources") or {}).get("requests") or {}).items():
        if not is_pod_level_resource(str(name)):
            continue
        try:
            out[str(name)] = to_int(str(name), value)
        except QuantityError as exc:
            problems[f"resources.requests.{name}"] = str(exc)
    return out


def pod_requests(spec: JSON, problems: dict[str, str]) -> tuple[dict[str, int], int, int]:
    """Effective requests as kube-scheduler computes them (containers, sidecars, init, overhead).

    Returns (requests without zeros, non-zero cpu, non-zero memory). The non-zero
    figures are what scoring and the node table's ``nonzero_requested`` count: the same sum with
    kube-scheduler's defaults for a container that leaves cpu or memory out.
    """
    containers = [_container_requests(c, problems) for c in spec.get("containers") or ()]
    init: list[tuple[dict[str, int], bool]] = []
    for c in spec.get("initContainers") or ():
        # a sidecar (restartPolicy: Always) runs beside the app containers
        init.append((_container_requests(c, problems), c.get("restartPolicy") == "Always"))
    overhead: dict[str, int] = {}
    for k, v in (spec.get("overhead") or {}).items():
        try:
            overhead[str(k)] = to_int(str(k), v)
        except QuantityError as exc:
            problems[f"overhead.{k}"] = str(exc)
    pod_level = _pod_level_requests(spec, problems)
    total = aggregate_requests(containers, init, overhead, pod_level=pod_level)
    nonzero = aggregate_requests(containers, init, overhead, NON_MISSING_DEFAULTS, pod_level=pod_level)
    return (
        {k: v for k, v in total.items() if v > 0},
        nonzero.get("cpu", 0),
        nonzero.get("memory", 0),
    )


def pod_host_ports(spec: JSON) -> tuple[tuple[str, str, int], ...]:
    """The host ports a pod holds on its node: ``(protocol, hostIP, hostPort)``.

    As kube-scheduler's ``util.GetHostPorts``: sidecars (init containers with
    ``restartPolicy: Always``, which run for the pod's whole life) first, then the app containers;
    plain init containers hold no port. ``hostPort`` ≤ 0 (or absent) binds nothing; an empty protocol
    is TCP and an empty host IP is ``0.0.0.0``. The same list is what a pod asks for and what it
    holds once placed (``NodeTable.account``).
    """
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or ())
    ports: list[tuple[str, str, int]] = []
    for c in containers:
        for p in c.get("ports") or ():
            try:
                host_port = int(p.get("hostPort") or 0)
            except (TypeError, ValueError):
                continue
            if host_port > 0:
                ports.append((str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), host_port))
    return tuple(ports)
