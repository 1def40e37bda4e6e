"""Unit tests of shoal.core.scheduling, mirroring operator/core/scheduling/."""
