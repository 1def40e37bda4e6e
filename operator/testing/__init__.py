"""Helpers for tests, the demo and benchmarks: the real control plane and object builders."""
