"""VolumeAttachments (``storage.k8s.io/v1``) as NodeVolumeLimits reads them, and its store of them.

Why: kube-scheduler 1.37 counts a node's VolumeAttachments against its CSI attach limits (a volume
stays attached, and takes a slot, after the pod that used it left, until the attach-detach
controller detaches it). Only the node, the attacher and the PV's name are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shoal.core.framework.interfaces import ClusterEvent, EventKind
from shoal.plugins.volumebinding.objects import PVInfo


@dataclass(frozen=True, slots=True)
class VolumeAttachmentInfo:
    name: str
    node: str = ""
    attacher: str = ""
    #: ``spec.source.persistentVolumeName`` (None: an inline volume's attachment)
    pv_name: str | None = None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> VolumeAttachmentInfo:
        spec = obj.get("spec") or {}
        pv = (spec.get("source") or {}).get("persistentVolumeName")
        return cls(
            name=str((obj.get("metadata") or {}).get("name") or ""),
            node=str(spec.get("nodeName") or ""),
            attacher=str(spec.get("attacher") or ""),
            pv_name=str(pv) if pv else None,
        )


@dataclass
class Attachments:
    """The VolumeAttachments by node, then name (a store shared by every profile)."""

    #: the objects it takes (core/framework/interfaces.py: Store)
    kinds: ClassVar[tuple[type, ...]] = (VolumeAttachmentInfo,)
    by_node: dict[str, dict[str, VolumeAttachmentInfo]] = field(default_factory=dict)
    _node_of: dict[str, str] = field(default_factory=dict)

    def apply(self, va: Any, deleted: bool = False) -> ClusterEvent | None:
        """Record (or forget) one attachment. Only one that goes frees room (upstream's only hint
        for VolumeAttachments): an added one is no event."""
        old = self._node_of.pop(va.name, None)  # a re-list's "gone" knows only the name
        if old is not None:
            on_node = self.by_node[old]
            del on_node[va.name]
            if not on_node:
                del self.by_node[old]
        if not deleted:
            self._node_of[va.name] = va.node
            self.by_node.setdefault(va.node, {})[va.name] = va
            return None
        return ClusterEvent(EventKind.STORAGE_CHANGE, va)

    def volumes(self, node: str, pvs: Mapping[str, PVInfo]) -> dict[str, str]:
        """``attacher/volumeHandle`` -> attacher of the CSI volumes attached to ``node``
        (kube-scheduler's ``getNodeVolumeAttachmentInfo``: an attachment without an attacher or a
        PV, or whose PV is unknown or not a CSI volume, is left out)."""
        out: dict[str, str] = {}
        for va in self.by_node.get(node, {}).values():
            pv = pvs.get(va.pv_name) if va.attacher and va.pv_name else None
            if pv is not None and pv.csi is not None:
                out[f"{va.attacher}/{pv.csi[1]}"] = va.attacher
        return out
