"""Unit tests of shoal.core.framework, mirroring operator/core/framework/."""
