"""Shared fixtures. The real control plane is session-scoped and started only when a test needs it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from shoal.testing.controlplane import Binaries, ControlPlane


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback, built by `make cluster-bin`; stopped at session end.
    A failed start keeps its logs (the error says where); so does a session with failed tests."""
    missing = Binaries.locate().missing()
    if missing:
        pytest.fail(f"control-plane binaries missing ({missing}); run `make cluster-bin` (make test does)")
    cp = ControlPlane()
    cp.start()
    try:
        yield cp
    finally:
        failed = request.session.testsfailed > 0
        cp.keep_workdir = cp.keep_workdir or failed
        cp.stop()
        if failed:
            shutil.rmtree(cp.dir / "etcd-data", ignore_errors=True)  # the logs are what is wanted
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"tests failed: control-plane logs kept in {cp.dir}")
