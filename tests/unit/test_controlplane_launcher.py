"""The control-plane launcher's failure path, with fake binaries (no etcd, no kube-apiserver).

A failed start must stop every child it spawned and keep the work directory, so the log paths
named in the error can still be read; a normal stop removes a temporary work directory.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from shoal.testing.cluster_cli import processes_mentioning
from shoal.testing.controlplane import Binaries, ControlPlane, ControlPlaneError

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the launcher needs openssl")


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_binaries(bin_dir: Path) -> Binaries:
    """etcd prints a line and exits 3; kube-apiserver would run for a minute (a child to clean up)."""
    bin_dir.mkdir()
    etcd = _executable(bin_dir / "etcd", "#!/bin/sh\necho 'fake etcd: no data dir today'\nexit 3\n")
    # Python, not `sh -c sleep`: killing a shell would orphan its sleep, and the process keeps
    # this script's path in its command line, so the test can look for it.
    apiserver = _executable(
        bin_dir / "kube-apiserver",
        f"#!{sys.executable}\nimport time\nprint('fake kube-apiserver up', flush=True)\ntime.sleep(60)\n",
    )
    return Binaries(
        kube_version="v0.0.0-fake",
        etcd=etcd,
        kube_apiserver=apiserver,
        kube_scheduler=bin_dir / "kube-scheduler",
        helm=bin_dir / "helm",
        kube_controller_manager=bin_dir / "kube-controller-manager",
    )


def test_failed_start_keeps_the_logs_it_names_and_leaves_no_child(tmp_path: Path) -> None:
    binaries = fake_binaries(tmp_path / "bin")
    cp = ControlPlane(binaries=binaries)
    workdir = cp.dir
    try:
        with pytest.raises(ControlPlaneError) as info:
            cp.start(timeout=30)
        message = str(info.value)
        assert "etcd exited with code 3" in message
        assert "fake etcd: no data dir today" in message  # the log's tail is in the error
        named = re.findall(r"--- etcd \((\S+)\) ---", message)
        assert named == [str(workdir / "etcd.log")]
        assert Path(named[0]).read_text() == "fake etcd: no data dir today\n"  # still there
        assert f"logs kept in {workdir}" in message
        assert (workdir / "kube-apiserver.log").is_file()
        assert cp.pids == []
        assert processes_mentioning(str(tmp_path / "bin")) == []
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_stop_removes_a_temporary_workdir_but_not_one_given(tmp_path: Path) -> None:
    binaries = fake_binaries(tmp_path / "bin")
    temporary = ControlPlane(binaries=binaries)
    (temporary.dir / "etcd.log").write_text("x\n")
    temporary.stop()
    assert not temporary.dir.exists()

    given = ControlPlane(workdir=tmp_path / "given", binaries=binaries)
    given.stop()
    assert (tmp_path / "given").is_dir()


def test_feature_gates_join_the_workload_gates_in_one_flag(tmp_path: Path) -> None:
    """The API server takes one ``--feature-gates``: extra gates join the workload ones; a plane
    without the native workload API has only the extra ones (and no runtime-config)."""
    binaries = fake_binaries(tmp_path / "bin")

    def plane(**kwargs: object) -> ControlPlane:
        return ControlPlane(workdir=tmp_path / "cp", binaries=binaries, **kwargs)  # type: ignore[arg-type]

    both = plane(feature_gates=("A=true", "B=true"))._workload_args()
    gates = [a for a in both if a.startswith("--feature-gates=")]
    assert len(gates) == 1 and gates[0].endswith(",A=true,B=true") and "GenericWorkload=true" in gates[0]
    only = plane(native_workloads=False, feature_gates=("A=true",))._workload_args()
    assert only == ["--feature-gates=A=true"]
    assert plane(native_workloads=False)._workload_args() == []
