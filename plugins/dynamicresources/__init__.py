"""The DynamicResources plugin: plugin.py is what the registry builds; the other modules are its
domain logic."""
