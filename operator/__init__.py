"""shoal: a Kubernetes scheduler built on the Scheduling Framework, in Python, run as a kopf operator.

Layers, lowest first (checked by the import-linter contracts in .importlinter; docs/architecture.md):

1. ``shoal.core``    — no I/O, no kopf, no client; itself three layers: ``state`` (typed API
                        objects, node table, cluster cache) < ``framework`` (plugin interfaces,
                        runtime, Permit gates) < ``scheduling`` (queue, the pod and gang cycles).
2. ``shoal.plugins`` — a module per plugin, a package where it owns domain logic; the registry.
3. ``shoal.sim``     — an in-memory cluster for unit tests, simulation and benchmarks.
4. ``shoal.kube``    — kubernetes-asyncio adapters: binder, events, conditions, status, leases.
5. ``shoal.operator_app`` and ``shoal.cli`` — kopf handlers, the scheduling loop, metrics, CLI.

``shoal.testing`` (control plane launcher, object builders) sits beside them for tests and tools.
"""

__version__ = "0.1.0"
