"""The built-in adapter kinds, one module each, registered with `@adapter(kind)`
(optimizer/adapters/registry.py): command, worker, http, python, session."""
