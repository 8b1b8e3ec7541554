"""Agents by name: `get_agent("card_agent")` returns a factory that builds a session.

Each agent module is imported only when its factory is called, so one agent's missing or
broken module does not stop the other from running.

`AgentOptions` are our opt-in agent behaviours (SPEC section 8: by default both agents behave
as the original harness). They reach a run through `get_agent(name, options)`; the runner takes
them from `$PROMPTLOOP_AGENT_OPTIONS`, a comma-separated list of option names.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, fields
from typing import Protocol

from agents.base import AgentFactory, AgentInput, OutcomeSession
from agents.names import did_you_mean
from agents.workspace import Workspace

AGENT_OPTIONS_VAR = "PROMPTLOOP_AGENT_OPTIONS"


class AgentOptionsError(ValueError):
    """An unknown option name in an agent options list."""


@dataclass(frozen=True)
class AgentOptions:
    """Our stricter agent checks, each off by default (the original accepts these cases)."""

    strict_templates: bool = False
    """Card Agent: template data checks beyond types (hex colours, ISO-8601 start times,
    non-empty lists and strings, non-negative durations)."""
    strict_insight: bool = False
    """PKM Agent: the insight must be for this input's fact id, non-blank, and related ids must
    be fact ids."""
    require_skip_evidence: bool = False
    """PKM Agent: skip_pkm_organization refuses blank evidence."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def parse(cls, text: str) -> AgentOptions:
        """Options from "strict_templates,strict_insight" (blank -> all off)."""
        wanted = [w.strip() for w in text.replace(";", ",").split(",") if w.strip()]
        known = cls.names()
        for name in wanted:
            if name not in known:
                raise AgentOptionsError(f"unknown agent option {name!r}."
                                        f"{did_you_mean(name, known)} Known: {', '.join(known)}")
        return cls(**dict.fromkeys(wanted, True))

    @classmethod
    def from_env(cls) -> AgentOptions:
        """Options named in $PROMPTLOOP_AGENT_OPTIONS (unset -> the original's behaviour)."""
        try:
            return cls.parse(os.environ.get(AGENT_OPTIONS_VAR, ""))
        except AgentOptionsError as err:
            raise AgentOptionsError(f"${AGENT_OPTIONS_VAR}: {err}") from None

    def key(self) -> str:
        """The enabled option names, sorted and comma-joined ("" when none): a cache key part."""
        return ",".join(n for n in self.names() if getattr(self, n))


def _card_agent(
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


def _pkm_agent(
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


class _Builder(Protocol):
    def __call__(
        self,
        workspace: Workspace,
        agent_input: AgentInput,
        system_prompt: str,
        options: AgentOptions | None = None,
    ) -> OutcomeSession: ...


_BUILDERS: dict[str, _Builder] = {"card_agent": _card_agent, "pkm_agent": _pkm_agent}
AGENTS: dict[str, AgentFactory] = dict(_BUILDERS.items())


def get_agent(name: str, options: AgentOptions | None = None) -> AgentFactory:
    """The factory registered under `name`, building sessions with `options` (None: the
    original's behaviour); unknown names list the known ones."""
    try:
        builder = _BUILDERS[name]
    except KeyError:
        known = ", ".join(sorted(_BUILDERS))
        raise ValueError(f"unknown agent {name!r}; known agents: {known}") from None
    return functools.partial(builder, options=options)


__all__ = ["AGENTS", "AGENT_OPTIONS_VAR", "AgentOptions", "AgentOptionsError", "get_agent"]
