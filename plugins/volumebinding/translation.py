"""In-tree PersistentVolumes as kube-scheduler's VolumeBinding sees them on a node whose CSINode
says CSI migration covers their plugin: translated to the CSI driver's topology.

As ``k8s.io/csi-translation-lib`` v0.37.2 (``translateTopologyFromInTreeToCSI``), read, not ported,
and only the part that changes where a volume may be used: the zone a PV names — in its node
affinity (the GA or beta zone key), else in its zone label (zones joined by ``__``) — becomes a
requirement on the CSI driver's zone key (``topology.ebs.csi.aws.com/zone`` for AWS EBS,
``topology.gke.io/zone`` for GCE PD, ``topology.cinder.csi.openstack.org/zone`` for Cinder), and a
beta region key in the affinity becomes the GA one. So on a migrated node a PV of zone ``a`` needs
the driver's zone label, which the CSI node plugin sets; an unmigrated node is checked against the
PV as written. Azure Disk and Portworx translate without touching topology. A PV the library
cannot translate (an EBS volume ID that is no ``vol-…``; GCE zones of several regions) fails the
pod's cycle on such a node, as upstream's Filter error does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from shoal.core.state.nodeselectors import Requirement, SelectorTerm

ZONE, ZONE_BETA = "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"
REGION, REGION_BETA = "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region"
#: zones in one zone label (a regional disk's)
ZONE_DELIMITER = "__"

AWS_EBS, GCE_PD, CINDER = "kubernetes.io/aws-ebs", "kubernetes.io/gce-pd", "kubernetes.io/cinder"
#: the in-tree plugins kube-scheduler 1.37 translates (its isCSIMigrationOnForPlugin)
MIGRATION_ON = frozenset(
    {AWS_EBS, GCE_PD, "kubernetes.io/azure-disk", CINDER, "kubernetes.io/portworx-volume"}
)
#: the CSI driver's zone key, for the plugins whose translation moves the zone
ZONE_KEYS = {
    AWS_EBS: "topology.ebs.csi.aws.com/zone",
    GCE_PD: "topology.gke.io/zone",
    CINDER: "topology.cinder.csi.openstack.org/zone",
}
_EBS_VOLUME = re.compile(r"^vol-[^/]*$")


class TranslationError(Exception):
    """The PV cannot be translated: upstream's ``could not translate pv: …``."""


def translated_affinity(
    plugin: str,
    source_id: str,
    labels: Mapping[str, str],
    terms: tuple[SelectorTerm, ...] | None,
) -> tuple[SelectorTerm, ...] | None:
    """The node affinity of a PV of in-tree ``plugin`` (its volume ID ``source_id``, its
    ``labels`` and required ``terms``, None for none) once translated to CSI. Returns ``terms``
    itself when the translation leaves topology alone; TranslationError when it fails."""
    key = ZONE_KEYS.get(plugin)
    if plugin == AWS_EBS and source_id.startswith("aws://"):  # aws://<zone>/<volume>
        rest = source_id[len("aws://") :]
        volume = rest.split("/", 1)[1].strip("/") if "/" in rest else ""
        if not _EBS_VOLUME.match(volume):
            raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID {source_id}")
    if plugin == GCE_PD:
        _gce_region(labels)
    if key is None:
        return terms
    zone_key, region_key = _topology_keys(labels, terms)
    out = [list(t.expressions) for t in terms or ()]
    zones = {v for reqs in out for r in reqs if r.key == zone_key for v in r.values}
    wanted = sorted({z.strip() for z in labels.get(zone_key, "").split(ZONE_DELIMITER) if z.strip()})
    if zones:
        out = [[_renamed(r, zone_key, key) for r in reqs] for reqs in out]
    elif wanted:  # the zone label becomes a requirement of every term (of a new one, if none)
        out = [[*reqs, Requirement(key, "In", tuple(wanted))] for reqs in out or [[]]]
    else:
        return terms if region_key != REGION_BETA else _regions(terms)
    if region_key == REGION_BETA:
        out = [[_renamed(r, REGION_BETA, REGION) for r in reqs] for reqs in out]
    fields = [t.fields for t in terms or ()]
    return tuple(
        SelectorTerm(tuple(reqs), fields[i] if i < len(fields) else ()) for i, reqs in enumerate(out)
    )


def _regions(terms: tuple[SelectorTerm, ...] | None) -> tuple[SelectorTerm, ...] | None:
    """``terms`` with the beta region key made the GA one."""
    if terms is None:
        return None
    return tuple(
        SelectorTerm(tuple(_renamed(r, REGION_BETA, REGION) for r in t.expressions), t.fields) for t in terms
    )


def _renamed(r: Requirement, old: str, new: str) -> Requirement:
    return Requirement(new, r.operator, r.values, r.error) if r.key == old else r


def _topology_keys(labels: Mapping[str, str], terms: tuple[SelectorTerm, ...] | None) -> tuple[str, str]:
    """Upstream's getTopologyLabel: the GA keys when the affinity names the GA zone, the beta ones
    when it names the beta zone; else by the PV's labels the same way; else the GA keys."""
    keys = {r.key for t in terms or () for r in t.expressions}
    for present in (keys, labels):
        if ZONE in present:
            return ZONE, REGION
        if ZONE_BETA in present:
            return ZONE_BETA, REGION_BETA
    return ZONE, REGION


def _gce_region(labels: Mapping[str, str]) -> None:
    """A GCE PD's volume ID names its zone, or its region when its zone label lists several
    (a regional disk): zones must be ``{locale}-{region}-{zone}`` of one region."""
    zones = (labels.get(ZONE_BETA) or labels.get(ZONE) or "").split(ZONE_DELIMITER)
    if len(zones) <= 1:
        return
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                "failed to get region from zones: zone in unexpected format, expected: "
                f"{{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        got = sorted(regions)
        raise TranslationError(
            f"failed to get region from zones: multiple or no regions gotten from zones, got: {got}"
        )
