"""Built-in plugins, one module each, and the registry (``shoal.plugins.registry``).

Every plugin module has the same shape (after kube-scheduler's ``plugins/nodename``):
``NAME``; an ``Args`` pydantic model with defaults and validation (or none); a pure helper that
does the real check on arrays; the plugin class; ``new(args, handle)``; and ``ENTRY``, the registry
entry. Third-party plugins follow the same shape and register through the entry-point group
``shoal.plugins``.
"""
