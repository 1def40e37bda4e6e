"""SlowBind: a PreBind that waits, loaded into the real operator with $SHOAL_PLUGINS, so faults
can be injected while bindings are in flight (one plugin per module; see hold_permit.py).

It logs (INFO, to the operator's log) ``SlowBind: <ns>/<pod> waiting on node <node>`` when a
binding enters PreBind and ``SlowBind: <ns>/<pod> done on node <node>`` when it leaves, so a test
can inject its fault once a binding is known to be in flight on a given node, not after a guess.
"""

from __future__ import annotations

import asyncio
import logging
import zlib

from pydantic import Field

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import Handle
from shoal.core.framework.profile import ArgsModel
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Status

NAME = "SlowBind"

log = logging.getLogger(__name__)


class Args(ArgsModel):
    seconds: float = Field(default=1.0, ge=0, le=60)
    spread: bool = Field(default=False, description="scale the delay by a per-pod fraction in [0, 1)")


class SlowBind:
    """PreBind that waits, so a fault can be injected while bindings are in flight."""

    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        fraction = (zlib.crc32(pod.name.encode()) % 1000) / 1000 if self.args.spread else 1.0
        log.info("SlowBind: %s waiting on node %s", pod.key, node)
        await asyncio.sleep(self.args.seconds * fraction)
        log.info("SlowBind: %s done on node %s", pod.key, node)
        return SUCCESS


def new(args: Args, handle: Handle) -> SlowBind:
    return SlowBind(args)


PLUGIN_CLASS = SlowBind
