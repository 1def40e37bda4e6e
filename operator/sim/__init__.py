"""The simulator: shoal's core on an in-memory cluster (cluster.py), no API server."""
