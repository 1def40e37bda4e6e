"""Dynamic Resource Allocation (``resource.k8s.io/v1``): typed views of DeviceClasses, ResourceSlices,
ResourceClaims and DeviceTaintRules, as the informer and the simulator decode them, and the rule by
which a request's tolerations let it use a tainted device.

Why parsed once: DynamicResources looks devices up for every node of every cycle; parsing slices
when the watch delivers them keeps the cycle to lookups. A malformed field never raises out of
here: it is recorded in ``problems`` and the object is kept without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from shoal.core.state.nodeselectors import SelectorTerm, parse_term
from shoal.core.state.quantity import QuantityError, parse_quantity
from shoal.plugins.dynamicresources.capacity import Capacity, CapacityPolicy

JSON = Mapping[str, Any]

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # set on claims made from a template
#: marks the claim kube-scheduler (or shoal) made for a pod's DRA-backed extended resources
EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
ALLOCATION_EXACT_COUNT, ALLOCATION_ALL = "ExactCount", "All"
#: what a node declares (``status.declaredFeatures``) when its kubelet can skip a driver's node
#: operations: a device of a slice with ``skipNodeOperations`` is allocated only on such a node
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"
#: the API group of native PodGroups, which may own and be reserved a claim (DRAWorkloadResourceClaims)
SCHEDULING_GROUP = "scheduling.k8s.io"
#: at most this many pods in a claim's reservedFor (ResourceClaimReservedForMaxSize)
RESERVED_FOR_MAX = 256


class DeviceId(NamedTuple):
    """A device, unique in the cluster (the allocator's DeviceID); a tuple: hashed in C."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


#: the taint effects that keep a device from new allocations (``None`` and any unknown effect are
#: informational: the API says consumers treat an unknown effect as ``None``)
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """A device's taint (``spec.devices[].taints[]``, or a DeviceTaintRule's ``spec.taint``)."""

    key: str
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, raw: JSON) -> DeviceTaint:
        return cls(str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or ""))


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A request's toleration; ``raw`` is copied into the allocation result as the API wrote it
    (the device-taint eviction controller reads that copy)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    raw: JSON = field(default_factory=dict, compare=False, hash=False)

    def tolerates(self, taint: DeviceTaint) -> bool:
        """kube's ``ToleratesTaint``: an empty effect matches every effect and an empty key every
        key; ``Exists`` matches any value, ``Equal`` (the default) the same value; a NoSchedule
        toleration does not tolerate a NoExecute taint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"

    @classmethod
    def from_dict(cls, raw: JSON) -> DeviceToleration:
        return cls(
            key=str(raw.get("key") or ""),
            operator=str(raw.get("operator") or "Equal"),
            value=str(raw.get("value") or ""),
            effect=str(raw.get("effect") or ""),
            raw=dict(raw),
        )


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice. ``attributes`` and ``capacity`` are keyed by fully qualified name
    (``gpu.nvidia.com/productName``: an unqualified name belongs to the driver's domain); capacity
    values are quantities in base units (bytes for memory)."""

    id: DeviceId
    attributes: Mapping[str, Any]
    capacity: Mapping[str, int]
    #: the driver's taints, then those of the DeviceTaintRules that select the device
    taints: tuple[DeviceTaint, ...] = ()
    #: ``consumesCounters``: counter set -> counter -> the amount the device takes of its pool's
    #: shared counters (a partition of a GPU takes some of the GPU's memory and cores)
    consumes: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    #: its own node selection, in a slice with ``perDeviceNodeSelection``: ``nodeName``,
    #: ``allNodes`` or ``nodeSelector`` (whose one term is kept)
    node_name: str = ""
    all_nodes: bool = False
    node_selector_terms: tuple[SelectorTerm, ...] = ()
    #: ``allowMultipleAllocations``: shared, each allocation a share of its capacities
    multi: bool = False
    #: ``capacity`` by its name as published (unqualified, as requests name it), exact, with each
    #: one's ``requestPolicy``: what consumable capacity counts
    capacities: Mapping[str, Capacity] = field(default_factory=dict)
    #: ``bindingConditions`` / ``bindingFailureConditions``: a pod using it binds only once the
    #: driver sets all of the former True on the claim (any of the latter True: binding failed)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: ``bindsToNode``: an allocation of it is pinned to the node it was made for
    binds_to_node: bool = False
    #: ``consumesCounters[].compatibilityGroups`` (alpha DRADeviceCompatibilityGroups): counter
    #: set -> the groups it declares there (a set it names no group for is not here); devices
    #: drawing from one counter set are allocated together only if they all declare none, or
    #: some group all of them declare
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: its slice's ``skipNodeOperations`` (alpha DRAOptionalNodeOperations): the kubelet calls on
    #: the driver it skips; a node must declare OPTIONAL_NODE_OPERATIONS to get the device
    skip_node_operations: tuple[str, ...] = ()

    def available_on(self, node: str, labels: Mapping[str, str]) -> bool:
        """Its own node selection (a device of a per-device slice) reaches ``node``."""
        if self.node_name:
            return self.node_name == node
        if self.all_nodes:
            return True
        return any(t.matches(node, labels) for t in self.node_selector_terms)

    def blocked_for(self, tolerations: tuple[DeviceToleration, ...]) -> DeviceTaint | None:
        """The first taint that keeps this device from a request with ``tolerations`` (a
        NoSchedule or NoExecute taint none of them tolerates), or None (kube's
        ``taintPreventsAllocation``)."""
        for taint in self.taints:
            if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
                return taint
        return None


def qualify(driver: str, name: str) -> str:
    """An attribute or capacity name with its domain (``productName`` -> ``gpu.nvidia.com/productName``)."""
    return name if "/" in name else f"{driver}/{name}"


def _attribute(value: Any) -> Any:
    """A DeviceAttribute's one value (``int``, ``bool``, ``string``, ``version``); a version is kept as
    ``("version", text)`` so CEL can tell it from a string."""
    if not isinstance(value, Mapping):
        return None
    for key in ("int", "bool", "string"):
        if key in value:
            return value[key]
    if "version" in value:
        return ("version", str(value["version"]))
    return None


#: every distinct ``capacities`` of a device seen, so that devices of one model share one mapping
#: (what capacity.py's per-request memo is keyed on)
_CAPACITIES: dict[tuple[tuple[str, Capacity], ...], Mapping[str, Capacity]] = {}


def _interned(capacities: dict[str, Capacity]) -> Mapping[str, Capacity]:
    key = tuple(capacities.items())
    found = _CAPACITIES.get(key)
    if found is None:
        if len(_CAPACITIES) > 10_000:
            _CAPACITIES.clear()
        found = _CAPACITIES[key] = capacities
    return found


def _device(
    driver: str, pool: str, raw: JSON, problems: dict[str, str], skip: tuple[str, ...] = ()
) -> Device:
    name = str(raw.get("name") or "")
    attributes = {qualify(driver, str(k)): _attribute(v) for k, v in (raw.get("attributes") or {}).items()}
    capacity: dict[str, int] = {}
    capacities: dict[str, Capacity] = {}
    for key, cap in (raw.get("capacity") or {}).items():
        value = cap.get("value") if isinstance(cap, Mapping) else None
        try:
            exact = parse_quantity(str(value))
            policy = _policy(cap.get("requestPolicy")) if isinstance(cap, Mapping) else None
        except QuantityError as exc:
            problems[f"devices[{name}].capacity[{key}]"] = str(exc)
            continue
        capacity[qualify(driver, str(key))] = int(exact)
        capacities[str(key)] = Capacity(exact, policy)
    consumes: dict[str, dict[str, Decimal]] = {}
    groups: dict[str, frozenset[str]] = {}
    for c in raw.get("consumesCounters") or ():
        if not isinstance(c, Mapping):
            continue
        counter_set = str(c.get("counterSet") or "")
        consumes[counter_set] = _counters(c.get("counters"), f"devices[{name}]", problems)
        declared = c.get("compatibilityGroups")
        if isinstance(declared, list | tuple) and declared:
            groups[counter_set] = frozenset(str(g) for g in declared)
    taints = tuple(DeviceTaint.from_dict(t) for t in raw.get("taints") or () if isinstance(t, Mapping))
    selector = raw.get("nodeSelector")
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    return Device(
        DeviceId(driver, pool, name),
        attributes,
        capacity,
        taints,
        consumes,
        node_name=str(raw.get("nodeName") or ""),
        all_nodes=raw.get("allNodes") is True,
        node_selector_terms=tuple(parse_term(t) for t in terms or ()),
        multi=raw.get("allowMultipleAllocations") is True,
        capacities=_interned(capacities),
        binding_conditions=_names(raw.get("bindingConditions")),
        binding_failure_conditions=_names(raw.get("bindingFailureConditions")),
        binds_to_node=raw.get("bindsToNode") is True,
        groups=groups,
        skip_node_operations=skip,
    )


def _names(raw: Any) -> tuple[str, ...]:
    return tuple(str(n) for n in raw) if isinstance(raw, list | tuple) else ()


def _policy(raw: Any) -> CapacityPolicy | None:
    """A capacity's ``requestPolicy``; QuantityError when one of its amounts is malformed."""
    if not isinstance(raw, Mapping):
        return None
    found = raw.get("validRange")
    valid_range: Mapping[str, Any] = found if isinstance(found, Mapping) else {}

    def amount(value: Any) -> Decimal | None:
        return parse_quantity(str(value)) if value is not None else None

    return CapacityPolicy(
        default=amount(raw.get("default")),
        valid_values=tuple(parse_quantity(str(v)) for v in raw.get("validValues") or ()),
        minimum=amount(valid_range.get("min")),
        maximum=amount(valid_range.get("max")),
        step=amount(valid_range.get("step")),
    )


def _counters(raw: Any, where: str, problems: dict[str, str]) -> dict[str, Decimal]:
    """A map of counters (``{memory: {value: 40Gi}}``) as exact amounts; a malformed one is a
    problem, kept at 0."""
    out: dict[str, Decimal] = {}
    for key, counter in (raw or {}).items() if isinstance(raw, Mapping) else ():
        value = counter.get("value") if isinstance(counter, Mapping) else None
        try:
            out[str(key)] = parse_quantity(str(value))
        except QuantityError as exc:
            problems[f"{where}.counters[{key}]"] = str(exc)
            out[str(key)] = Decimal(0)
    return out


@dataclass(slots=True)
class DeviceClassInfo:
    """A DeviceClass: the CEL selectors every device allocated for it must match."""

    name: str
    selectors: tuple[str, ...] = ()
    resource_version: str = ""
    #: ``spec.config`` (opaque driver parameters), copied into an allocation as ``FromClass``
    config: tuple[JSON, ...] = ()
    #: ``spec.extendedResourceName``: the extended resource it provides to pods' requests ("": none)
    extended_resource_name: str = ""
    #: ``metadata.creationTimestamp`` (RFC 3339): of two classes naming one extended resource,
    #: the newer provides it
    created: str = ""

    @classmethod
    def from_dict(cls, obj: JSON) -> DeviceClassInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        config = tuple(c for c in spec.get("config") or () if isinstance(c, Mapping))
        return cls(
            name=str(meta.get("name") or ""),
            selectors=_cel_selectors(spec.get("selectors")),
            resource_version=str(meta.get("resourceVersion") or ""),
            config=config,
            extended_resource_name=str(spec.get("extendedResourceName") or ""),
            created=str(meta.get("creationTimestamp") or ""),
        )


def _cel_selectors(items: Any) -> tuple[str, ...]:
    return tuple(
        str((s.get("cel") or {}).get("expression") or "")
        for s in items or ()
        if isinstance(s, Mapping) and s.get("cel")
    )


@dataclass(slots=True)
class ResourceSliceInfo:
    """A ResourceSlice: a driver's pool's devices, on one node (``spec.nodeName``), on the nodes a
    selector picks (``nodeSelector``) or on every node (``allNodes``)."""

    name: str
    driver: str = ""
    pool: str = ""
    generation: int = 0
    node_name: str = ""
    all_nodes: bool = False
    node_selector_terms: tuple[SelectorTerm, ...] = ()
    devices: tuple[Device, ...] = ()
    problems: dict[str, str] = field(default_factory=dict)
    #: ``pool.resourceSliceCount``: how many slices the pool's generation has (complete when all seen)
    slice_count: int = 1
    #: ``sharedCounters``: counter set -> counter -> total (a slice holds these or devices, not both)
    counter_sets: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    #: set twice in this slice: a name of ``sharedCounters`` (the pool is then invalid)
    duplicate_sets: tuple[str, ...] = ()
    #: ``perDeviceNodeSelection``: each device says which nodes reach it
    per_device: bool = False

    def available_on(self, node: str, labels: Mapping[str, str]) -> bool:
        """Whether this slice's devices can be reached from ``node`` (a per-device slice: any of
        them)."""
        if self.node_name:
            return self.node_name == node
        if self.all_nodes:
            return True
        if self.per_device:
            return any(d.available_on(node, labels) for d in self.devices)
        return any(t.matches(node, labels) for t in self.node_selector_terms)

    @classmethod
    def from_dict(cls, obj: JSON) -> ResourceSliceInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        driver = str(spec.get("driver") or "")
        problems: dict[str, str] = {}
        pool_name = str(pool.get("name") or "")
        skip = _names(spec.get("skipNodeOperations"))
        devices = tuple(
            _device(driver, pool_name, d, problems, skip)
            for d in spec.get("devices") or ()
            if isinstance(d, Mapping)
        )
        terms = tuple(parse_term(t) for t in (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or ())
        sets: dict[str, Mapping[str, Decimal]] = {}
        duplicates: list[str] = []
        for c in spec.get("sharedCounters") or ():
            if not isinstance(c, Mapping):
                continue
            set_name = str(c.get("name") or "")
            if set_name in sets:
                duplicates.append(set_name)
            sets[set_name] = _counters(c.get("counters"), f"sharedCounters[{set_name}]", problems)
        count = pool.get("resourceSliceCount")
        return cls(
            name=str(meta.get("name") or ""),
            driver=driver,
            pool=pool_name,
            generation=int(pool.get("generation") or 0),
            node_name=str(spec.get("nodeName") or ""),
            all_nodes=bool(spec.get("allNodes")),
            node_selector_terms=terms,
            devices=devices,
            problems=problems,
            slice_count=int(count) if isinstance(count, int) and count > 0 else 1,
            counter_sets=sets,
            duplicate_sets=tuple(duplicates),
            per_device=spec.get("perDeviceNodeSelection") is True,
        )


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim, ``exactly`` (or one of ``firstAvailable``'s subrequests, named
    ``request/subrequest``): a class, CEL selectors, how many."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = ALLOCATION_EXACT_COUNT
    count: int = 1
    #: the fields of this request shoal does not evaluate yet ("" if none)
    unsupported: str = ""
    tolerations: tuple[DeviceToleration, ...] = ()
    #: ``adminAccess``: devices in use by other claims may be allocated too (monitoring, debugging)
    admin_access: bool = False
    #: ``capacity.requests``: how much of each named capacity of a device it takes (None: no
    #: ``capacity``, so each capacity's default, or all of it)
    capacity: Mapping[str, Decimal] | None = None


@dataclass(frozen=True, slots=True)
class Constraint:
    """``constraints[i]``: every device of ``requests`` (all when empty) has the same value of the
    fully qualified attribute ``match_attribute``, or each a different value of
    ``distinct_attribute``; a device without the attribute cannot be used."""

    requests: tuple[str, ...]
    match_attribute: str
    #: a constraint of a kind shoal does not evaluate yet: its fields
    unsupported: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    id: DeviceId
    #: the request's tolerations when the device was allocated (``results[].tolerations``)
    tolerations: tuple[DeviceToleration, ...] = ()
    #: allocated for admin access (``results[].adminAccess``): the device stays free for others
    admin_access: bool = False
    #: a share of a device that allows multiple allocations (``results[].shareID``) and what it
    #: takes of each capacity (``results[].consumedCapacity``)
    share_id: str = ""
    consumed: Mapping[str, Decimal] = field(default_factory=dict)
    #: the device's binding conditions when it was allocated (``results[].bindingConditions``,
    #: ``results[].bindingFailureConditions``)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: its slice's ``skipNodeOperations`` when it was allocated (``results[].skipNodeOperations``)
    skip_node_operations: tuple[str, ...] = ()


def _request(raw: JSON, prefix: str = "") -> DeviceRequest:
    exactly = raw.get("exactly") if "exactly" in raw else raw  # subrequests are flat
    exactly = exactly if isinstance(exactly, Mapping) else {}
    mode = str(exactly.get("allocationMode") or ALLOCATION_EXACT_COUNT)
    bad: list[str] = []
    requested: dict[str, Decimal] | None = None
    raw_capacity = exactly.get("capacity")
    if isinstance(raw_capacity, Mapping):
        requested = {}
        for key, value in (raw_capacity.get("requests") or {}).items():
            try:
                requested[str(key)] = parse_quantity(str(value))
            except QuantityError:
                bad.append(f"capacity.requests[{key}]")
    count = exactly.get("count")
    return DeviceRequest(
        name=prefix + str(raw.get("name") or ""),
        device_class=str(exactly.get("deviceClassName") or ""),
        selectors=_cel_selectors(exactly.get("selectors")),
        mode=mode,
        count=int(count) if isinstance(count, int) and mode == ALLOCATION_EXACT_COUNT else 1,
        unsupported=", ".join(bad),
        tolerations=_tolerations(exactly.get("tolerations")),
        admin_access=exactly.get("adminAccess") is True,
        capacity=requested,
    )


def _tolerations(items: Any) -> tuple[DeviceToleration, ...]:
    return tuple(DeviceToleration.from_dict(t) for t in items or () if isinstance(t, Mapping))


@dataclass(slots=True)
class ResourceClaimInfo:
    """A ResourceClaim: what it asks for, and (``status``) what it was given and to whom."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    #: each request's alternatives, in order: one for ``exactly``, the subrequests of ``firstAvailable``
    requests: tuple[tuple[DeviceRequest, ...], ...] = ()
    constraints: tuple[Constraint, ...] = ()
    allocated: tuple[AllocatedDevice, ...] | None = None  # None: not allocated
    #: the allocation's node selector, when it is node-local (the node it was allocated on)
    allocated_node: str = ""
    #: the allocation's node selector terms, any of which a node must match (none: every node)
    allocated_terms: tuple[SelectorTerm, ...] = ()
    #: ``status.reservedFor`` as the API has it (resource, name, uid)
    consumers: tuple[JSON, ...] = ()
    #: ``spec.devices.config``, copied into an allocation as ``FromClaim``
    config: tuple[JSON, ...] = ()
    finalizers: tuple[str, ...] = ()
    pod_claim_name: str = ""  # set by the resourceclaim controller on a claim from a template
    owner_uid: str = ""  # the pod that owns a generated claim
    #: the native PodGroup (``scheduling.k8s.io``) that controls it: a claim the resourceclaim
    #: controller made from a PodGroup's ``spec.resourceClaims`` template (DRAWorkloadResourceClaims)
    group_owner: str = ""
    deleting: bool = False
    #: made by a scheduler for its controlling pod's DRA-backed extended resources (annotated)
    extended: bool = False
    #: ``status.allocation.allocationTimestamp`` (RFC 3339; "" when not set)
    allocated_at: str = ""
    #: ``status.devices[]``, as a driver writes them: device -> condition type -> (status, reason,
    #: message)
    device_conditions: Mapping[DeviceId, Mapping[str, tuple[str, str, str]]] = field(default_factory=dict)

    #: the allocation's ``devices.config`` (class and claim configuration), set by Reserve
    allocation_config: tuple[JSON, ...] = ()

    @property
    def skips_node_operations(self) -> bool:
        """A device of its allocation skips node operations: only a node declaring
        OPTIONAL_NODE_OPERATIONS may run its pods (upstream's
        allocationResultRequiresDRAOptionalNodeOperations)."""
        return any(d.skip_node_operations for d in self.allocated or ())

    @property
    def has_binding_conditions(self) -> bool:
        """Some device of its allocation binds only once the driver says so."""
        return any(d.binding_conditions for d in self.allocated or ())

    def binding_state(self) -> tuple[bool, str]:
        """Upstream's isClaimReadyForBinding: (ready, why binding failed). Each device with binding
        conditions, in order: without a status entry, or one of its conditions not True, the claim
        is not ready (and a later device's failure is not looked at, as upstream); one of its
        failure conditions True: failed. An unallocated claim is not ready."""
        if self.allocated is None:
            return False, ""
        for d in self.allocated:
            if not d.binding_conditions:
                continue
            conditions = self.device_conditions.get(d.id)
            if conditions is None:
                return False, ""
            for name in d.binding_failure_conditions:
                status, reason, message = conditions.get(name, ("", "", ""))
                if status == "True":
                    return (
                        False,
                        f'device binding failed: claim={self.name}, reason={reason}, message="{message}"',
                    )
            if any(conditions.get(name, ("",))[0] != "True" for name in d.binding_conditions):
                return False, ""
        return True, ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def reserved_for(self) -> tuple[str, ...]:
        """The uids of the consumers."""
        return tuple(str(c.get("uid") or "") for c in self.consumers)

    def reserved_for_pod(self, uid: str, group: str | None) -> bool:
        """Upstream's IsReservedForPod with PodGroup reservations accepted: the pod (``uid``) is a
        consumer, or its native PodGroup (``group``: its name, None when it has none) is, named by
        group, resource and name (a pod does not know its PodGroup's uid)."""
        for c in self.consumers:
            if str(c.get("uid") or "") == uid:
                return True
            if (
                group is not None
                and c.get("apiGroup") == SCHEDULING_GROUP
                and c.get("resource") == "podgroups"
                and c.get("name") == group
            ):
                return True
        return False

    @classmethod
    def from_dict(cls, obj: JSON) -> ResourceClaimInfo:
        meta = obj.get("metadata") or {}
        devices = (obj.get("spec") or {}).get("devices") or {}
        status = obj.get("status") or {}
        requests = []
        for raw in devices.get("requests") or ():
            if raw.get("firstAvailable"):
                prefix = f"{raw.get('name') or ''}/"
                requests.append(tuple(_request(s, prefix) for s in raw["firstAvailable"]))
            else:
                requests.append((_request(raw),))
        constraints = tuple(  # another kind is kept to be refused, not dropped
            Constraint(
                tuple(str(r) for r in c.get("requests") or ()),
                str(c.get("matchAttribute") or ""),
                ""
                if c.get("matchAttribute") or c.get("distinctAttribute")
                else ", ".join(k for k in c if k != "requests"),
                str(c.get("distinctAttribute") or ""),
            )
            for c in devices.get("constraints") or ()
            if isinstance(c, Mapping)
        )
        allocation = status.get("allocation")
        node, terms = _allocated_on(allocation) if isinstance(allocation, Mapping) else ("", ())
        owners = [o for o in meta.get("ownerReferences") or () if isinstance(o, Mapping)]
        owner: JSON = next((o for o in owners if o.get("kind") == "Pod"), {})
        group: JSON = next(
            (
                o
                for o in owners
                if o.get("kind") == "PodGroup"
                and o.get("controller") is True
                and str(o.get("apiVersion") or "").startswith(f"{SCHEDULING_GROUP}/")
            ),
            {},
        )
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            requests=tuple(requests),
            constraints=constraints,
            allocated=_allocated(allocation) if isinstance(allocation, Mapping) else None,
            allocated_node=node,
            allocated_terms=terms,
            consumers=tuple(r for r in status.get("reservedFor") or () if isinstance(r, Mapping)),
            config=tuple(c for c in devices.get("config") or () if isinstance(c, Mapping)),
            finalizers=tuple(str(f) for f in meta.get("finalizers") or ()),
            pod_claim_name=str((meta.get("annotations") or {}).get(POD_CLAIM_NAME) or ""),
            owner_uid=str(owner.get("uid") or ""),
            group_owner=str(group.get("name") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            extended=(meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM) == "true"
            and owner.get("controller") is True,
            allocated_at=str(allocation.get("allocationTimestamp") or "")
            if isinstance(allocation, Mapping)
            else "",
            device_conditions=_device_conditions(status.get("devices")),
        )


def consumer(name: str, uid: str, *, group: bool = False) -> dict[str, str]:
    """A ``status.reservedFor`` entry: a pod, or (``group``) a native PodGroup."""
    if group:
        return {"apiGroup": SCHEDULING_GROUP, "resource": "podgroups", "name": name, "uid": uid}
    return {"resource": "pods", "name": name, "uid": uid}


def _allocated(allocation: JSON) -> tuple[AllocatedDevice, ...]:
    results = (allocation.get("devices") or {}).get("results") or ()
    return tuple(
        AllocatedDevice(
            str(r.get("request") or ""),
            DeviceId(str(r.get("driver")), str(r.get("pool")), str(r.get("device"))),
            _tolerations(r.get("tolerations")),
            r.get("adminAccess") is True,
            str(r.get("shareID") or ""),
            _amounts(r.get("consumedCapacity")),
            _names(r.get("bindingConditions")),
            _names(r.get("bindingFailureConditions")),
            _names(r.get("skipNodeOperations")),
        )
        for r in results
        if isinstance(r, Mapping)
    )


def _device_conditions(raw: Any) -> dict[DeviceId, dict[str, tuple[str, str, str]]]:
    """``status.devices[]``: per device (driver, pool, device; a share's shareID is not looked at,
    as upstream), its conditions by type."""
    out: dict[DeviceId, dict[str, tuple[str, str, str]]] = {}
    for d in raw if isinstance(raw, list | tuple) else ():
        if not isinstance(d, Mapping):
            continue
        key = DeviceId(str(d.get("driver") or ""), str(d.get("pool") or ""), str(d.get("device") or ""))
        if key in out:  # the first entry for the device, as upstream looks it up
            continue
        conditions = out[key] = {}
        for c in d.get("conditions") or ():
            if isinstance(c, Mapping):
                conditions[str(c.get("type") or "")] = (
                    str(c.get("status") or ""),
                    str(c.get("reason") or ""),
                    str(c.get("message") or ""),
                )
    return out


def _amounts(raw: Any) -> dict[str, Decimal]:
    """``consumedCapacity`` as written: malformed amounts are left out (they take nothing)."""
    out: dict[str, Decimal] = {}
    for key, value in raw.items() if isinstance(raw, Mapping) else ():
        try:
            out[str(key)] = parse_quantity(str(value))
        except QuantityError:
            continue
    return out


def _allocated_on(allocation: JSON) -> tuple[str, tuple[SelectorTerm, ...]]:
    """The allocation's node selector terms, and its node when the selector is one node's name
    alone (one term, one ``metadata.name In [node]`` field); any other is evaluated as written."""
    selector = allocation.get("nodeSelector")
    raw = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    terms = tuple(parse_term(t) for t in raw) if isinstance(raw, list | tuple) else ()
    if len(terms) == 1 and not terms[0].expressions and len(terms[0].fields) == 1:
        req = terms[0].fields[0]
        if req.key == "metadata.name" and req.operator == "In" and len(req.values) == 1:
            return req.values[0], terms
    return "", terms


@dataclass(frozen=True, slots=True)
class DeviceTaintRuleInfo:
    """A DeviceTaintRule (``resource.k8s.io/v1``): its taint goes onto every device its selector
    picks, after the driver's own taints (a rule never removes or overrides one). The selector's
    fields must all match, by exact name; no selector selects nothing, an empty one everything
    (kube's ResourceSlice tracker)."""

    name: str
    taint: DeviceTaint | None = None
    #: False: no ``spec.deviceSelector`` (the rule selects no device)
    has_selector: bool = False
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def selects(self, driver: str, pool: str, device: str) -> bool:
        return (
            self.has_selector
            and self.taint is not None
            and (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )

    @classmethod
    def from_dict(cls, obj: JSON) -> DeviceTaintRuleInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        selector = spec.get("deviceSelector")
        taint = spec.get("taint")

        def field_of(key: str) -> str | None:
            value = selector.get(key) if isinstance(selector, Mapping) else None
            return str(value) if value is not None else None

        return cls(
            name=str(meta.get("name") or ""),
            taint=DeviceTaint.from_dict(taint) if isinstance(taint, Mapping) else None,
            has_selector=isinstance(selector, Mapping),
            driver=field_of("driver"),
            pool=field_of("pool"),
            device=field_of("device"),
        )


DraObject = DeviceClassInfo | ResourceSliceInfo | ResourceClaimInfo | DeviceTaintRuleInfo

DRA_DECODERS: dict[str, Callable[[JSON], DraObject]] = {
    "DeviceClass": DeviceClassInfo.from_dict,
    "ResourceSlice": ResourceSliceInfo.from_dict,
    "ResourceClaim": ResourceClaimInfo.from_dict,
    "DeviceTaintRule": DeviceTaintRuleInfo.from_dict,
}
