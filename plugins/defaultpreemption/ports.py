"""DefaultPreemption's port: the API effects of a preemption (nominations, victims' conditions,
deletes and events), which kube/ (the API server) and sim/ (memory) implement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from shoal.core.state.objects import PodInfo

#: a key of ``Handle.extras``: the executor the operator (or the simulator) gives DefaultPreemption
PREEMPTION_EXECUTOR = "preemption-executor"


class PreemptionExecutor(Protocol):
    """The API effects of a preemption (the operator's is ``kube/preemption.py``)."""

    def preempt(
        self,
        preemptor: PodInfo,
        node: str,
        victims: Sequence[PodInfo],
        unnominate: Sequence[PodInfo],
        done: Callable[[bool], None],
    ) -> None:
        """Start, without waiting: set the preemptor's ``status.nominatedNodeName`` to ``node``;
        for each victim, a ``DisruptionTarget`` condition then a delete and a ``Preempted`` event;
        clear the nomination of ``unnominate`` (lower-priority pods nominated there). Call
        ``done(ok)`` when every call has been made."""
        ...

    def nominate(self, pod: PodInfo, node: str) -> None:
        """Start setting (``""``: clearing) the pod's ``status.nominatedNodeName``."""
        ...
