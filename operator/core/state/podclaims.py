"""A pod's ResourceClaims as its spec names them (``spec.resourceClaims``), with the names of the
claims made from templates (``status.resourceClaimStatuses``).

Why in the core: a pod's claims are part of the pod (PodInfo parses them once); what a claim asks
for and how devices are allocated is DynamicResources' (``shoal.plugins.dynamicresources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JSON = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry: a claim by name, or from a template (its generated claim's
    name, from ``status.resourceClaimStatuses``, is ``generated``: empty until the controller made it)."""

    name: str
    claim_name: str = ""
    template: str = ""
    generated: str = ""

    @property
    def resolved(self) -> str:
        """The claim's name, "" while a template's claim is not created yet."""
        return self.claim_name or self.generated


def pod_claims(spec: JSON, status: JSON) -> tuple[PodClaim, ...]:
    """A pod's claims, with the generated names of template claims."""
    claims = spec.get("resourceClaims")
    if not claims:  # nearly every pod: no status to read
        return ()
    generated = {
        str(s.get("name") or ""): str(s.get("resourceClaimName") or "")
        for s in status.get("resourceClaimStatuses") or ()
        if isinstance(s, Mapping)
    }
    return tuple(
        PodClaim(
            name=str(c.get("name") or ""),
            claim_name=str(c.get("resourceClaimName") or ""),
            template=str(c.get("resourceClaimTemplateName") or ""),
            generated=generated.get(str(c.get("name") or ""), ""),
        )
        for c in claims
        if isinstance(c, Mapping)
    )
