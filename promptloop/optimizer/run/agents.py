"""Agents by name, as the active project (promptloop.toml) declares them.

`open_link(name, concurrency)` is one run's link to agent `name`, whatever its adapter kind
(run/external.AgentLink: every trial takes that one road). `get_agent(name, options)` is the
session factory of an agent built into promptloop's agent loop (`adapter = "session"`, as the
bundled card and PKM agents), for `promptloop agent` and benchmarks that drive a session
themselves. Which agents those are is read from the table, never from their modules.
"""

from __future__ import annotations

from pathlib import Path

from promptloop.agents.base import AgentFactory
from promptloop.agents.registry import AgentOptions, EntryError, session_builder
from promptloop.optimizer.core.adapter_settings import SessionSettings
from promptloop.optimizer.core.config import ConfigError
from promptloop.optimizer.core.project import Agent, active_project
from promptloop.optimizer.run.external import AgentLink


def agent_of(name: str) -> Agent:
    """The agent `name` of the active project (ConfigError naming the file when unknown)."""
    return active_project().agent(name)


def in_process(agent: Agent) -> bool:
    """The agent runs as an in-process session of promptloop's agent loop (its table says
    `adapter = "session"`)."""
    return agent.config.spec.in_process


def open_link(name: str, concurrency: int) -> AgentLink:
    """One run's link to agent `name` of the active project (its adapter, built once)."""
    project = active_project()
    return AgentLink(project.agent(name), project.root or Path.cwd(), concurrency)


def get_agent(name: str, options: AgentOptions | None = None) -> AgentFactory:
    """The in-process session factory of agent `name`, building sessions with `options`."""
    agent = agent_of(name)
    spec = agent.config.spec
    if not isinstance(spec, SessionSettings):
        raise ConfigError(f"`promptloop agent` runs only agents built into promptloop's loop "
                          f"(adapter = \"session\"); {agent.name} runs through its "
                          f"{spec.adapter!r} adapter: try `promptloop eval --agent "
                          f"{agent.name} --task TASK_ID`")
    try:
        return session_builder(spec.entry, options, agent.project.root)
    except EntryError as err:
        raise ConfigError(f"{agent.project.where}: {agent.table} key 'entry': {err}") from None


__all__ = ["agent_of", "get_agent", "in_process", "open_link"]
