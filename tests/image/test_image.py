"""The image `make image` builds (tools/image_build.py, docs/image.md): a valid OCI image layout
whose root filesystem runs shoal as the image's user, with the image's env and entrypoint.

Skipped when no image is built (so `make test` does not need one); `make image-test` builds it and
sets SHOAL_IMAGE_REQUIRED=1, which turns every skip into a failure: CI cannot pass without these
checks having run. The layout is checked here on its own terms (digests, sizes, diff_ids), not with
the builder's code.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.image.lockfile import normalize, pins

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / os.environ.get("SHOAL_IMAGE_LAYOUT", "build/image/oci")
# crane (go-containerregistry), built from the Go module proxy by `make image-test`: a second,
# independent reader of the layout, and a registry to push it to.
CRANE = Path(os.environ.get("SHOAL_CRANE", Path.home() / ".cache/shoal/bin/crane-v0.22.1/crane"))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.slow


def need(ok: object, reason: str) -> None:
    if ok:
        return
    if os.environ.get("SHOAL_IMAGE_REQUIRED") == "1":
        pytest.fail(f"{reason} (SHOAL_IMAGE_REQUIRED=1: the image checks must run)")
    pytest.skip(reason)


@dataclass(frozen=True)
class Image:
    blobs: Path
    manifest: dict[str, Any]
    config: dict[str, Any]

    def blob(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        assert algorithm == "sha256", digest
        return self.blobs / hexdigest

    def layers(self) -> list[Path]:
        return [self.blob(x["digest"]) for x in self.manifest["layers"]]


def read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_bytes())
    assert isinstance(data, dict), path
    return data


@pytest.fixture(scope="module")
def image() -> Image:
    need((LAYOUT / "index.json").exists(), f"no image at {LAYOUT}; `make image` builds one")
    (ref,) = read_json(LAYOUT / "index.json")["manifests"]
    blobs = LAYOUT / "blobs" / "sha256"
    manifest = read_json(blobs / ref["digest"].removeprefix("sha256:"))
    config = read_json(blobs / manifest["config"]["digest"].removeprefix("sha256:"))
    return Image(blobs, manifest, config)


def test_the_layout_is_consistent(image: Image) -> None:
    """Every blob is named by its sha256 and has the size its descriptor says; the config's diff_ids
    are the sha256 of the uncompressed layers, in order."""
    assert read_json(LAYOUT / "oci-layout") == {"imageLayoutVersion": "1.0.0"}
    index = read_json(LAYOUT / "index.json")
    assert index["schemaVersion"] == 2
    (ref,) = index["manifests"]
    assert ref["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert ref["annotations"]["org.opencontainers.image.ref.name"] == VERSION
    descriptors = [ref, image.manifest["config"], *image.manifest["layers"]]
    for d in descriptors:
        data = image.blob(d["digest"]).read_bytes()
        assert f"sha256:{hashlib.sha256(data).hexdigest()}" == d["digest"]
        assert len(data) == d["size"], d["digest"]
    assert image.manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert {x["mediaType"] for x in image.manifest["layers"]} == {
        "application/vnd.oci.image.layer.v1.tar+gzip"
    }
    diff_ids = [
        f"sha256:{hashlib.sha256(gzip.decompress(p.read_bytes())).hexdigest()}" for p in image.layers()
    ]
    assert image.config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
    referenced = {d["digest"].removeprefix("sha256:") for d in descriptors[1:]} | {ref["digest"][7:]}
    assert {p.name for p in image.blobs.iterdir()} == referenced, "a blob no descriptor names"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`crane registry serve` on a free loopback port (in memory), stopped after the module."""
    need(CRANE.is_file(), f"no crane at {CRANE}; `make image-test` builds it")
    log = tmp_path_factory.mktemp("registry") / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([CRANE, "registry", "serve", "--address", "127.0.0.1:0"], stderr=out)
    try:
        deadline = time.monotonic() + 30
        while not (port := re.search(r"serving on port (\d+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield f"127.0.0.1:{port.group(1)}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_registry_takes_the_image_and_crane_validates_it(image: Image, registry: str) -> None:
    """What a team's publish step does, against a local registry: the pushed manifest keeps its
    digest (the one a chart pins), and crane re-reads every blob and checks its digests."""
    ref = f"{registry}/shoal:{VERSION}"
    push = crane("push", str(LAYOUT), ref)
    assert push.returncode == 0, push.stderr
    (manifest,) = read_json(LAYOUT / "index.json")["manifests"]
    assert push.stdout.strip() == f"{registry}/shoal@{manifest['digest']}"
    check = crane("validate", "--remote", ref)
    assert (check.returncode, check.stdout.strip()) == (0, f"PASS: {ref}"), check.stderr


def crane(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(CRANE), *args, "--insecure"]  # --insecure: the loopback registry speaks plain HTTP
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def test_the_config_is_the_dockerfiles(image: Image) -> None:
    cfg = image.config["config"]
    assert (image.config["os"], cfg["User"]) == ("linux", "65532:65532")
    assert (cfg["Entrypoint"], cfg["Cmd"]) == (["shoal"], ["run"])
    assert cfg["ExposedPorts"] == {"10259/tcp": {}}
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["PATH"].startswith("/opt/shoal/bin:")
    assert env["PYTHONUNBUFFERED"] == "1"


#: extraction filters arrived in Python 3.11.4; before them, extraction is "fully trusted" anyway
#: (a Debian 3.11.2 runs this too)
TRUSTED: dict[str, Any] = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def unpack(layer: Path, root: Path) -> None:
    """Apply one layer: a whiteout (.wh.NAME) removes NAME from the layers below."""
    with tarfile.open(layer, "r:gz") as tar:
        for member in tar:
            parent, _, name = member.name.rpartition("/")
            if name.startswith(".wh."):
                gone = root / parent / name.removeprefix(".wh.")
                if gone.is_dir() and not gone.is_symlink():
                    shutil.rmtree(gone)
                else:
                    gone.unlink(missing_ok=True)
                continue
            target = root / member.name
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            tar.extract(member, root, **TRUSTED)  # our own layers; owners as recorded


@pytest.fixture(scope="module")
def rootfs(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    need(
        os.geteuid() == 0 and shutil.which("chroot"),
        "running the image's root filesystem needs root and chroot",
    )
    root = tmp_path_factory.mktemp("image") / "rootfs"
    root.mkdir()
    for layer in image.layers():
        unpack(layer, root)
    return root


def run_in_image(image: Image, root: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """argv in the root filesystem as the image's user, with only the image's env (as a runtime)."""
    cfg = image.config["config"]
    cmd = ["chroot", f"--userspec={cfg['User']}", str(root), "/usr/bin/env", "-i", *cfg["Env"], *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_shoal_version_runs_from_the_image(image: Image, rootfs: Path) -> None:
    res = run_in_image(image, rootfs, [*image.config["config"]["Entrypoint"], "--version"])
    assert (res.returncode, res.stdout.strip()) == (0, f"shoal {VERSION}"), res.stderr


def test_shoal_run_help_runs_from_the_image(image: Image, rootfs: Path) -> None:
    res = run_in_image(image, rootfs, [*image.config["config"]["Entrypoint"], "run", "--help"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: shoal run"), res.stdout


def test_the_image_runs_as_its_user_with_exactly_the_locked_dependencies(image: Image, rootfs: Path) -> None:
    probe = (
        "import json, os, importlib.metadata as m;"
        "dists = {d.metadata['Name']: d.version for d in m.distributions()};"
        "print(json.dumps([os.getuid(), os.getgid(), dists]))"
    )
    res = run_in_image(image, rootfs, ["python", "-c", probe])
    assert res.returncode == 0, res.stderr
    uid, gid, installed = json.loads(res.stdout)
    assert (uid, gid) == (65532, 65532)
    installed = {normalize(k): v for k, v in installed.items()}
    for tool in ("pip", "setuptools"):  # the venv's own, from the base's ensurepip
        installed.pop(tool, None)
    locked = {name: version for name, (version, _) in pins(ROOT / "requirements" / "image.lock").items()}
    assert installed == {**locked, "shoal": VERSION}
