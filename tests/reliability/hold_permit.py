"""HoldPermit: parks every pod at its Permit gate (never allows it), for fault tests.

It logs (INFO, to the operator's log) ``HoldPermit: <ns>/<pod> held on node <node>`` as it parks a
pod, which is after the pod was assumed and reserved there, so a test can act once the node is
known to be taken instead of after a guessed sleep.
"""

from __future__ import annotations

import logging

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Handle
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import Status

NAME = "HoldPermit"

log = logging.getLogger(__name__)


class HoldPermit:
    name = NAME

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        log.info("HoldPermit: %s held on node %s", pod.key, node)
        return Status.wait("held for a test"), 600.0


def new(args: None, handle: Handle) -> HoldPermit:
    return HoldPermit()


PLUGIN_CLASS = HoldPermit
