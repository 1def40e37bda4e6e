"""The Scheduling Framework core: pure Python and numpy, no I/O, no Kubernetes client, no kopf.

Everything here can be unit-tested, simulated and benchmarked without a server.
"""
