"""Agents by name: `get_agent("card_agent")` returns a factory that builds a session.

Each agent module is imported only when its factory is called, so one agent's missing or
broken module does not stop the other from running.
"""

from __future__ import annotations

from agents.base import AgentFactory, AgentInput, OutcomeSession
from agents.workspace import Workspace


def _card_agent(
    workspace: Workspace, agent_input: AgentInput, system_prompt: str
) -> OutcomeSession:
    from agents.card.agent import CardAgentSession

    return CardAgentSession(workspace, agent_input, system_prompt)


def _pkm_agent(
    workspace: Workspace, agent_input: AgentInput, system_prompt: str
) -> OutcomeSession:
    from agents.pkm.agent import PkmAgentSession

    return PkmAgentSession(workspace, agent_input, system_prompt)


AGENTS: dict[str, AgentFactory] = {
    "card_agent": _card_agent,
    "pkm_agent": _pkm_agent,
}


def get_agent(name: str) -> AgentFactory:
    """The factory registered under `name`; unknown names list the known ones."""
    try:
        return AGENTS[name]
    except KeyError:
        known = ", ".join(sorted(AGENTS))
        raise ValueError(f"unknown agent {name!r}; known agents: {known}") from None


__all__ = ["AGENTS", "get_agent"]
