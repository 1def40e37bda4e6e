"""The facts of a CRD that clients depend on, comparable between two generators.

shoal generates its PodGroup CRD from pydantic models, scheduler-plugins from Go types with
controller-gen: the YAML differs in order, in ``nullable`` (pydantic's ``Optional``) and in the
standard ``apiVersion`` / ``kind`` descriptions, none of which a client sees. What it sees is kept
here: names, scope, versions, subresources, printer columns, and per field its type, format,
bounds, enum, pattern, int-or-string and description (whitespace-normalised).
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

#: schema keys that are facts of a field (``nullable`` is not: upstream omits empty fields instead)
FIELD_KEYS = ("type", "format", "minimum", "maximum", "enum", "pattern", "x-kubernetes-int-or-string")
#: standard fields every CRD has; their long descriptions are Kubernetes', not the API's
STANDARD = {"apiVersion", "kind", "metadata"}


def _text(value: str) -> str:
    return " ".join(value.split())


def _fields(schema: JSON, path: str, out: dict[str, JSON]) -> None:
    fact: JSON = {k: schema[k] for k in FIELD_KEYS if k in schema}
    if "anyOf" in schema:
        fact["anyOf"] = sorted(a["type"] for a in schema["anyOf"])
    if "description" in schema:
        fact["description"] = _text(schema["description"])
    out[path or "."] = fact
    for name, child in (schema.get("properties") or {}).items():
        if path == "" and name in STANDARD:
            continue
        _fields(child, f"{path}.{name}", out)
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), dict):
            _fields(schema[key], f"{path}[{key}]", out)


def crd_facts(crd: JSON) -> JSON:
    """The facts of ``crd`` (one served version or more), as plain data."""
    spec = crd["spec"]
    versions: JSON = {}
    for version in spec["versions"]:
        fields: dict[str, JSON] = {}
        _fields(version["schema"]["openAPIV3Schema"], "", fields)
        versions[version["name"]] = {
            "served": version["served"],
            "storage": version["storage"],
            "subresources": version.get("subresources", {}),
            "columns": [
                {k: (_text(c[k]) if k == "description" else c[k]) for k in sorted(c)}
                for c in version.get("additionalPrinterColumns", [])
            ],
            "fields": fields,
        }
    names = spec["names"]
    return {
        "name": crd["metadata"]["name"],
        "group": spec["group"],
        "scope": spec["scope"],
        "names": {
            k: names[k]
            for k in ("kind", "listKind", "plural", "singular", "shortNames", "categories")
            if k in names
        },
        "versions": versions,
    }


def main(argv: list[str]) -> int:
    """``python tests/unit/crdfacts.py CRD.yaml [NAME]``: the facts of a CRD file (e.g. scheduler-plugins'
    ``manifests/coscheduling/crd.yaml``) as YAML, to refresh tests/data/scheduler-plugins/."""
    import yaml

    name = argv[1] if len(argv) > 1 else "podgroups.scheduling.x-k8s.io"
    with open(argv[0]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d and d.get("metadata", {}).get("name") == name]
    print(yaml.safe_dump(crd_facts(docs[0]), sort_keys=False, width=100), end="")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
