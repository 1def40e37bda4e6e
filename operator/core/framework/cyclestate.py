"""CycleState: per-pod, per-cycle scratch space shared by a profile's plugins.

PreFilter/PreScore compute once and store here; Filter/Score read it. It lives for one scheduling
cycle and the pod's binding cycle, never longer. ``skip_filter``/``skip_score`` record the plugins
that returned Skip at PreFilter/PreScore, so the runtime does not call them.
"""

from __future__ import annotations

from typing import Any


class CycleState:
    __slots__ = ("_data", "sample_plugins", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        #: time each plugin call of this cycle (one cycle in ten, see runtime.PLUGIN_METRICS_EVERY)
        self.sample_plugins = False

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def require(self, key: str) -> Any:
        """What an earlier point of the same plugin stored: a Filter (Score) reading its PreFilter
        (PreScore) state. A Skip there skips this point too, so a missing key means the earlier
        point never ran: an error, never "every node fits" (as upstream's getPreFilterState)."""
        if key not in self._data:
            raise LookupError(f"{key} not in the cycle state: its earlier extension point did not run")
        return self._data[key]

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def delete(self, key: str) -> None:
        self._data.pop(key, None)
