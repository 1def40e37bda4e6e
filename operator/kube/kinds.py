"""The kinds shoal watches, declared once for the operator, ``shoal explain`` and the benchmarks.

Order matters where a list of kinds is primed: profiles first (a pod is only queued when its
schedulerName has one), then PodGroups, nodes, and pods last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shoal.core.objects import NodeSpec, PodGroupInfo, PodInfo, parse_time
from shoal.kube.informer import Kind
from shoal.kube.wire import LIVE_PODS_SELECTOR, NAMESPACES, NODES, PODGROUPS, PODS, PROFILES, name_of, pod_uid


@dataclass
class ProfileObject:
    """A SchedulingProfile as the operator keeps it: who claims which schedulerName, since when."""

    name: str
    created: float
    generation: int
    scheduler_name: str
    spec: dict[str, Any]
    status: dict[str, Any]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ProfileObject:
        meta = obj.get("metadata") or {}
        spec = dict(obj.get("spec") or {})
        return cls(
            name=str(meta.get("name") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            generation=int(meta.get("generation") or 0),
            scheduler_name=str(spec.get("schedulerName") or ""),
            spec=spec,
            status=dict(obj.get("status") or {}),
        )


KIND_PROFILES: Kind[ProfileObject] = Kind(PROFILES, ProfileObject.from_dict, optional=True)
KIND_PODGROUPS: Kind[PodGroupInfo] = Kind(PODGROUPS, PodGroupInfo.from_dict, optional=True)
KIND_NODES: Kind[NodeSpec] = Kind(NODES, NodeSpec.from_dict, identity=name_of)


@dataclass
class NamespaceInfo:
    """A namespace's labels: pod affinity terms select namespaces by label."""

    name: str
    labels: dict[str, str]

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NamespaceInfo:
        meta = obj.get("metadata") or {}
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        return cls(str(meta.get("name") or ""), labels)


KIND_NAMESPACES: Kind[NamespaceInfo] = Kind(NAMESPACES, NamespaceInfo.from_dict, identity=name_of)
#: non-terminated pods only: a pod that finishes arrives as DELETED, which frees its resources
KIND_PODS: Kind[PodInfo] = Kind(PODS, PodInfo.from_dict, identity=pod_uid, field_selector=LIVE_PODS_SELECTOR)
