"""What a plugin tells the core about itself, beyond the extension points it implements.

Why: the core never names a plugin. Where it must know something about one, the plugin says so in
its registry entry (:attr:`PluginEntry.contract <shoal.core.framework.profile.PluginEntry>`), and
the core reads the declaration:

* **which pod fields it evaluates**, and at which extension point it must run for the field to
  count (:class:`Evaluates`): the never-silently-wrong check (:mod:`shoal.core.state.fidelity`)
  refuses a pod using a field whose plugins the profile leaves out, naming them;
* **its PreFilter reads only the pod** (``pod_only_pre_filter``): evicting or nominating other
  pods cannot change its result, so what-ifs about the pod may share one PreFilter run;
* **its Filter is blind to the pods a node holds** (``filter_blind_to_pods``), for a pod that uses
  none of the fields it evaluates, but for resources (what the profile's resource Filter counts,
  :class:`~shoal.core.framework.interfaces.ResourceFilter`): then preemption's reprieve and the
  nominated-pods pass do that Filter's arithmetic instead of running every Filter per node.

A third-party plugin that declares nothing is treated as the safe opposite: it evaluates no field
(so a field only it could evaluate is refused), reads more than the pod, and sees other pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shoal.core.state.fidelity import Evaluators


@dataclass(frozen=True, slots=True)
class Evaluates:
    """A pod field (a name from :mod:`shoal.core.state.fidelity`) the plugin evaluates, and the
    extension point it must run at for that (None: anywhere in the profile)."""

    field: str
    point: str | None = "filter"


@dataclass(frozen=True, slots=True)
class Contract:
    """A plugin's declarations to the core (see the module docstring)."""

    evaluates: tuple[Evaluates, ...] = ()
    pod_only_pre_filter: bool = False
    filter_blind_to_pods: bool = False


NO_CONTRACT = Contract()


def evaluators(contracts: Iterable[tuple[str, Contract]]) -> Evaluators:
    """Field -> (plugin, point) for every declaration, in the order the plugins are given."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    for name, contract in contracts:
        for e in contract.evaluates:
            out.setdefault(e.field, []).append((name, e.point))
    return {f: tuple(v) for f, v in out.items()}
