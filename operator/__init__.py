"""shoal: a Kubernetes scheduler built on the Scheduling Framework, in Python, run as a kopf operator.

Layers, lowest first (checked by the import-linter contracts in .importlinter; docs/architecture.md):

1. ``shoal.core``    — no I/O, no kopf, no client; itself three layers: ``state`` (typed API
                        objects, node table, cluster cache) < ``framework`` (plugin interfaces and
                        contract, runtime, Permit gates) < ``scheduling`` (queue, the pod and gang
                        cycles). It names no plugin.
2. ``shoal.plugins`` — a module per plugin, a package where it owns domain logic; the registry.
3. ``shoal.sim`` and ``shoal.migrate`` — the in-memory cluster; KubeSchedulerConfiguration import.
4. ``shoal.kube``    — kubernetes-asyncio adapters: informer, binder, events, conditions, the
                        plugins' ports, leases.
5. ``shoal.operator_app``, then ``shoal.explain_cli`` and ``shoal.cli`` — the kopf operator, the
                        scheduling loop, metrics; the command line.

``shoal.testing`` (control plane launchers, object builders) sits beside them for tests and tools.
"""

__version__ = "0.1.0"
