"""How a pod names its gang, in each of the three gang APIs shoal reads.

Why a module of its own: the link is read when a pod is parsed (``shoal.core.state.objects``) and the
PodGroup parsers (``shoal.core.state.workloads``, ``shoal.core.state.volcano``) need the same names; keeping
them here, with no import of the object views, lets both sides import them.

=============================================  =========================  =======================
pod field                                      PodGroup API               key suffix
=============================================  =========================  =======================
``spec.schedulingGroup.podGroupName``          ``scheduling.k8s.io``      ``@scheduling.k8s.io``
label ``scheduling.x-k8s.io/pod-group``        ``scheduling.x-k8s.io``    (none)
annotation ``scheduling.k8s.io/group-name``    ``scheduling.volcano.sh``  ``@scheduling.volcano.sh``
=============================================  =========================  =======================

A pod with more than one link belongs to the first in that order (kube-scheduler reads only the
native one; scheduler-plugins only its label; Volcano only its annotation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: the annotation Volcano's job and PodGroup controllers (and KubeRay's Volcano integration) put
#: on every member pod; the name is Kubernetes-flavoured for history, the PodGroup is Volcano's
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PLUGINS_GROUP_API = "scheduling.x-k8s.io"
NATIVE_GROUP_API = "scheduling.k8s.io"
VOLCANO_GROUP_API = "scheduling.volcano.sh"


def scheduling_group_name(spec: Mapping[str, Any]) -> str | None:
    """``spec.schedulingGroup.podGroupName``: the native PodGroup a pod belongs to."""
    group = spec.get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return str(name) if name else None


def pod_group_link(
    spec: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[str | None, str, str | None]:
    """(PodGroup name or None, its API, the metadata field that links it or None).

    The field is None for the native link (``spec.schedulingGroup`` is a spec field, which
    ``shoal.core.state.fidelity.fields_used`` already records)."""
    native = scheduling_group_name(spec)
    if native:
        return native, NATIVE_GROUP_API, None
    if labels.get(POD_GROUP_LABEL):
        return labels[POD_GROUP_LABEL], PLUGINS_GROUP_API, f"metadata.labels[{POD_GROUP_LABEL}]"
    if annotations.get(VOLCANO_GROUP_ANNOTATION):
        name = annotations[VOLCANO_GROUP_ANNOTATION]
        return name, VOLCANO_GROUP_API, f"metadata.annotations[{VOLCANO_GROUP_ANNOTATION}]"
    return None, PLUGINS_GROUP_API, None
