"""The image's pins (docs/image.md): the base by digest, every runtime dependency by version and hash."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement

from tests.image.lockfile import normalize, pins

ROOT = Path(__file__).resolve().parents[2]
IMAGE_LOCK = ROOT / "requirements" / "image.lock"
REFRESH = "refresh it with `make image-lock` (docs/image.md)"


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_every_runtime_dependency_is_locked_at_a_version_it_allows() -> None:
    locked = pins(IMAGE_LOCK)
    for req in runtime_requirements():
        name = normalize(req.name)
        assert name in locked, f"{req.name} is a dependency of shoal but not in {IMAGE_LOCK.name}; {REFRESH}"
        version = locked[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{name}=={version} is outside {req}; {REFRESH}"
        )


def test_the_lock_closes_over_the_dependencies_dependencies() -> None:
    """What the installed shoal pulls in, transitively (markers evaluated), is all in the lock:
    the image installs with --no-deps, so a missing name would be missing at run time."""
    locked, needed, todo = pins(IMAGE_LOCK), set(), [Requirement("shoal")]
    while todo:
        req = todo.pop()
        name = normalize(req.name)
        if name in needed:
            continue
        needed.add(name)
        for raw in distribution(req.name).requires or []:
            sub = Requirement(raw)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    assert needed - {"shoal"} - set(locked) == set(), REFRESH


def test_every_lock_entry_is_an_exact_pin_with_hashes() -> None:
    for lock in (IMAGE_LOCK, ROOT / "requirements" / "build.lock"):
        text = lock.read_text()
        entries = pins(lock)
        assert entries, lock
        requirement_lines = [x for x in text.splitlines() if x and not x.startswith((" ", "#"))]
        assert len(requirement_lines) == len(entries), f"{lock.name} has a line that is not a == pin"
        assert all(hashes for _, hashes in entries.values()), f"{lock.name} has a pin without a hash"


def test_the_dockerfile_pins_its_base_by_digest_and_installs_from_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", dockerfile, re.M))
    bases = [
        args.get(b[2:-1], b) if b.startswith("${") else b
        for b in re.findall(r"^FROM (\S+)", dockerfile, re.M)
    ]
    assert bases, "no FROM"
    for base in bases:
        assert re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", base), f"base {base} is not pinned by digest"
    install = (ROOT / "hack" / "image" / "install.sh").read_text()
    assert "--require-hashes --no-deps" in install
    assert "--require-hashes -r requirements/build.lock" in dockerfile
    assert "RUN sh /tmp/image/install.sh" in dockerfile
