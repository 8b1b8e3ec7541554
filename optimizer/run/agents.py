"""Agents by name, as the active project (promptloop.toml) declares them.

`get_agent(name, options)` is the session factory of an agent whose adapter runs in-process
(`adapter = "python"` with a `@session_factory` entry, as the bundled card and PKM agents);
`agent_of(name)` is the declaration itself, for the adapters that run a process or a URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agents.base import AgentFactory
from agents.registry import (
    AgentOptions,
    EntryError,
    is_session_factory,
    load_entry,
    session_builder,
)
from optimizer.core.config import ConfigError
from optimizer.core.project import Agent, active_project


def agent_of(name: str) -> Agent:
    """The agent `name` of the active project (ConfigError naming the file when unknown)."""
    return active_project().agent(name)


def importable(root: Path | None) -> None:
    """Make the modules of the repository at `root` importable by a python adapter's entry
    (`package.module:function` is looked up from the repository top, as a command's argv)."""
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))


def in_process(agent: Agent) -> bool:
    """The agent runs as an in-process session of promptloop's agent loop."""
    if agent.config.adapter != "python" or agent.config.entry is None:
        return False
    importable(agent.project.root)
    try:
        return is_session_factory(load_entry(agent.config.entry))
    except EntryError as err:
        raise ConfigError(f"{agent.project.where}: {agent.table} key 'entry': {err}") from None


def get_agent(name: str, options: AgentOptions | None = None) -> AgentFactory:
    """The in-process session factory of agent `name`, building sessions with `options`."""
    agent = agent_of(name)
    if agent.config.entry is None or not in_process(agent):
        raise ConfigError(f"`promptloop agent` runs only agents built into promptloop's loop "
                          f"(adapter = \"python\" with a session factory); {agent.name} runs "
                          f"through its {agent.config.adapter!r} adapter: try `promptloop eval "
                          f"--agent {agent.name} --task TASK_ID`")
    try:
        return session_builder(agent.config.entry, options)
    except EntryError as err:
        raise ConfigError(f"{agent.project.where}: {agent.table} key 'entry': {err}") from None


__all__ = ["agent_of", "get_agent", "in_process"]
