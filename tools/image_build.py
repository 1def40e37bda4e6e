"""Build shoal's image without a container engine: the Dockerfile's recipe on a Debian rootfs.

The Dockerfile's base (python:3.11-slim, pinned by digest) cannot be pulled on a machine without a
registry, so the base layer here is Debian bookworm from Debian's own packages (debootstrap
--variant=minbase plus python3.11), cached under the cache folder by a key of its inputs. The app
layer is what hack/image/install.sh (the Dockerfile's RUN step) changes when run in a chroot of that
base, with the hash-locked wheels downloaded beforehand; the image config (env, user, ports,
entrypoint, cmd) is read from the Dockerfile's final stage. The result is an OCI image layout.

    python tools/image_build.py [--out build/image/oci]

Cache: ${SHOAL_IMAGE_CACHE:-~/.cache/shoal/image}. A warm cache needs no network. A failed download
ends with one line saying what could not be fetched.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SHOAL_IMAGE_CACHE", Path.home() / ".cache" / "shoal" / "image"))
MIRROR = os.environ.get("SHOAL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"
# python3-distutils provides the virtual python3.11-distutils that python3.11-venv needs
# (debootstrap does not resolve virtual packages); passwd has groupadd/useradd.
PACKAGES = ("python3.11", "python3.11-venv", "python3-distutils", "passwd")
BASE_RECIPE = 1  # bump when the base's cleanup below changes, so a stale cached base is not reused
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Contents left out of both layers: a container runtime mounts these.
RUNTIME_DIRS = ("dev", "proc", "sys")
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class BuildError(Exception):
    """A step that failed; main() prints it as one line."""


@dataclass(frozen=True)
class Layer:
    path: Path  # gzip'd tar
    digest: str  # sha256 of the gzip'd bytes
    diff_id: str  # sha256 of the tar
    size: int
    created_by: str


class _Hashing:
    """A write-only file that hashes and counts what passes through it."""

    def __init__(self, sink: IO[bytes]) -> None:
        self.sink, self.sha, self.size = sink, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.sink.write(data)

    def flush(self) -> None:
        self.sink.flush()


def run(cmd: list[str], what: str, log: Path | None = None, hint: str = "", **kw: Any) -> None:
    out = log.open("wb") if log else None
    try:
        res = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT if out else None, check=False, **kw)
    finally:
        if out:
            out.close()
    if res.returncode != 0:
        where = f"; log: {log}" if log else ""
        raise BuildError(f"{what} failed (exit {res.returncode}{hint}){where}")


def tree(root: Path) -> Iterator[tuple[str, Path]]:
    """(arcname, path) of every entry under root, parents first, sorted; runtime dirs left empty."""
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts and rel.parts[0] in RUNTIME_DIRS:
            dirnames[:] = []
            continue
        dirnames.sort()
        for name in sorted([*dirnames, *filenames]):
            yield (rel / name).as_posix(), Path(dirpath) / name


def write_layer(out: Path, entries: Iterator[tuple[str, Path | None]], created_by: str) -> Layer:
    """Write (arcname, path) entries as a gzip'd tar; a path of None is a whiteout for arcname."""
    with out.open("wb") as raw:
        packed = _Hashing(raw)
        with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=6) as gz:
            plain = _Hashing(gz)  # type: ignore[arg-type]
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for arcname, path in entries:
                    add_entry(tar, arcname, path)
    return Layer(
        out, f"sha256:{packed.sha.hexdigest()}", f"sha256:{plain.sha.hexdigest()}", packed.size, created_by
    )


def add_entry(tar: tarfile.TarFile, arcname: str, path: Path | None) -> None:
    if path is None:
        parent, _, name = arcname.rpartition("/")
        info = tarfile.TarInfo(f"{parent}/.wh.{name}" if parent else f".wh.{name}")
        tar.addfile(info)
        return
    info = tar.gettarinfo(str(path), arcname)
    if info.type not in (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE):
        return  # sockets, fifos, device nodes: none belong in an image layer
    info.uname = info.gname = ""
    info.mtime = int(info.mtime)
    if info.isreg():
        with path.open("rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


def stat_key(info: tarfile.TarInfo | os.stat_result, link: str = "") -> tuple[Any, ...]:
    if isinstance(info, tarfile.TarInfo):
        return (
            info.mode & 0o7777,
            info.uid,
            info.gid,
            info.size if info.isreg() else 0,
            int(info.mtime),
            link,
        )
    return (info.st_mode & 0o7777, info.st_uid, info.st_gid, info.st_size, int(info.st_mtime), link)


def base_key() -> str:
    inputs: dict[str, Any] = {"suite": SUITE, "mirror": MIRROR, "packages": PACKAGES}
    inputs |= {"arch": platform.machine(), "recipe": BASE_RECIPE}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def debootstrap_command() -> tuple[list[str], dict[str, str]]:
    """The debootstrap to run and its environment: the installed one, or else Debian's package
    fetched with ``apt-get download`` and unpacked into the cache (a shell script with its data
    directory; nothing is installed on the machine), so a fresh Debian machine needs no set-up."""
    env = dict(os.environ)
    if (installed := shutil.which("debootstrap")) is not None:
        return [installed], env
    home = CACHE / "debootstrap"
    script = home / "usr" / "sbin" / "debootstrap"
    if not script.exists():
        if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
            raise BuildError("debootstrap is not installed, apt-get cannot fetch it, and no base is cached")
        print("image: fetching Debian's debootstrap package (apt-get download) into the cache", flush=True)
        with tempfile.TemporaryDirectory(dir=CACHE, prefix="debootstrap-") as tmp:
            hint = "; apt-get download debootstrap: are Debian's package lists reachable?"
            run(["apt-get", "download", "-q", "debootstrap"], "fetching debootstrap", hint=hint, cwd=tmp)
            debs = sorted(Path(tmp).glob("debootstrap_*.deb"))
            if not debs:
                raise BuildError("apt-get download debootstrap wrote no package")
            unpacked = Path(tmp) / "root"
            run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], "unpacking debootstrap")
            if home.exists():
                shutil.rmtree(home)
            unpacked.rename(home)
    env["DEBOOTSTRAP_DIR"] = str(home / "usr" / "share" / "debootstrap")
    return [str(script)], env


def base_layer() -> Layer:
    """The Debian base layer, from the cache or built by debootstrap (the only step needing Debian)."""
    key = base_key()
    meta_path = CACHE / f"base-{key}.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        return Layer(CACHE / meta["file"], meta["digest"], meta["diff_id"], meta["size"], meta["created_by"])
    CACHE.mkdir(parents=True, exist_ok=True)
    debootstrap, env = debootstrap_command()
    (CACHE / "debs").mkdir(exist_ok=True)
    created_by = f"debootstrap --variant=minbase --include={','.join(PACKAGES)} {SUITE} {MIRROR}"
    print(f"image: building the base ({created_by}; cold: a few minutes)", flush=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="base-") as tmp:
        rootfs, log = Path(tmp) / "rootfs", CACHE / f"base-{key}.log"
        cmd = [*debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}"]
        cmd += [f"--cache-dir={CACHE / 'debs'}", SUITE, str(rootfs), MIRROR]
        run(cmd, f"debootstrap of {SUITE} from {MIRROR}", log=log, hint="; is the mirror reachable?", env=env)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "tmp", "var/tmp", "var/log"):
            for p in (rootfs / leftover).glob("*"):
                if p.is_file() or p.is_symlink():
                    p.unlink()
                elif p.is_dir() and p.name != "partial":
                    shutil.rmtree(p)
        layer = write_layer(CACHE / f"base-{key}.tar.gz", tree(rootfs), created_by)
    meta = {"file": layer.path.name, "digest": layer.digest, "diff_id": layer.diff_id}
    meta |= {"size": layer.size, "created_by": created_by}
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return layer


def locked_wheels(lock: Path) -> Path:
    """The locked wheels in the cache; the network is asked only for what the cache lacks."""
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    pip = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
    ]
    pip += ["-r", str(lock), "-d", str(dest)]
    offline = subprocess.run(
        [*pip, "--no-index", "--find-links", str(dest)], capture_output=True, check=False
    )
    if offline.returncode != 0:
        print("image: downloading the locked wheels from PyPI", flush=True)
        what, log = f"pip download of {lock.relative_to(ROOT)}", CACHE / "pip-download.log"
        run([*pip, "--retries", "2", "--timeout", "30"], what, log=log, hint="; is PyPI reachable?")
    return dest


def shoal_wheel(dest: Path) -> Path:
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dest),
            str(ROOT),
        ],
        "building the shoal wheel",
    )
    (wheel,) = dest.glob("shoal-*.whl")
    return wheel


def final_stage(dockerfile: Path) -> dict[str, Any]:
    """ENV, USER, WORKDIR, EXPOSE, ENTRYPOINT and CMD of the Dockerfile's last stage, as config."""
    lines: list[str] = []
    for raw in dockerfile.read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + raw.strip()
        else:
            lines.append(raw.strip())
    stage = [
        line
        for i, line in enumerate(lines)
        if i > max(j for j, x in enumerate(lines) if x.startswith("FROM "))
    ]
    env = {"PATH": DEFAULT_PATH}
    cfg: dict[str, Any] = {}
    for line in stage:
        op, _, rest = line.partition(" ")
        if op == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                for ref, old in ((f"${{{k}}}", v) for k, v in env.items()):
                    value = value.replace(ref, old)
                env[name] = value.replace("$PATH", env["PATH"])
        elif op in ("ENTRYPOINT", "CMD"):
            cfg[op.title() if op == "CMD" else "Entrypoint"] = json.loads(rest)
        elif op == "USER":
            cfg["User"] = rest.strip()
        elif op == "WORKDIR":
            cfg["WorkingDir"] = rest.strip()
        elif op == "EXPOSE":
            cfg["ExposedPorts"] = {(p if "/" in p else f"{p}/tcp"): {} for p in rest.split()}
    cfg["Env"] = [f"{k}={v}" for k, v in env.items()]
    return cfg


def app_layer(base: Layer, work: Path, env: list[str], out: Path) -> Layer:
    """What hack/image/install.sh changes in a chroot of the base, as a layer (with whiteouts)."""
    rootfs = work / "rootfs"
    rootfs.mkdir()
    run(["tar", "--numeric-owner", "-xpzf", str(base.path), "-C", str(rootfs)], "unpacking the base layer")
    before = snapshot(rootfs)
    (rootfs / "tmp" / "image").mkdir(parents=True)
    shutil.copy2(ROOT / "requirements" / "image.lock", rootfs / "tmp" / "image" / "image.lock")
    shutil.copy2(ROOT / "hack" / "image" / "install.sh", rootfs / "tmp" / "image" / "install.sh")
    shutil.copytree(locked_wheels(ROOT / "requirements" / "image.lock"), rootfs / "wheels" / "deps")
    shoal_wheel(rootfs / "wheels")
    # pip and useradd may write to /dev/null; a runtime provides /dev, the chroot does not
    with contextlib.suppress(OSError):
        os.mknod(rootfs / "dev" / "null", 0o20666, os.makedev(1, 3))
    cmd = [
        "chroot",
        str(rootfs),
        "/usr/bin/env",
        "-i",
        *env,
        "HOME=/root",
        "/bin/sh",
        "/tmp/image/install.sh",
    ]
    run(cmd, "hack/image/install.sh in the chroot", log=work.parent / "install.log")
    after = snapshot(rootfs)
    changed = [(arc, rootfs / arc) for arc, key in after.items() if before.get(arc) != key]
    gone = [a for a in before if a not in after and (a.rpartition("/")[0] or "/") in (*after, "/")]
    entries: list[tuple[str, Path | None]] = [*changed, *((a, None) for a in sorted(gone))]
    return write_layer(out, iter(entries), "RUN sh /tmp/image/install.sh (hack/image/install.sh)")


def snapshot(rootfs: Path) -> dict[str, tuple[Any, ...]]:
    """arcname -> (mode, uid, gid, size, mtime, link target) of every entry of a rootfs."""
    return {arc: stat_key(os.lstat(p), os.readlink(p) if p.is_symlink() else "") for arc, p in tree(rootfs)}


def blob(blobs: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_layout(out: Path, layers: list[Layer], config: dict[str, Any], version: str) -> str:
    """An OCI image layout (oci-layout, index.json, blobs/sha256/*); returns the manifest digest."""
    if out.exists():
        shutil.rmtree(out)
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    for layer in layers:
        shutil.copyfile(layer.path, blobs / layer.digest.removeprefix("sha256:"))
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    image: dict[str, Any] = {"architecture": arch, "os": "linux", "config": config}
    image["rootfs"] = {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]}
    image["history"] = [{"created_by": layer.created_by} for layer in layers]
    cfg = blob(blobs, json.dumps(image, sort_keys=True).encode())
    manifest: dict[str, Any] = {"schemaVersion": 2, "mediaType": MANIFEST_TYPE}
    manifest["config"] = {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg}
    manifest["layers"] = [{"mediaType": LAYER_TYPE, "digest": x.digest, "size": x.size} for x in layers]
    man = blob(blobs, json.dumps(manifest, sort_keys=True).encode())
    ref: dict[str, Any] = {
        "mediaType": MANIFEST_TYPE,
        **man,
        "platform": {"architecture": arch, "os": "linux"},
    }
    ref["annotations"] = {"org.opencontainers.image.ref.name": version}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [ref]}
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    (out / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}\n')
    return str(man["digest"])


def build(out: Path) -> str:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    config = final_stage(ROOT / "Dockerfile")
    base = base_layer()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="work-") as tmp:
        app = app_layer(base, Path(tmp), config["Env"], Path(tmp) / "app.tar.gz")
        digest = write_layout(out, [base, app], config, version)
    print(
        f"image: shoal {version} -> {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({digest})"
    )
    return digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "image" / "oci")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("image: the daemonless build needs root (debootstrap, chroot)", file=sys.stderr)
        return 1
    try:
        build(args.out.resolve())
    except BuildError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
