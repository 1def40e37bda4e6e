"""Shared fixtures. The real control plane is session-scoped and started only when a test needs it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shoal.testing.controlplane import Binaries, ControlPlane


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback, built by `make cluster-bin`; stopped at session end."""
    missing = Binaries.locate().missing()
    if missing:
        pytest.fail(f"control-plane binaries missing ({missing}); run `make cluster-bin` (make test does)")
    cp = ControlPlane()
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()
