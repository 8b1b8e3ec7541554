"""What the command line needs from below the workflows, in one place.

The CLI calls workflows, never core or git internals (tests/test_import_contract.py checks
it); the few lookups a command makes before it starts a workflow live here: where the state
folder and the repository are, which agents and suites exist, the settings file, the default
agent model, and the errors a command turns into exit codes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from optimizer.core.config import DEFAULT_AGENT_MODEL, STATE_ENV, ConfigError, load_toml
from optimizer.core.names import agent_names, did_you_mean
from optimizer.core.project import (
    Project,
    active_project,
    find_project,
    load_project,
    packaged_project,
    use_project,
    with_own_agents,
)
from optimizer.core.suites import (
    TASKS_DIR,
    SuiteError,
    is_jsonl_suite,
    is_suite,
    load_suite,
    resolve_suite_path,
)
from optimizer.git import GitOpsError, repo_root
from optimizer.git import state_dir as _state_dir


def state_dir(explicit: Path | None = None, *, write: bool = True) -> Path:
    """The state folder (--state-dir, $PROMPTLOOP_HOME, or <repo>/.promptloop); with `write`
    (every command that runs or records something) created and checked to be writable, so a
    read-only or invalid folder is a user error naming it and where it came from, before
    anything runs (never a raw `[Errno 30]`)."""
    path = _state_dir(explicit)
    if not write:
        return path
    source = ("--state-dir" if explicit is not None else
              STATE_ENV if os.environ.get(STATE_ENV) else "the default, <repository>/.promptloop")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        if isinstance(err, (FileExistsError, NotADirectoryError)):
            reason = "it, or a folder above it, is a file"
        raise ConfigError(f"state folder {path} ({source}) cannot be used: {reason}. Give a "
                          "writable folder with --state-dir (or PROMPTLOOP_HOME)") from None
    return path


def open_project(explicit: Path | None = None) -> Project | None:
    """Find (`explicit`, else upward from the current folder), validate and activate the
    project file; None when there is none (promptloop's own agents are then the project, read
    from the repository they would live in). ConfigError names the file, table and key."""
    found = find_project(explicit=explicit)
    if found is None:
        use_project(packaged_project())
        return None
    project = load_project(found)
    if not project.agents:  # a settings-only file: the agents are promptloop's own
        project = with_own_agents(project)
    use_project(project)
    return project


def extra_settings(command: str) -> list[str]:
    """Keys a command's promptloop.toml table may hold that are no option of it."""
    if command == "nightly":
        from optimizer.workflows.nightly.config import NightlyConfig

        return list(NightlyConfig.model_fields)
    return []


def split_suite(agent: str | None, suite: str | None) -> tuple[str | None, str | None]:
    """`--agent` and `--suite` -> (agent name, suite name or path). `--suite` is an agent
    (all its suites), one of its suites (`pkm_agent/quickstart`, or `--agent pkm_agent --suite
    quickstart`), or a suite folder (a path holding suite.json) or JSONL suite file: a suite
    an agent's `suites` lists becomes (that agent, its suite name); another names its agent
    by its `agent_name` (the path kept)."""
    names = active_project().agent_names()
    if agent is not None and agent not in names:
        active_project().agent(agent)  # ConfigError naming the file and the missing table
    if suite is None:
        return agent, None
    if agent is None and suite in names:
        return suite, None
    head, sep, tail = suite.partition("/")
    path = Path(suite)
    if agent is None and sep and head in names and not is_suite(path):
        return head, tail
    if agent is not None and suite == agent:
        return agent, None
    if is_suite(path):
        return _suite_owner(agent, path, names)
    return agent, suite


def _suite_owner(agent: str | None, path: Path, names: tuple[str, ...]
                 ) -> tuple[str | None, str]:
    """(agent, suite name) for a suite folder or file an agent declares; else (the agent its
    `agent_name` names, the path)."""
    from optimizer.workflows.sources import RepoSource

    target = path.resolve()
    root = repo_root(path.parent if path.is_file() else path)
    with RepoSource(root, None, Path(os.devnull)) as source:
        for name in ([agent] if agent is not None else list(names)):
            for suite_name, rel in source.suite_folders(name).items():
                base = root if root is not None else Path.cwd()
                if (base / rel).resolve() == target:
                    return name, suite_name
    if agent is None:
        owner = suite_agent_name(path)
        agent = owner if owner in names else None
    return agent, str(path)


def declared_suite_name(agent: str, suite: str) -> str:
    """The name (as runs are stored) of `agent`'s suite `suite` (one of its suite names, a
    kind, or a suite path) in the working tree; a ConfigError naming the agent's `suites` key
    when it has none, a SuiteError when it does not load."""
    from optimizer.workflows.sources import project_suite

    return load_suite(project_suite(agent, suite), agent).name


def suite_agent_name(path: Path) -> str | None:
    """The `agent_name` a suite folder's suite.json or a JSONL suite's header line gives."""
    import json

    try:
        if is_jsonl_suite(path):
            first = path.read_text(encoding="utf-8").lstrip().split("\n", 1)[0]
            data = json.loads(first).get("suite") or {}
        else:
            data = json.loads((path / "suite.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return None
    name = data.get("agent_name") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


__all__ = [
    "DEFAULT_AGENT_MODEL",
    "TASKS_DIR",
    "ConfigError",
    "GitOpsError",
    "Project",
    "SuiteError",
    "active_project",
    "agent_names",
    "declared_suite_name",
    "did_you_mean",
    "extra_settings",
    "load_suite",
    "load_toml",
    "open_project",
    "repo_root",
    "resolve_suite_path",
    "split_suite",
    "state_dir",
    "suite_agent_name",
]
