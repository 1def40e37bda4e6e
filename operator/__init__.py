"""shoal: a Kubernetes scheduler built on the Scheduling Framework, in Python, run as a kopf operator.

Layers, lowest first (checked by the import-linter contract in .importlinter):

1. ``shoal.core``    — the framework: objects, Status, CycleState, extension points, runtime,
                        cluster cache, queue, Permit gates, the cycles. No I/O, no kopf, no client.
2. ``shoal.plugins`` — one module per plugin and the registry (folder ``plugins/``).
3. ``shoal.sim``     — an in-memory cluster for unit tests, simulation and benchmarks.
4. ``shoal.kube``    — kubernetes-asyncio adapters: binder, events, conditions, status, leases.
5. ``shoal.operator_app`` and ``shoal.cli`` — kopf handlers, the scheduling loop, metrics, CLI.

``shoal.testing`` (control plane launcher, object builders) sits beside them for tests and tools.
"""

__version__ = "0.1.0"
