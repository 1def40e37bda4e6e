"""What a gang-placement plugin answers the gang cycle: the domains to try a gang in, in order.

A :class:`GangPlacementPlugin <shoal.core.framework.interfaces.GangPlacementPlugin>` (TopologyPlacement)
plans the trials; the gang cycle (:mod:`shoal.core.scheduling.gangs`) places the members inside each
trial's rows in turn, and whole-gang preemption (DefaultPreemption) searches inside one. How the
domains are found and costed is the plugin's (plugins/topologyplacement/domains.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Domain:
    """One domain of a level: its rows, its room (members), and the fewest rows that hold ``need``."""

    level: str
    value: str
    rows: BoolArray
    room: int
    nodes: int
    #: the fewest nodes (most room first) that hold the members needed; None if the domain cannot
    packed: BoolArray | None = None

    def describe(self) -> str:
        return f"{self.value} ({self.level})"


#: where the gang cycle puts the domain its members are being placed in (TopologyPlacement's Filter)
GANG_DOMAIN_STATE = "shoal.dev/gang-domain"


@dataclass(frozen=True)
class GangTrial:
    """One attempt at placing a gang: inside ``rows`` (None: anywhere), said as ``note``."""

    domain: Domain | None
    rows: BoolArray | None
    note: str


@dataclass(frozen=True)
class GangPlan:
    """The attempts to make, in order; ``failure`` says why there are none (a required level)."""

    trials: tuple[GangTrial, ...]
    failure: str = ""
