"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as integers.

cpu is counted in millicores, everything else in its base unit (bytes, pods, devices), rounded up
as the API server does for requests.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a quantity into a Decimal of base units."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        return Decimal(str(value))
    if not isinstance(value, str):  # null, a list or an object where a quantity belongs
        raise QuantityError(f"invalid quantity {value!r}")
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {value!r}")
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:
        raise QuantityError(f"invalid quantity {value!r}") from exc
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    return base * _SUFFIX[suffix or ""]


def to_int(resource: str, value: str | int | float) -> int:
    """A quantity in shoal's integer unit for ``resource`` (cpu: millicores), rounded up."""
    amount = parse_quantity(value)
    if resource == "cpu":
        amount *= 1000
    return math.ceil(amount)


def format_amount(resource: str, amount: int) -> str:
    """The inverse of :func:`to_int`, for messages."""
    if resource == "cpu":
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIX[suffix])
        if amount >= unit and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)
