"""What the command line needs from below the workflows, in one place.

The CLI calls workflows, never core or git internals (tests/test_import_contract.py checks
it); the few lookups a command makes before it starts a workflow live here: where the state
folder and the repository are, which agents and suites exist, the settings file, the default
agent model, and the errors a command turns into exit codes.
"""

from __future__ import annotations

from optimizer.core.config import DEFAULT_AGENT_MODEL, ConfigError, load_toml
from optimizer.core.names import agent_names, did_you_mean
from optimizer.core.suites import TASKS_DIR, SuiteError, load_suite, resolve_suite_path
from optimizer.git import GitOpsError, repo_root, state_dir

__all__ = [
    "DEFAULT_AGENT_MODEL",
    "TASKS_DIR",
    "ConfigError",
    "GitOpsError",
    "SuiteError",
    "agent_names",
    "did_you_mean",
    "load_suite",
    "load_toml",
    "repo_root",
    "resolve_suite_path",
    "state_dir",
]
