"""What every agent shares: its input, and how the registry builds a session for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from promptloop.agents.data import data_dir
from promptloop.agents.runtime import AgentSession
from promptloop.agents.transcript import Transcript
from promptloop.agents.workspace import Workspace

PROMPTS_DIR = data_dir("prompts")

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class AgentInput:
    fact_id: str
    content: str
    published_at: datetime
    user_language: str = "English"


class OutcomeSession(AgentSession, Protocol):
    def outcome(self, transcript: Transcript) -> dict[str, Any]:
        """The final environment state graders read (SPEC outcome keys)."""
        ...


class AgentFactory(Protocol):
    def __call__(
        self, workspace: Workspace, agent_input: AgentInput, system_prompt: str
    ) -> OutcomeSession: ...


SESSION_FACTORY_MARK = "promptloop_session_factory"

F = TypeVar("F", bound=Callable[..., Any])


def session_factory(fn: F) -> F:
    """Mark an entry (`adapter = "session"`) as an in-process session builder: called as
    `fn(workspace, agent_input, system_prompt, options)`, it returns an `OutcomeSession` that
    promptloop's agent loop runs with the trial's model client, transcript and limits."""
    setattr(fn, SESSION_FACTORY_MARK, True)
    return fn


def load_prompt(agent_name: str, prompts_dir: Path | None = None) -> str:
    """Read the agent's system prompt from `prompts/<agent>.md` at run time."""
    path = (prompts_dir or PROMPTS_DIR) / f"{agent_name}.md"
    return path.read_text(encoding="utf-8")


def prepare_workspace(workspace: Workspace, agent_input: AgentInput) -> None:
    """Make the workspace look as the app leaves it when a fact arrives: the fact entry in its
    daily file, a pending card and the knowledge base folder PKM/. Existing entries, cards and
    notes (from fixtures) are kept."""
    from promptloop.agents.card.card_file import ensure_pending_card

    workspace.pkm.mkdir(parents=True, exist_ok=True)
    workspace.ensure_fact(agent_input.fact_id, agent_input.content, agent_input.published_at)
    ensure_pending_card(
        workspace.card_path(agent_input.fact_id),
        agent_input.fact_id,
        int(agent_input.published_at.timestamp()),
        durable=workspace.durable,
    )
