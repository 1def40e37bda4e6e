"""Read a pip-compile --generate-hashes lock (requirements/*.lock): name -> (version, hashes)."""

from __future__ import annotations

import re
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, tuple[str, list[str]]]:
    """Every pinned requirement with the sha256 hashes listed under it."""
    found: dict[str, tuple[str, list[str]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if m := _PIN.match(line):
            current = normalize(m.group(1))
            found[current] = (m.group(2), [])
        elif current and (h := _HASH.search(line)):
            found[current][1].append(h.group(1))
        elif not line.startswith(" "):
            current = ""
    return found
