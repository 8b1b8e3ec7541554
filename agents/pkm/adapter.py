"""The PKM Agent's trial adapter: promptloop.toml names `agents.pkm.adapter:session`
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
    from agents.pkm.agent import PkmAgentSession, PkmOptions

    opts = options or AgentOptions()
    pkm = PkmOptions(
        strict_insight=opts.strict_insight, require_skip_evidence=opts.require_skip_evidence
    )
    return PkmAgentSession(workspace, agent_input, system_prompt, pkm)
