"""The one way the runtime calls a plugin: timed, and never raising.

Every extension point's loop calls its plugins through :meth:`Invoker.call` (or
:meth:`Invoker.acall` for the binding cycle's coroutines), which

* times the call and reports it to the sampled ``plugin`` metric (when the cycle is sampled);
* turns an exception into an Error :class:`~shoal.core.state.status.Status` naming the plugin, and a
  return value of the wrong shape (a forgotten ``return``, a bare Status where a tuple is due) into
  an Error saying what came back instead;
* tags every non-success status with the plugin's name, so events and metrics can say who.

What a point expects back is a :data:`Shape`: a function from the raw return value to
``(payload, status)`` that raises :class:`WrongReturn` when the value does not fit. Plugin code
(or an adapter, see :mod:`shoal.core.framework.pernode`) may raise :class:`PluginFailed` to fail a call with
a status of its own. The ``extension_point`` metric (once per point per attempt) is reported with
:meth:`Invoker.point`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from shoal.core.framework.interfaces import IntArray, PreFilterResult, Rejection
from shoal.core.framework.metrics import Metrics
from shoal.core.state.status import SUCCESS, Status

log = logging.getLogger("shoal.framework")

T = TypeVar("T")

#: raw return value -> (payload, status); raises WrongReturn when the value has the wrong shape
Shape = Callable[[object], tuple[T, Status]]


class WrongReturn(Exception):
    """A plugin returned ``value`` where ``expected`` was due."""

    def __init__(self, value: object, expected: str) -> None:
        super().__init__(f"returned {value!r} instead of {expected}")
        self.value = value
        self.expected = expected


class PluginFailed(Exception):
    """Raised inside a plugin call to fail it with ``status`` (made an Error naming the plugin)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


# -- shapes -----------------------------------------------------------------------------------------
def status_shape(value: object) -> tuple[None, Status]:
    """A plain Status (PreEnqueue, Filter per node, PostFilter, PreScore, Reserve, PreBind, Bind)."""
    if isinstance(value, Status):
        return None, value
    raise WrongReturn(value, "a Status")


def none_shape(value: object) -> tuple[None, Status]:
    """Informational points (Unreserve, PostBind): whatever comes back is ignored."""
    return None, SUCCESS


def pre_filter_shape(value: object) -> tuple[PreFilterResult | None, Status]:
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[1], Status)
        and (value[0] is None or isinstance(value[0], PreFilterResult))
    ):
        return value[0], value[1]
    raise WrongReturn(value, "(PreFilterResult | None, Status)")


def permit_shape(value: object) -> tuple[float, Status]:
    """(Status, timeout in seconds)."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], Status)
        and isinstance(value[1], int | float | np.integer | np.floating)
    ):
        return float(value[1]), value[0]
    raise WrongReturn(value, "(Status, timeout)")


def node_score_shape(value: object) -> tuple[int, Status]:
    """Per-node Score: (score, Status)."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[1], Status)
        and isinstance(value[0], int | float | np.integer | np.floating)
    ):
        return int(value[0]), value[1]
    raise WrongReturn(value, "(int, Status)")


def rejections_shape(value: object) -> tuple[Sequence[Rejection], Status]:
    """Vectorised Filter: a list or tuple of Rejection (empty: every candidate fits)."""
    if isinstance(value, list | tuple) and all(isinstance(r, Rejection) for r in value):
        return value, SUCCESS
    raise WrongReturn(value, "a sequence of Rejection")


def scores_of(value: object, n: int) -> IntArray:
    """Vectorised Score / NormalizeScore: ``n`` integers (a list or an array) as an int64 array."""
    try:
        out: IntArray = np.asarray(value, dtype=np.int64)
    except (TypeError, ValueError):
        raise WrongReturn(value, f"{n} scores") from None
    if out.ndim != 1 or len(out) != n:
        raise WrongReturn(value, f"{n} scores")
    return out


def array_shape(value: object) -> tuple[IntArray, Status]:
    """The payload of a call whose function already built (and checked) the scores."""
    if isinstance(value, np.ndarray):
        return value, SUCCESS
    raise WrongReturn(value, "an array of scores")


def _failure(name: str, exc: Exception) -> Status:
    if isinstance(exc, PluginFailed):
        return exc.status.with_plugin(name)
    if isinstance(exc, WrongReturn):
        return Status.error(str(exc), name)
    return Status.error(f"{type(exc).__name__}: {exc}", name)


def call_plugin(name: str, shape: Shape[T], fn: Callable[..., object], *args: Any) -> tuple[T | None, Status]:
    """Call ``fn(*args)`` for plugin ``name``; never raises. Untimed (see :class:`Invoker`)."""
    try:
        value, status = shape(fn(*args))
    except Exception as exc:  # a plugin bug must not kill the loop
        log.debug("plugin %s failed", name, exc_info=True)
        return None, _failure(name, exc)
    return value, (status if status.ok else status.with_plugin(name))


class Invoker:
    """Calls one profile's plugins and reports their timings (see the module docstring)."""

    def __init__(self, profile: str, metrics: Metrics) -> None:
        self.profile = profile
        self.metrics = metrics

    def point(self, title: str, began: float, status: Status) -> None:
        """One extension point's run in one attempt (``began``: ``time.perf_counter()``)."""
        self.metrics.extension_point(title, status.code.title, self.profile, time.perf_counter() - began)

    def call(
        self,
        title: str,
        name: str,
        sampled: bool,
        shape: Shape[T],
        fn: Callable[..., object],
        *args: Any,
    ) -> tuple[T | None, Status]:
        """``fn(*args)`` as plugin ``name`` at point ``title``: (payload, status); never raises.
        The payload is None when the call failed."""
        began = time.perf_counter()
        value, status = call_plugin(name, shape, fn, *args)
        if sampled:
            self.metrics.plugin(name, title, status.code.title, time.perf_counter() - began)
        return value, status

    async def acall(
        self,
        title: str,
        name: str,
        sampled: bool,
        shape: Shape[T],
        fn: Callable[..., Awaitable[object]],
        *args: Any,
    ) -> tuple[T | None, Status]:
        """:meth:`call` for a coroutine (PreBind, Bind)."""
        began = time.perf_counter()
        try:
            value, status = shape(await fn(*args))
            if not status.ok:
                status = status.with_plugin(name)
        except Exception as exc:
            log.debug("plugin %s failed", name, exc_info=True)
            value, status = None, _failure(name, exc)
        if sampled:
            self.metrics.plugin(name, title, status.code.title, time.perf_counter() - began)
        return value, status
