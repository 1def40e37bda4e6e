"""Kubernetes adapters (kubernetes-asyncio): binder, events, pod conditions, CRD status, leases.

The only layer that talks to the API server on the core's behalf; the core sees it through the
``Binder`` and ``Reporter`` protocols.
"""
