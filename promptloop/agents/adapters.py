"""The bundled agents' trial adapters: promptloop.toml names `agents.adapters:card_agent` and
`agents.adapters:pkm_agent` (adapter = "python"). Each builds an in-process agent session that
promptloop's own agent loop runs with the trial's model client, transcript and limits
(docs/agents.md, "the python adapter"); the agent's module is imported only when it is used.

Next to each entry, `<entry>_views(outcome)` is the agent's hook for the failure package
(docs/agents.md, "what the proposer sees"): the views of a trial's outcome only this agent
knows how to show (the saved card as YAML), and the outcome keys those views replace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptloop.agents.base import AgentInput, OutcomeSession, session_factory
from promptloop.agents.registry import AgentOptions
from promptloop.agents.workspace import Workspace


@dataclass(frozen=True)
class TrialView:
    """One agent-specific block of a failing trial in the failure package."""

    title: str
    text: str
    lang: str = "text"
    """The fence's language (yaml, markdown, json, text)."""


@dataclass(frozen=True)
class TrialViews:
    """What an agent's hook adds to a failing trial: its views, and the outcome keys they
    replace (left out of the package's short outcome list)."""

    views: tuple[TrialView, ...] = ()
    hides: tuple[str, ...] = ()


@session_factory
def card_agent(workspace: Workspace, agent_input: AgentInput, system_prompt: str,
               options: AgentOptions | None = None) -> OutcomeSession:
    from promptloop.agents.card.agent import CardAgentSession

    opts = options or AgentOptions()
    return CardAgentSession(workspace, agent_input, system_prompt,
                            strict_templates=opts.strict_templates)


def card_agent_views(outcome: Mapping[str, Any]) -> TrialViews:
    """The card the trial saved, as the YAML the agent wrote."""
    card = outcome.get("card_yaml_blob")
    views = (TrialView("Saved card", card, "yaml"),) if isinstance(card, str) and card else ()
    return TrialViews(views=views, hides=("card_yaml_blob", "card"))


@session_factory
def pkm_agent(workspace: Workspace, agent_input: AgentInput, system_prompt: str,
              options: AgentOptions | None = None) -> OutcomeSession:
    from promptloop.agents.pkm.agent import PkmAgentSession, PkmOptions

    opts = options or AgentOptions()
    pkm = PkmOptions(strict_insight=opts.strict_insight,
                     require_skip_evidence=opts.require_skip_evidence)
    return PkmAgentSession(workspace, agent_input, system_prompt, pkm)


def pkm_agent_views(outcome: Mapping[str, Any]) -> TrialViews:
    """The PKM files are shown through the workspace diff (its snippets), not whole."""
    return TrialViews(hides=("file_contents", "file_contents_before"))
