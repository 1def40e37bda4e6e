"""hack/k8s's scripts choose the Kubernetes release and the Go that builds it (no Go build runs
here: a fake ``go`` answers what the scripts ask, and a fake binary cache stops build.sh after
its checks)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

HACK = Path(__file__).resolve().parents[2] / "hack" / "k8s"


def versions() -> dict[str, str]:
    out = {}
    for line in (HACK / "versions.env").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def fake_go(tmp_path: Path, version: str) -> dict[str, str]:
    """An environment whose ``go env GOVERSION`` says ``version``."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(f'#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go{version} && exit 0\nexit 3\n')
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k != "GOTOOLCHAIN"}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


@pytest.mark.parametrize(
    ("local", "wanted", "toolchain"),
    [("1.26.8", "1.27.0", versions()["NEWER_GO"]), ("1.26.8", "1.26.0", ""), ("1.27.3", "1.27.0", "")],
)
def test_a_module_needing_a_newer_go_is_built_with_the_named_toolchain(
    tmp_path: Path, local: str, wanted: str, toolchain: str
) -> None:
    script = f'source "{HACK}/versions.env"; source "{HACK}/lib.sh"; newer_go_for {wanted}; '
    script += 'echo "${GOTOOLCHAIN:-}"'
    out = subprocess.run(["bash", "-c", script], env=fake_go(tmp_path, local), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == toolchain


@pytest.mark.parametrize("release", ["KUBE_VERSION", "KUBE_VERSION_NEXT"])
def test_each_release_has_a_wrapper_module_pinning_it(tmp_path: Path, release: str) -> None:
    """build.sh's checks pass for both releases (go.mod requires the release, every staging
    module is replaced by its v0.X.Y); with the binaries cached it then builds nothing."""
    version = versions()[release]
    cache = tmp_path / "bin"
    (cache / version).mkdir(parents=True)
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        binary = cache / version / name
        binary.write_text("")
        binary.chmod(0o755)
    env = {**os.environ, "SHOAL_BIN_DIR": str(cache), "SHOAL_KUBE_VERSION": version}
    out = subprocess.run(
        [str(HACK / "build.sh"), "kube-apiserver", "kube-scheduler", "kube-controller-manager"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("already built") == 3
    assert f"kube-apiserver {version} already built" in out.stdout


def test_a_release_without_a_wrapper_module_is_refused_saying_how_to_make_one(tmp_path: Path) -> None:
    env = {**os.environ, "SHOAL_BIN_DIR": str(tmp_path), "SHOAL_KUBE_VERSION": "v1.99.0"}
    out = subprocess.run([str(HACK / "build.sh"), "kube-apiserver"], env=env, capture_output=True, text=True)
    assert out.returncode == 1
    assert "no wrapper module for Kubernetes v1.99.0" in out.stderr
    assert "SHOAL_KUBE_VERSION=v1.99.0 hack/k8s/gen-mod.sh kube" in out.stderr
    assert not (tmp_path / "v1.99.0").exists()
