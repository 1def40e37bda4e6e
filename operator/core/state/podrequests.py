"""A pod's requests and host ports as kube-scheduler adds them up (``resourcehelper.PodRequests``).

Containers and sidecars (restartable init containers) run together and are summed; a plain init
container runs alone beside the sidecars started before it; overhead comes on top. Scoring uses
the same sum with kube-scheduler's non-zero defaults for a container that leaves cpu or memory out.

In-place resize (GA since 1.35): a pod's requests are, per resource, the largest of three sums
over its containers: the spec's, what the kubelet allocated (``containerStatuses[].allocatedResources``)
and what it actuated (``containerStatuses[].resources.requests``), each falling back to the next
where the status says nothing; the pod-level status maps (``status.allocatedResources``,
``status.resources``), when the kubelet writes them, replace the containers' two. A resize the
kubelet found infeasible (``PodResizePending``, reason ``Infeasible``) leaves the spec out. So a
pod being resized down still counts what it holds, as kube-scheduler counts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.core.state.quantity import QuantityError, to_int

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


def _quantities(items: Any, problems: dict[str, str], where: str) -> dict[str, int] | None:
    """A resource list from a status (None when absent)."""
    if not isinstance(items, Mapping):
        return None
    out: dict[str, int] = {}
    for name, value in items.items():
        try:
            out[str(name)] = to_int(str(name), value)
        except QuantityError as exc:
            problems[f"{where}.{name}"] = str(exc)
    return out


def as_mapping(value: Any) -> JSON:
    """A status field that should be an object, or {} when it is absent or malformed."""
    return value if isinstance(value, Mapping) else {}


def _objects(value: Any) -> list[JSON]:
    """The objects of a status field that should be a list of them (malformed entries left out)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list | tuple) else []


def _resize_infeasible(status: JSON) -> bool:
    return any(
        c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
        for c in _objects(status.get("conditions"))
    )


def _max_of(*lists: Mapping[str, int] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for one in lists:
        _max(out, one or {})
    return out


Views = tuple[dict[str, int], dict[str, int], dict[str, int]]


class _ContainerViews:
    """A container's (spec, allocated, actuated) requests; a value its status lacks falls back as
    upstream's ``containerAllocatedRequests`` / ``containerActuatedRequests`` do."""

    def __init__(self, status: JSON, problems: dict[str, str], infeasible: bool) -> None:
        self.problems, self.infeasible = problems, infeasible
        self.statuses = {
            str(cs.get("name") or ""): cs
            for key in ("containerStatuses", "initContainerStatuses")
            for cs in _objects(status.get(key))
        }

    def __call__(self, c: JSON) -> Views:
        own = _container_requests(c, self.problems)
        cs = self.statuses.get(str(c.get("name") or "")) or {}
        allocated = _quantities(cs.get("allocatedResources"), self.problems, "status.allocatedResources")
        actuated = _quantities(
            as_mapping(cs.get("resources")).get("requests"), self.problems, "status.resources"
        )
        allocated_or = allocated if allocated is not None else ({} if self.infeasible else own)
        return own, allocated_or, actuated if actuated is not None else allocated_or


def pod_requests(
    spec: JSON, problems: dict[str, str], status: JSON | None = None
) -> tuple[dict[str, int], int, int]:
    """Effective requests as kube-scheduler computes them (containers, sidecars, init, overhead,
    in-place resizes: see the module docstring).

    Returns (requests without zeros, non-zero cpu, non-zero memory). The non-zero
    figures are what scoring and the node table's ``nonzero_requested`` count: the same sum with
    kube-scheduler's defaults for a container that leaves cpu or memory out.
    """
    status = as_mapping(status)
    infeasible = _resize_infeasible(status)
    views = _ContainerViews(status, problems, infeasible)
    containers = [views(c) for c in spec.get("containers") or ()]
    # a sidecar (restartPolicy: Always) runs beside the app containers
    init = [(views(c), c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or ()]
    overhead: dict[str, int] = {}
    for k, v in (spec.get("overhead") or {}).items():
        try:
            overhead[str(k)] = to_int(str(k), v)
        except QuantityError as exc:
            problems[f"overhead.{k}"] = str(exc)
    pod_level = _pod_level_requests(spec, problems)
    pod_allocated = _quantities(status.get("allocatedResources"), problems, "status.allocatedResources")
    pod_actuated = _quantities(
        as_mapping(status.get("resources")).get("requests"), problems, "status.resources"
    )
    if pod_level and isinstance(status.get("resources"), Mapping):  # InPlacePodLevelResourcesVerticalScaling
        pod_level = {
            k: v
            for k, v in _max_of(None if infeasible else pod_level, pod_actuated, pod_allocated).items()
            if is_pod_level_resource(k)
        }

    # a pod the kubelet has not reported on (every pending pod): the three views are the spec's
    views_differ = infeasible or bool(views.statuses) or pod_allocated is not None

    def total(defaults: Mapping[str, int] | None) -> dict[str, int]:
        sums = [
            aggregate_requests([c[i] for c in containers], [(c[i], r) for c, r in init], {}, defaults)
            for i in range(3 if views_differ else 1)
        ]
        sums += [sums[0]] * (3 - len(sums))
        if pod_allocated is not None and pod_actuated is not None:  # the kubelet's pod-level maps
            sums[1:] = [pod_allocated, pod_actuated]
        out = _max_of(*([] if infeasible else [sums[0]]), sums[1], sums[2])
        out.update(pod_level or {})
        _add(out, overhead)
        return out

    nonzero = total(NON_MISSING_DEFAULTS)
    return (
        {k: v for k, v in total(None).items() if v > 0},
        nonzero.get("cpu", 0),
        nonzero.get("memory", 0),
    )


@dataclass(frozen=True, slots=True)
class ContainerRequests:
    """One container's extended-resource requests as its spec has them (a DRA-backed extended
    resource is allocated per container: plugins/dynamicresources/extended.py)."""

    #: its index in ``initContainers`` followed by ``containers``
    index: int
    name: str
    #: a regular container or a sidecar (restartable init container): runs beside the others
    long_lived: bool
    #: the names of all its requests (cpu and memory too), sorted
    keys: tuple[str, ...]
    #: its domain-prefixed requests (``vendor/resource``) with their amounts
    scalars: Mapping[str, int]


def container_requests(spec: JSON) -> tuple[ContainerRequests, ...]:
    """Per container, in ``initContainers`` then ``containers`` order, its requests, when any
    container requests a domain-prefixed resource (otherwise ``()``: nothing for DRA to do).
    Malformed quantities are left out here: :func:`pod_requests` reports them."""
    init = [(c, c.get("restartPolicy") == "Always") for c in spec.get("initContainers") or ()]
    every = init + [(c, True) for c in spec.get("containers") or ()]
    out: list[ContainerRequests] = []
    for i, (c, long_lived) in enumerate(every):
        own = _container_requests(c, {})
        scalars = {k: v for k, v in own.items() if "/" in k}
        out.append(ContainerRequests(i, str(c.get("name") or ""), long_lived, tuple(sorted(own)), scalars))
    return tuple(out) if any(c.scalars for c in out) else ()


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
