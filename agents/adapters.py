"""The bundled agents' trial adapters: promptloop.toml names `agents.adapters:card_agent` and
`agents.adapters:pkm_agent` (adapter = "python"). Each builds an in-process agent session that
promptloop's own agent loop runs with the trial's model client, transcript and limits
(docs/agents.md, "the python adapter"); the agent's module is imported only when it is used."""

from __future__ import annotations

from agents.base import AgentInput, OutcomeSession, session_factory
from agents.registry import AgentOptions
from agents.workspace import Workspace


@session_factory
def card_agent(workspace: Workspace, agent_input: AgentInput, system_prompt: str,
               options: AgentOptions | None = None) -> OutcomeSession:
    from agents.card.agent import CardAgentSession

    opts = options or AgentOptions()
    return CardAgentSession(workspace, agent_input, system_prompt,
                            strict_templates=opts.strict_templates)


@session_factory
def pkm_agent(workspace: Workspace, agent_input: AgentInput, system_prompt: str,
              options: AgentOptions | None = None) -> OutcomeSession:
    from agents.pkm.agent import PkmAgentSession, PkmOptions

    opts = options or AgentOptions()
    pkm = PkmOptions(strict_insight=opts.strict_insight,
                     require_skip_evidence=opts.require_skip_evidence)
    return PkmAgentSession(workspace, agent_input, system_prompt, pkm)
