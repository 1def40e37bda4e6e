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
        milli = _milli_range(policy)
        scale = Decimal(1000) if milli else Decimal(1)
        req, step, low = _units(request, milli), _units(policy.step, milli), _units(policy.minimum, milli)
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
            milli = _milli_range(policy)
            try:
                req, step, low = (
                    _units(amount, milli),
                    _units(policy.step, milli),
                    _units(policy.minimum, milli),
                )
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
    if requests and any(name not in capacities for name in requests):
        return None
    out: dict[str, Decimal] = {}
    for name, cap in capacities.items():
        try:
            amount = consumed((requests or {}).get(name), cap)
        except CapacityError as exc:
            raise CapacityError(f"capacity {name!r}: {exc}") from None
        if amount < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
        if violates(amount, cap.policy) or already.get(name, Decimal(0)) + amount > cap.value:
            return None
        out[name] = amount
    return out


def quantity(amount: Decimal) -> str:
    """An amount as a Kubernetes quantity the API server reads back to the same value: whole
    numbers as they are, fractions in milli-units (or as a decimal when finer)."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(amount.normalize(), "f")
