"""The adapter settings of an agent table, as the adapters read them.

The models live in `optimizer/core/adapter_settings.py` (the agent table in core/project.py
embeds them, and core may not import this package); this module names them for the adapter
code. `AdapterSpec` is the settings of a kind that starts a program (`command`, `worker`): what
process hygiene (process.py) and the worker pool (worker.py) read.
"""

from __future__ import annotations

from promptloop.optimizer.core.adapter_settings import (
    DEFAULT_MAX_OUTPUT,
    MB,
    AdapterKind,
    AdapterSettings,
    AdapterSettingsBase,
    AnyAdapterSettings,
    CommandSettings,
    HttpSettings,
    ProcessSettings,
    PythonSettings,
    SessionSettings,
    WorkerSettings,
    parse_settings,
)

AdapterSpec = ProcessSettings

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "MB",
    "AdapterKind",
    "AdapterSettings",
    "AdapterSettingsBase",
    "AdapterSpec",
    "AnyAdapterSettings",
    "CommandSettings",
    "HttpSettings",
    "ProcessSettings",
    "PythonSettings",
    "SessionSettings",
    "WorkerSettings",
    "parse_settings",
]
