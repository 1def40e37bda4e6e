"""Unit tests of shoal.core.state, mirroring operator/core/state/."""
