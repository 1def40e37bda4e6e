"""HoldPermit: parks every pod at its Permit gate (never allows it), for fault tests."""

from __future__ import annotations

from shoal.core.cyclestate import CycleState
from shoal.core.interfaces import Handle
from shoal.core.objects import PodInfo
from shoal.core.status import Status

NAME = "HoldPermit"


class HoldPermit:
    name = NAME

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return Status.wait("held for a test"), 600.0


def new(args: None, handle: Handle) -> HoldPermit:
    return HoldPermit()


PLUGIN_CLASS = HoldPermit
