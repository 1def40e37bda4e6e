"""Status and Code: what every extension point returns (kube-scheduler's framework.Status).

Codes::

    Success                        the plugin is satisfied
    Error                          an internal error; the pod is requeued with backoff
    Unschedulable                  the node (or pod) does not fit now; may change
    UnschedulableAndUnresolvable   will not fit whatever happens elsewhere (e.g. node selector)
    Wait                           Permit only: hold the pod at its Permit gate
    Skip                           the plugin has nothing to do for this pod (skipped later too)
    Pending                        the pod waits for something external (e.g. its gang's quorum)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def title(self) -> str:
        """``UnschedulableAndUnresolvable``: kube-scheduler's spelling (a metrics label, per call)."""
        return _TITLES[self]


_TITLES = {code: "".join(part.capitalize() for part in code.name.split("_")) for code in Code}


@dataclass(frozen=True, slots=True)
class Status:
    """An extension point's verdict. ``reasons`` are user-facing, in kube-scheduler's wording."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    #: False when retrying cannot help (a 409 on Bind: someone else bound the pod).
    requeue: bool = True

    # -- constructors --------------------------------------------------------------------------
    @staticmethod
    def success() -> Status:
        return SUCCESS

    @staticmethod
    def error(message: str, plugin: str = "", *, requeue: bool = True) -> Status:
        return Status(Code.ERROR, (message,), plugin, requeue)

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "", resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Status(code, reasons, plugin)

    @staticmethod
    def wait(reason: str = "", plugin: str = "") -> Status:
        return Status(Code.WAIT, (reason,) if reason else (), plugin)

    @staticmethod
    def skip() -> Status:
        return SKIP

    # -- predicates ----------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    @property
    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin == plugin:
            return self
        return Status(self.code, self.reasons, plugin, self.requeue)

    def __str__(self) -> str:
        where = f" [{self.plugin}]" if self.plugin else ""
        return f"{self.code.title}{where}: {self.message}" if self.reasons else f"{self.code.title}{where}"


SUCCESS = Status()
SKIP = Status(Code.SKIP)
