"""CEL for DRA device selectors: cel-python (PyPI ``cel-python``) with the Kubernetes extensions DRA
selectors use, behind a narrow typed wrapper.

Why a wrapper: cel-python evaluates CEL's core language; Kubernetes adds libraries to it. DRA
selectors see one variable, ``device`` (``driver``, ``attributes[domain].name``,
``capacity[domain].name``, ``allowMultipleAllocations``), and use the quantity library
(``quantity("40Gi")``, ``q.compareTo(p)``, ``isGreaterThan``, ``isLessThan``, ``asInteger``,
``asApproximateFloat``, ``isInteger``, ``sign``, ``add``, ``sub``, ``isQuantity``) and the semver
library (``semver("1.2.3")``, version attributes, ``major``/``minor``/``patch``, ``compareTo``,
``isGreaterThan``, ``isLessThan``, ``isSemver``). Those are added here as cel-python functions
(a method call ``x.f(y)`` is the function ``f(x, y)`` to cel-python).

Never silently wrong: an expression that does not parse, that fails at run time (a missing
attribute, a function it lacks, a type mismatch) or that does not yield a bool raises
:class:`CelError` with the expression; the caller names the claim. Nothing here treats an error as a
match or as a mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import total_ordering
from typing import Any

import celpy
import lark
from celpy import celtypes

from shoal.core.state.quantity import QuantityError, parse_quantity


class CelError(ValueError):
    """An expression cel-python cannot compile or evaluate to a bool; says which and why."""

    def __init__(self, expression: str, why: str) -> None:
        super().__init__(f"CEL expression {expression!r}: {why}")
        self.expression = expression
        self.why = why


@total_ordering
class Quantity:
    """A Kubernetes quantity as CEL's ``kubernetes.Quantity`` (compared by value, not by text)."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.value})"


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


@total_ordering
class Semver:
    """A semantic version (CEL's ``kubernetes.Semver``; DRA ``version`` attributes)."""

    __slots__ = ("key", "text")

    def __init__(self, text: str) -> None:
        match = _SEMVER.match(text)
        if match is None:
            raise ValueError(f"invalid semver {text!r}")
        major, minor, patch, pre = match.groups()
        # a pre-release sorts before its release; pre-release identifiers compare numerically first
        pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
        self.key: tuple[Any, ...] = (int(major), int(minor), int(patch), 0 if pre else 1, pre_key)
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.key == other.key

    def __lt__(self, other: Semver) -> bool:
        return bool(self.key < other.key)

    def __hash__(self) -> int:
        return hash(self.key)


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _is_semver(text: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_SEMVER.match(str(text)) is not None)


def _same(a: Any, b: Any) -> tuple[Quantity, Quantity] | tuple[Semver, Semver]:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a, b
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a, b
    raise TypeError(f"no such overload: {type(a).__name__} and {type(b).__name__}")


def _compare(a: Any, b: Any) -> celtypes.IntType:
    x, y = _same(a, b)
    return celtypes.IntType(0 if x == y else (-1 if x < y else 1))  # type: ignore[operator]


def _amount(b: Any) -> Decimal:
    if isinstance(b, Quantity):
        return b.value
    if isinstance(b, int) and not isinstance(b, bool):
        return Decimal(int(b))
    raise TypeError(f"no such overload: quantity and {type(b).__name__}")


def _need_quantity(q: Any) -> Quantity:
    if not isinstance(q, Quantity):
        raise TypeError(f"no such overload for {type(q).__name__}")
    return q


def _as_integer(q: Any) -> celtypes.IntType:
    value = _need_quantity(q).value
    if value != value.to_integral_value():
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(value))


def _version_part(index: int) -> Callable[[Any], celtypes.IntType]:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise TypeError(f"no such overload for {type(v).__name__}")
        return celtypes.IntType(v.key[index])

    return part


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | celtypes.BoolType)


def _equal(a: Any, b: Any) -> Any:
    """``==`` as CEL's: a bool and a value of another type are unequal (cel-python compares a bool
    with an int as numbers, ``true == 1`` true, or errs, ``1 == true``), in lists and maps too (their
    elements compared the same way); the rest as cel-python (numbers of one type, strings; ``1 ==
    1.0`` stays an error, refusing the claim, never a wrong match)."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        return celpy.evaluation.bool_eq(a, b)
    if _is_bool(a) != _is_bool(b):
        return celtypes.BoolType(False)
    if isinstance(a, celtypes.ListType) and isinstance(b, celtypes.ListType):
        if len(a) != len(b):
            return celtypes.BoolType(False)
        return _all_equal(zip(a, b, strict=True))
    if isinstance(a, celtypes.MapType) and isinstance(b, celtypes.MapType):
        if len(a) != len(b) or any(not any(_true(_equal(k, j)) for j in b) for k in a):
            return celtypes.BoolType(False)
        return _all_equal((a[k], b[k]) for k in a)
    return celpy.evaluation.bool_eq(a, b)


def _all_equal(pairs: Any) -> Any:
    for x, y in pairs:
        same = _equal(x, y)
        if not _true(same):
            return same  # False, or an error
    return celtypes.BoolType(True)


def _true(value: Any) -> bool:
    return _is_bool(value) and bool(value)


def _unequal(a: Any, b: Any) -> Any:
    same = _equal(a, b)
    return celtypes.BoolType(not same) if isinstance(same, bool | celtypes.BoolType) else same


def _contains(item: Any, container: Any) -> Any:
    """``in`` with CEL's equality for a list's elements (``1 in [true]`` is false); a map's keys
    as cel-python."""
    if isinstance(container, celtypes.ListType) and not isinstance(item, Exception):
        return celtypes.BoolType(any(_true(_equal(item, e)) for e in container))
    return celpy.evaluation.operator_in(item, container)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_==_": _equal,
    "_!=_": _unequal,
    "_in_": _contains,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": lambda text: Semver(str(text)),
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "sign": lambda q: celtypes.IntType((_need_quantity(q).value > 0) - (_need_quantity(q).value < 0)),
    "isInteger": lambda q: celtypes.BoolType(
        _need_quantity(q).value == _need_quantity(q).value.to_integral_value()
    ),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_need_quantity(q).value)),
    "add": lambda q, b: Quantity(_need_quantity(q).value + _amount(b)),
    "sub": lambda q, b: Quantity(_need_quantity(q).value - _amount(b)),
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
}


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: a domain the device has nothing in is an empty
    map (so ``has(device.attributes["x"].y)`` is false), as in Kubernetes."""

    def __getitem__(self, key: Any) -> Any:
        if super().__contains__(key):
            return super().__getitem__(key)
        return celtypes.MapType()


def _cel_value(value: Any) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "version":
        try:
            return Semver(str(value[1]))
        except ValueError:
            return celtypes.StringType(str(value[1]))
    return celtypes.StringType(str(value))


def _by_domain(values: Mapping[str, Any], convert: Callable[[Any], Any]) -> _Domains:
    out: dict[str, dict[str, Any]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        out.setdefault(domain, {})[name] = convert(value)
    return _Domains(
        {
            celtypes.StringType(d): celtypes.MapType({celtypes.StringType(k): v for k, v in m.items()})
            for d, m in out.items()
        }
    )


def device_activation(
    driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, int], multiple: bool = False
) -> dict[str, Any]:
    """The CEL variables a selector sees for one device (fully qualified names split by domain)."""
    device = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _by_domain(attributes, _cel_value),
            celtypes.StringType("capacity"): _by_domain(capacity, lambda v: Quantity(Decimal(v))),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(multiple),
        }
    )
    return {"device": device}


#: one thing a selector reads of a device: ``("driver",)``, ``("allowMultipleAllocations",)``, or
#: ``("attributes" | "capacity", domain, name)``
Read = tuple[str, ...]

_WHOLE = frozenset({"driver", "allowMultipleAllocations"})
_BY_DOMAIN = frozenset({"attributes", "capacity"})
_PLAIN_STRING = re.compile(r"""^(?:"([^"\\]*)"|'([^'\\]*)')$""")


def _reads(ast: Any) -> tuple[Read, ...] | None:
    """What of ``device`` the expression reads, when every use of ``device`` is one of
    ``device.driver``, ``device.allowMultipleAllocations`` or
    ``device.attributes|capacity["<domain>"].<name>`` (or ``["<name>"]``) with plain string
    literals; None otherwise (``device`` used any other way: its result may depend on anything).
    The result of such an expression is a function of those values alone."""
    found: list[Read] = []

    def walk(node: Any) -> bool:
        if not isinstance(node, lark.Tree):
            return True
        if node.data == "member":
            path = _device_path(node)
            if path is not None:
                if path not in found:
                    found.append(path)
                return True
        if node.data in ("ident", "dot_ident") and any(
            isinstance(c, lark.Token) and c.value == "device" for c in node.children
        ):
            return False  # ``device`` as something else than a recognised path
        return all(walk(c) for c in node.children)

    return tuple(found) if walk(ast) else None


def _device_path(member: lark.Tree[Any]) -> Read | None:
    """``member`` as a whole recognised device path, or None."""
    if len(member.children) != 1 or not isinstance(member.children[0], lark.Tree):
        return None
    inner = member.children[0]
    if inner.data == "member_dot" and len(inner.children) == 2 and isinstance(inner.children[1], lark.Token):
        base, name = inner.children[0], str(inner.children[1])
        if _is_device(base):
            return (name,) if name in _WHOLE else None
        where = _domain_of(base)
        return (*where, name) if where is not None else None
    if inner.data == "member_index" and len(inner.children) == 2:
        where = _domain_of(inner.children[0])
        key = _string_literal(inner.children[1])
        return (*where, key) if where is not None and key is not None else None
    return None


def _domain_of(member: Any) -> tuple[str, str] | None:
    """``device.attributes["<domain>"]`` or ``device.capacity["<domain>"]``: (kind, domain)."""
    if not (isinstance(member, lark.Tree) and member.data == "member" and len(member.children) == 1):
        return None
    index = member.children[0]
    if not (isinstance(index, lark.Tree) and index.data == "member_index" and len(index.children) == 2):
        return None
    domain = _string_literal(index.children[1])
    kinds = index.children[0]
    if domain is None or not (isinstance(kinds, lark.Tree) and kinds.data == "member"):
        return None
    dot = kinds.children[0] if len(kinds.children) == 1 else None
    if not (isinstance(dot, lark.Tree) and dot.data == "member_dot" and len(dot.children) == 2):
        return None
    kind = str(dot.children[1])
    return (kind, domain) if kind in _BY_DOMAIN and _is_device(dot.children[0]) else None


def _is_device(member: Any) -> bool:
    """``member`` is the bare identifier ``device``."""
    chain = [member]
    while isinstance(chain[-1], lark.Tree) and len(chain[-1].children) == 1:
        chain.append(chain[-1].children[0])
    datas = [n.data for n in chain if isinstance(n, lark.Tree)]
    leaf = chain[-1]
    return datas == ["member", "primary", "ident"] and isinstance(leaf, lark.Token) and leaf.value == "device"


def _string_literal(expr: Any) -> str | None:
    """The value of an expression that is one plain string literal (no escapes), else None."""
    node = expr
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        if node.data == "literal":
            token = node.children[0]
            match = _PLAIN_STRING.match(str(token)) if isinstance(token, lark.Token) else None
            return next(g for g in match.groups() if g is not None) if match else None
        node = node.children[0]
    return None


def read_key(
    driver: str,
    attributes: Mapping[str, Any],
    capacity: Mapping[str, int],
    multiple: bool,
    reads: tuple[Read, ...],
) -> tuple[Any, ...]:
    """What the device holds of each of ``reads`` (typed: a bool true is not the int 1; an
    absent value is ``None``): two devices with the same key give a selector reading only those
    the same result."""
    out: list[Any] = []
    for path in reads:
        if path[0] == "driver":
            out.append(driver)
        elif path[0] == "allowMultipleAllocations":
            out.append(multiple)
        else:
            kind, domain, name = path
            qualified = f"{domain}/{name}" if domain else name
            values: Mapping[str, Any] = attributes if kind == "attributes" else capacity
            value = values.get(qualified, _ABSENT)
            out.append(None if value is _ABSENT else (type(value), value))
    return tuple(out)


_ABSENT = object()


class Selector:
    """One compiled CEL selector; ``reads``: what of ``device`` it reads, when that is known
    (see :func:`_reads`)."""

    __slots__ = ("_program", "expression", "reads")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        env = celpy.Environment()
        try:
            ast = env.compile(expression)
        except Exception as exc:  # cel-python's parse errors have no common base worth naming
            raise CelError(expression, f"compilation failed: {_first_line(exc)}") from None
        self._program = env.program(ast, functions=FUNCTIONS)
        self.reads = _reads(ast)

    def matches(self, activation: Mapping[str, Any]) -> bool:
        """Whether the device matches; CelError when the expression fails or is not a bool."""
        try:
            result = self._program.evaluate(dict(activation))
        except Exception as exc:  # CELEvalError and whatever a function raised
            raise CelError(self.expression, f"runtime error: {_first_line(exc)}") from None
        if isinstance(result, Exception):
            raise CelError(self.expression, f"runtime error: {_first_line(result)}")
        if isinstance(result, celtypes.BoolType | bool):
            return bool(result)
        raise CelError(self.expression, f"must return bool, got {type(result).__name__}")


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    text = text.split(" (in activation")[0].strip()  # cel-python appends its whole activation
    return text.splitlines()[0][:300] if text else type(exc).__name__


_COMPILED: dict[str, Selector | CelError] = {}


def compile_selector(expression: str) -> Selector:
    """A compiled selector, cached by text (DeviceClasses and claims repeat the same few); raises
    CelError (cached too) for one that does not compile."""
    found = _COMPILED.get(expression)
    if found is None:
        try:
            found = Selector(expression)
        except CelError as exc:
            found = exc
        if len(_COMPILED) > 4096:
            _COMPILED.clear()
        _COMPILED[expression] = found
    if isinstance(found, CelError):
        raise found
    return found
