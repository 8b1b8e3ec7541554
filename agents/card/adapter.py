"""The Card Agent's trial adapter: promptloop.toml names `agents.card.adapter:session`
(adapter = "python"). It builds an in-process agent session that promptloop's own agent loop
runs, with the trial's model client, transcript and limits (docs/agents.md, "python adapter")."""

from __future__ import annotations

from agents.base import AgentInput, OutcomeSession, session_factory
from agents.registry import AgentOptions
from agents.workspace import Workspace


@session_factory
def session(
    workspace: Workspace,
    agent_input: AgentInput,
    system_prompt: str,
    options: AgentOptions | None = None,
) -> OutcomeSession:
    from agents.card.agent import CardAgentSession

    opts = options or AgentOptions()
    return CardAgentSession(
        workspace, agent_input, system_prompt, strict_templates=opts.strict_templates
    )
