"""Names chosen by the user: agents from the agent registry, and the did-you-mean hint that every
"unknown name" error of the optimizer carries."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from promptloop.agents.names import did_you_mean


def agent_names() -> tuple[str, ...]:
    """The agents promptloop can run: those the active promptloop.toml declares (sorted)."""
    from promptloop.optimizer.core.project import active_project

    return active_project().agent_names()


def check_agent(name: str) -> str:
    """`name` if the registry knows it, else a ValueError listing the known agents."""
    known = agent_names()
    if name not in known:
        raise ValueError(
            f"unknown agent '{name}'.{did_you_mean(name, known)} Known agents: {', '.join(known)}"
        )
    return name


AgentName = Annotated[str, AfterValidator(check_agent)]
"""A pydantic field type: an agent name the registry knows."""

__all__ = ["AgentName", "agent_names", "check_agent", "did_you_mean"]
