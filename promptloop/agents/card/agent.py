"""The Card Agent session: first message, completion evidence, reminders and the outcome.

Completion evidence (docs/compat.md): a successful save call for this input's fact id, and a
card file that exists with that fact id, status completed, a title and at least one ui_config.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from promptloop.agents.base import AgentInput
from promptloop.agents.card.card_file import CardFileError, read_card
from promptloop.agents.card.tools import (
    METADATA_TOOL,
    SAVE_TOOL,
    CardTools,
    allowed_tags_markdown,
    tag_metadata,
)
from promptloop.agents.tools import Tool
from promptloop.agents.transcript import Transcript
from promptloop.agents.workspace import FactId, FactIdError, Workspace

PUBLISHED_FORMAT = "%Y-%m-%d %H:%M:%S"
PUBLISHED_NOTE = "Do not show this date in the card."

CHECKS: dict[str, str] = {
    "matching_successful_save_timeline_card_tool_call": (
        "no successful save_timeline_card call with this fact_id yet"
    ),
    "card_file_exists": "the card file does not exist",
    "persisted_fact_id_matches": "the saved card does not carry this fact_id",
    "status_completed": "the card status is not completed",
    "title_present": "the card has no title",
    "ui_configs_present": "the card has no ui_configs",
}


class CardAgentSession:
    """One Card Agent run over one raw input in one workspace."""

    name = "card_agent"

    def __init__(
        self,
        workspace: Workspace,
        agent_input: AgentInput,
        system_prompt: str,
        *,
        strict_templates: bool = False,
    ) -> None:
        """`strict_templates=True` opts in to our stricter template data checks."""
        self.workspace = workspace
        self.agent_input = agent_input
        self.system_prompt = system_prompt
        self.fact_id = _normalise_fact_id(agent_input.fact_id)
        self._tools = CardTools(
            workspace, agent_input.published_at, strict_templates=strict_templates
        )

    @property
    def tools(self) -> Sequence[Tool]:
        return self._tools.tools()

    def first_message(self) -> str:
        content = self.agent_input.content
        body = content if content.strip() else "(empty: the user sent no text)"
        return (
            "<system-reminder>\n"
            f"User language: {self.agent_input.user_language}. "
            "Write the title and all card text in this language.\n"
            f"The {METADATA_TOOL} result is already below; do not call {METADATA_TOOL} again.\n\n"
            f"{tag_metadata(self.workspace)}\n\n"
            f"{allowed_tags_markdown()}\n"
            "</system-reminder>\n\n"
            "Create the timeline card for the raw input below and save it with "
            f"{SAVE_TOOL}.\n\n"
            f"Raw Input ID (fact_id): {self.fact_id}\n"
            f"Published time: {published_time(self.agent_input.published_at)}\n"
            f"Raw Input Content:\n{body}"
        )

    # -- completion evidence -------------------------------------------------------------

    @property
    def card_path(self) -> Path | None:
        try:
            return self.workspace.card_path(self.fact_id)
        except FactIdError:
            return None

    def _card(self) -> tuple[dict[str, Any] | None, str]:
        """The parsed card (None when missing or unreadable) and its text ('' when missing)."""
        path = self.card_path
        if path is None or not path.is_file():
            return None, ""
        text = path.read_text(encoding="utf-8")
        try:
            return read_card(path), text
        except CardFileError:
            return None, text

    def _missing(self, card: dict[str, Any] | None) -> list[str]:
        saved = any(s.fact_id == self.fact_id for s in self._tools.state.saves)
        card = card or {}
        title = card.get("title")
        configs = card.get("ui_configs")
        path = self.card_path
        results = {
            "matching_successful_save_timeline_card_tool_call": saved,
            "card_file_exists": path is not None and path.is_file(),
            "persisted_fact_id_matches": str(card.get("fact_id", "")).strip() == self.fact_id,
            "status_completed": card.get("status") == "completed",
            "title_present": isinstance(title, str) and bool(title.strip()),
            "ui_configs_present": isinstance(configs, list) and len(configs) > 0,
        }
        return [name for name in CHECKS if not results[name]]

    def missing_requirements(self) -> list[str]:
        card, _ = self._card()
        return self._missing(card)

    def reminder(self, missing: list[str]) -> str:
        lines = "\n".join(f"- {name}: {CHECKS.get(name, 'failed')}" for name in missing)
        return (
            "<system-reminder>\n"
            f"The card for fact_id {self.fact_id} is not finished. Failed checks:\n{lines}\n"
            f"Call {SAVE_TOOL} now with fact_id \"{self.fact_id}\", a non-empty title and at "
            "least one ui_config whose data has the template's required fields. If an earlier "
            "call returned an error, fix exactly what it named. Do not answer with text only.\n"
            "</system-reminder>"
        )

    # -- outcome -------------------------------------------------------------------------

    def outcome(self, transcript: Transcript) -> dict[str, Any]:
        """The SPEC outcome keys, plus `card` (the parsed card) for our graders."""
        card, text = self._card()
        missing = self._missing(card)
        parsed = card or {}
        configs = parsed.get("ui_configs")
        configs = configs if isinstance(configs, list) else []
        tags = parsed.get("tags")
        tags = tags if isinstance(tags, list) else []
        title = parsed.get("title")
        path = self.card_path
        return {
            "is_complete": not missing,
            "card_save_tool_called": any(
                s.fact_id == self.fact_id for s in self._tools.state.saves
            ),
            "card_path": path.relative_to(self.workspace.root).as_posix() if path else None,
            "persisted_fact_id": parsed.get("fact_id"),
            "status": parsed.get("status"),
            "has_title": isinstance(title, str) and bool(title.strip()),
            "has_ui_configs": bool(configs),
            "missing_requirements": missing,
            "failure_reason": self._failure_reason(parsed, missing, transcript),
            "template_ids": [c.get("template_id") for c in configs if isinstance(c, dict)],
            "card_tags": [
                t.get("name") if isinstance(t, dict) else t for t in tags if t is not None
            ],
            "card_yaml_blob": text,
            "card": card,
        }

    def _failure_reason(
        self, card: dict[str, Any], missing: list[str], transcript: Transcript
    ) -> str | None:
        if not missing:
            return None
        if isinstance(card.get("failure_reason"), str) and card["failure_reason"].strip():
            return str(card["failure_reason"])
        reason = "card incomplete: " + ", ".join(missing)
        errors = [c for c in transcript.tool_calls if c.tool_name == SAVE_TOOL and c.is_error]
        if errors:
            reason += f"; last {SAVE_TOOL} error: {errors[-1].result}"
        elif not transcript.tool_calls:
            reason += "; the model never called a tool"
        return reason


def published_time(at: datetime) -> str:
    """The `Published time:` value: local time, UTC offset and zone, and the note not to show
    the date in the card (docs/compat.md). A naive time is taken as the machine's local time."""
    local = at if at.tzinfo is not None else at.astimezone()
    offset = local.strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}" if offset else "+00:00"
    zone = getattr(local.tzinfo, "key", None) or local.tzname() or "local"
    return f"{local.strftime(PUBLISHED_FORMAT)} UTC{offset} ({zone}). {PUBLISHED_NOTE}"


def _normalise_fact_id(raw: str) -> str:
    try:
        return str(FactId.parse(raw))
    except FactIdError:
        return raw.strip()


__all__ = ["CHECKS", "CardAgentSession", "published_time"]
