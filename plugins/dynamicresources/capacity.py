"""Consumable capacity (KEP-5075, beta and on in 1.37): how much of a device's capacity a request
takes, and whether it still fits.

A device that allows multiple allocations (``allowMultipleAllocations``) is shared: each
allocation is a share (with a ``shareID``) that takes part of each of its capacities, and the
shares together never exceed a capacity's value. What a request takes of a capacity is what it
asks (``capacity.requests``), rounded up by the capacity's ``requestPolicy`` (``validRange``:
at least ``min``, then up to ``min`` plus a whole number of ``step``; ``validValues``: the
smallest value at least the request); a capacity it does not name takes the policy's ``default``,
or else all of it. A request naming a capacity the device lacks does not fit it, nor does an
amount the policy forbids (above ``max``, off ``step``, not one of ``validValues``). The check
runs for every device, shared or not (a dedicated device is simply used whole).

As upstream with DRAFractionalCapacityRange (beta, on): range arithmetic is in milli-units when
``min``, ``max`` and ``step`` are all whole milli-units (a step of at least 1m), else in whole
units; an amount that cannot be represented there (or that overflows int64) is an error, never a
mismatch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

INT64_MAX = 2**63 - 1


class CapacityError(Exception):
    """A request whose capacity cannot be evaluated (not representable, negative, overflowing)."""


#: upstream's words for an amount outside the range arithmetic (errCapacityRequestNotRepresentable)
NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's ``requestPolicy``: ``default``, and ``valid_values`` or a range."""

    default: Decimal | None = None
    valid_values: tuple[Decimal, ...] = ()
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    step: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Capacity:
    """A device capacity (``capacity[name]``): its value and its request policy, if any."""

    value: Decimal
    policy: CapacityPolicy | None = None


def _units(value: Decimal, milli: bool) -> int:
    """The amount in the range's arithmetic: milli-units (exact) or whole units (rounded up, as a
    Quantity's Value())."""
    if milli:
        scaled = value * 1000
        if scaled != scaled.to_integral_value() or abs(scaled) > INT64_MAX:
            raise CapacityError(f"{NOT_REPRESENTABLE}: request {value} is not a representable milli value")
        return int(scaled)
    if value > INT64_MAX:
        raise CapacityError(f"{NOT_REPRESENTABLE}: request {value} exceeds MaxInt64")
    return math.ceil(value)


def _milli_range(policy: CapacityPolicy) -> bool:
    """upstream's useMilli: every bound a whole number of milli-units, the step at least 1m."""
    for q in (policy.minimum, policy.maximum, policy.step):
        if q is None:
            continue
        scaled = q * 1000
        if scaled != scaled.to_integral_value() or abs(scaled) > INT64_MAX:
            return False
    return policy.step is None or policy.step * 1000 >= 1


@functools.lru_cache(maxsize=4096)
def _range(policy: CapacityPolicy) -> tuple[bool, int, int]:
    """A range policy's arithmetic, its step and its minimum in it (policies repeat: one per
    capacity of a device model). CapacityError when step or minimum cannot be represented."""
    if policy.step is None or policy.minimum is None:
        raise ValueError("not a range with a step")
    milli = _milli_range(policy)
    return milli, _units(policy.step, milli), _units(policy.minimum, milli)


def consumed(request: Decimal | None, capacity: Capacity) -> Decimal:
    """What a request takes of one capacity (calculateConsumedCapacity)."""
    policy = capacity.policy
    if request is None:
        return policy.default if policy is not None and policy.default is not None else capacity.value
    if policy is None:
        return request
    if policy.minimum is not None:
        if request < policy.minimum:
            return policy.minimum
        if policy.step is None:
            return request
        milli, step, low = _range(policy)
        scale = Decimal(1000) if milli else Decimal(1)
        req = _units(request, milli)
        if step <= 0:
            return request
        n = -((low - req) // step)  # ceil((req - low) / step)
        if low >= 0 and n > (INT64_MAX - low) // step:
            raise CapacityError(
                f"{NOT_REPRESENTABLE}: rounding request {request} up to the next step overflows"
            )
        return Decimal(low + step * n) / scale
    if policy.valid_values:
        return next((v for v in policy.valid_values if request <= v), request)
    return request


def violates(amount: Decimal, policy: CapacityPolicy | None) -> bool:
    """The amount is one the policy forbids (violatesPolicy)."""
    if policy is None or (policy.default is not None and amount == policy.default):
        return False
    if policy.minimum is not None:
        if policy.maximum is not None and amount > policy.maximum:
            return True
        if policy.step is not None:
            try:
                milli, step, low = _range(policy)
                req = _units(amount, milli)
            except CapacityError:
                return True
            return step > 0 and (req - low) % step != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def takes(
    requests: Mapping[str, Decimal] | None,
    capacities: Mapping[str, Capacity],
    already: Mapping[str, Decimal],
) -> dict[str, Decimal] | None:
    """What the request takes of each capacity of the device, or None when it does not fit:
    it names a capacity the device lacks, an amount breaks the policy, or with what is
    ``already`` taken (committed shares and this pod's) a capacity would overflow
    (CmpRequestOverCapacity). CapacityError for an amount that cannot be evaluated."""
    wanted = demand(requests, capacities)
    if wanted is None:
        return None
    out: dict[str, Decimal] = {}
    for name, amount, value in wanted:
        if already.get(name, _ZERO) + amount > value:
            return None
        out[name] = amount
    return out


_ZERO = Decimal(0)
#: (id(requests), id(capacities)) -> (requests, capacities, their demand): devices of one model
#: share one capacities mapping (objects.py interns them), so one claim's request over a
#: thousand nodes' devices is worked out once
_DEMANDS: dict[tuple[int, int], tuple[object, object, tuple[tuple[str, Decimal, Decimal], ...] | None]] = {}


def demand(
    requests: Mapping[str, Decimal] | None, capacities: Mapping[str, Capacity]
) -> tuple[tuple[str, Decimal, Decimal], ...] | None:
    """What the request takes of each capacity, with the capacity's value, whatever is taken
    already; None when it names a capacity the device lacks or an amount breaks the policy.
    CapacityError for an amount that cannot be evaluated (never remembered)."""
    key = (id(requests), id(capacities))
    hit = _DEMANDS.get(key)
    if hit is not None and hit[0] is requests and hit[1] is capacities:
        return hit[2]
    found = _demand(requests, capacities)
    if len(_DEMANDS) > 20_000:
        _DEMANDS.clear()
    _DEMANDS[key] = (requests, capacities, found)
    return found


def _demand(
    requests: Mapping[str, Decimal] | None, capacities: Mapping[str, Capacity]
) -> tuple[tuple[str, Decimal, Decimal], ...] | None:
    if requests and any(name not in capacities for name in requests):
        return None
    out: list[tuple[str, Decimal, Decimal]] = []
    for name, cap in capacities.items():
        try:
            amount = consumed((requests or {}).get(name), cap)
        except CapacityError as exc:
            raise CapacityError(f"capacity {name!r}: {exc}") from None
        if amount < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
        if violates(amount, cap.policy):
            return None
        out.append((name, amount, cap.value))
    return tuple(out)


def quantity(amount: Decimal) -> str:
    """An amount as a Kubernetes quantity the API server reads back to the same value: whole
    numbers as they are, fractions in milli-units (or as a decimal when finer)."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")
