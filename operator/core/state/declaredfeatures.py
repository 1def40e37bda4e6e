"""Node declared features: what a node's kubelet says it supports, and what a pod needs of one.

Why: a kubelet (1.35 alpha, on by default since 1.36) publishes, in ``status.declaredFeatures``,
the names of the features it supports that a pod may depend on (sorted; from
k8s.io/component-helpers' feature registry), and kube-scheduler's NodeDeclaredFeatures plugin
keeps a pod off a node that lacks one it needs. Both halves are parsed here once, when the object
arrives: a node's names as a set (:func:`declared_features`), a pod's needs inferred from its spec
(:func:`inferred_features`).

Of the nine features component-helpers v0.37.2 registers, three are inferred from a pod's spec
for scheduling, whatever the feature gates: the other six (in-place resize variants, WebSockets
to the kubelet, the two DRA ones) infer nothing at scheduling time, and none has a MaxVersion
yet. Malformed input never raises: a field of the wrong type counts as absent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"

#: the ``restartPolicyRules[*].action`` that needs :data:`RESTART_ALL_CONTAINERS`
RESTART_ALL_ACTION = "RestartAllContainers"


def declared_features(value: Any) -> frozenset[str]:
    """``status.declaredFeatures`` as a set (the kubelet writes it sorted; order is not relied on).
    Not a list: none; an entry that is not a string is left out."""
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str))


def inferred_features(spec: Mapping[str, Any]) -> dict[str, str]:
    """The features a pod with this spec needs its node to declare -> the field that needs it
    (the first one found, for messages)."""
    found: dict[str, str] = {}
    for path, rules in _items(spec, ("containers", "initContainers"), "restartPolicyRules"):
        if any(isinstance(r, Mapping) and r.get("action") == RESTART_ALL_ACTION for r in rules):
            found.setdefault(RESTART_ALL_CONTAINERS, path)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        found[USER_NAMESPACES_HOST_NETWORK] = "spec.hostUsers"
    kinds = ("containers", "initContainers", "ephemeralContainers")
    for path, mounts in _items(spec, kinds, "volumeMounts"):
        for j, mount in enumerate(mounts):
            options = mount.get("bindMountOptions") if isinstance(mount, Mapping) else None
            if isinstance(options, list) and options:
                found.setdefault(VOLUME_BIND_MOUNT_OPTIONS, f"{path}[{j}].bindMountOptions")
    return found


def required_features(spec: Mapping[str, Any]) -> frozenset[str]:
    """The names of :func:`inferred_features`."""
    return frozenset(inferred_features(spec))


def _items(spec: Mapping[str, Any], kinds: tuple[str, ...], key: str) -> Iterator[tuple[str, list[Any]]]:
    """``(path, list)`` of each container's ``key`` list, over the container lists ``kinds``."""
    for kind in kinds:
        containers = spec.get(kind)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            items = container.get(key) if isinstance(container, Mapping) else None
            if isinstance(items, list):
                yield f"spec.{kind}[{i}].{key}", items
