"""The PKM Agent session: eleven tools, completion evidence, re-prompt text and outcome.

Completion (docs/compat.md): (a successful Write/Edit whose arguments contain the fact id AND
a successful insight update of this input's card) OR (a skip AND no successful
Write/Edit/Move/Remove).

A *run* (in the runtime's sense) starts with `first_message()` and after each `reminder()`.
The insight tool ends the run, unless a structural reminder fired on a Read earlier in the
run: then the insight is saved but the model keeps the turn to act on the reminder.

Defaults are the original harness's (docs/compat.md): the insight tool takes any fact id that
exists in its fact file, any related id strings and empty text, and writes `character_id: "0"`;
a skip needs no evidence; the harness text invites a skip only when the user opts out (when to
skip trivial input is the prompt's job). `PkmOptions` opts into our stricter checks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import Field

from promptloop.agents.base import AgentInput
from promptloop.agents.card.card_file import CardFileError, read_card, update_card
from promptloop.agents.pkm.fs_tools import FileTools
from promptloop.agents.pkm.paths import Sandbox
from promptloop.agents.pkm.reminders import append_session, load_sessions, wrap
from promptloop.agents.pkm.search_tools import SearchTools, render_tree
from promptloop.agents.tools import Tool, ToolArgs, ToolError, ToolResult
from promptloop.agents.transcript import Transcript
from promptloop.agents.workspace import (
    FACT_ID_PATTERN,
    FactId,
    FactIdError,
    Workspace,
    diff_snapshots,
)

NAME = "pkm_agent"
MUTATING_TOOLS = ("Write", "Edit", "Move", "Remove")
WRITE_TOOLS = ("Write", "Edit")
FIRST_MESSAGE_TREE_LIMIT = 1000
CHARACTER_ID = "0"


@dataclass(frozen=True)
class PkmOptions:
    """Our stricter behaviours, off by default (the original harness accepts these cases)."""

    strict_insight: bool = False
    """The insight must be for this input's fact id, non-blank, and related ids must be fact ids
    (`YYYY/MM/DD.md#ts_N`; duplicates and this input's own id are dropped)."""
    require_skip_evidence: bool = False
    """skip_pkm_organization refuses blank evidence."""


class InsightArgs(ToolArgs):
    fact_id: str = Field(description="The Raw Input ID (fact_id) of this task",
                         json_schema_extra={"pattern": FACT_ID_PATTERN})
    insight_text: str = Field(description="The insight shown on the user's timeline card")
    related_fact_ids: list[str] | None = Field(
        None, description="fact ids of earlier inputs this insight connects to (from the PKM)"
    )


class SkipArgs(ToolArgs):
    evidence: str = Field(description="What in the input shows it should not be filed")


# Harness text (tool descriptions, first message, re-prompt) invites a skip only on an explicit
# opt-out by the user (docs/compat.md): when to skip trivial input is the prompt's decision.
INSIGHT_DESC = (
    "Save the insight of the timeline card of this input, after the input has been written to "
    "the PKM. fact_id is this task's Raw Input ID. related_fact_ids lists fact ids (found "
    "in `<!-- fact_id: ... -->` comments) of earlier inputs the insight draws on. Normally "
    "ends the session."
)
SKIP_DESC = (
    "Declare that this input is not to be organised into the PKM (for example, the user said "
    "not to file it). Write nothing before calling it. Ends the session."
)

REQUIREMENT_TEXT = {
    "wrote_para_with_fact_id": (
        "No successful Write or Edit contains this input's fact id. Save the input into the "
        "right PARA file and put `<!-- fact_id: {fact_id} -->` next to what you wrote."
    ),
    "updated_timeline_card_insight": (
        "The card insight was not saved. Call update_timeline_card_insight with fact_id "
        "{fact_id} and a short insight grounded in the user's files."
    ),
    "skip_pkm_organization": (
        "No skip was recorded either. If this input is not to be filed (for example, the user "
        "asked not to file it), call skip_pkm_organization without changing any file."
    ),
    "skip_without_successful_pkm_mutation": (
        "You called skip_pkm_organization, but files in the PKM were changed in this session. "
        "A skip must not change anything: finish saving the input (fact id comment and "
        "insight) instead."
    ),
}


def published_text(published: datetime) -> str:
    """`2026-03-14 09:30:05 UTC+0000 (UTC, Saturday)`: the time with its UTC offset, zone and
    weekday, as the original PKM Agent writes it (the compatibility tests pin it). The Card
    Agent writes its own original form, `UTC+00:00 (zone). note` (agents/card/agent.py): the
    two agents' formats differ, as the originals' do. A naive time is taken as the machine's
    local time."""
    local = published if published.tzinfo is not None else published.astimezone()
    zone = getattr(local.tzinfo, "key", None) or local.tzname() or "local"
    return f"{local:%Y-%m-%d %H:%M:%S} UTC{local:%z} ({zone}, {local:%A})"


class PkmAgentSession:
    """One PKM Agent run over one input in one workspace (implements AgentSession)."""

    name = NAME

    def __init__(
        self,
        workspace: Workspace,
        agent_input: AgentInput,
        system_prompt: str,
        options: PkmOptions | None = None,
    ) -> None:
        self.workspace = workspace
        self.options = options or PkmOptions()
        self.agent_input = agent_input
        self.system_prompt = system_prompt
        self.fact_id = str(FactId.parse(agent_input.fact_id))
        self.sandbox = Sandbox(workspace.pkm)
        self._before = workspace.snapshot("PKM")
        self._sessions = load_sessions(workspace.root)
        self.wrote_para = False
        self.updated_insight = False
        self.skipped = False
        self.skip_evidence: str | None = None
        self.successful_mutation = False
        self.edited: list[str] = []
        self.written: list[str] = []
        """Files changed by a successful Write/Edit: what the session stats count."""
        self.reminders_this_run: list[str] = []
        self.reminders_total = 0
        self._tools = [
            *FileTools(self.sandbox, self).tools(),
            *SearchTools(self.sandbox).tools(),
            Tool("update_timeline_card_insight", INSIGHT_DESC, InsightArgs, self._insight),
            Tool("skip_pkm_organization", SKIP_DESC, SkipArgs, self._skip),
        ]

    # -- PkmObserver ---------------------------------------------------------------------------

    def mutated(self, tool: str, paths: list[str], arguments: dict[str, Any]) -> None:
        self.successful_mutation = True
        for path in paths:
            if path not in self.edited:
                self.edited.append(path)
            if tool in WRITE_TOOLS and path not in self.written:
                self.written.append(path)
        if tool in WRITE_TOOLS and self.fact_id in json.dumps(arguments, ensure_ascii=False):
            self.wrote_para = True

    def reminded(self, texts: list[str]) -> None:
        if not texts:
            return
        self.reminders_this_run.extend(texts)
        self.reminders_total += len(texts)

    def sessions(self) -> list[dict[str, object]]:
        return self._sessions

    # -- AgentSession --------------------------------------------------------------------------

    @property
    def tools(self) -> Sequence[Tool]:
        return self._tools

    def first_message(self) -> str:
        self.reminders_this_run = []
        tree = render_tree(
            self.sandbox, self.sandbox.root, depth=None, max_entries=FIRST_MESSAGE_TREE_LIMIT
        )
        if tree.total == 0:
            listing = "The PKM is empty: there are no files or folders yet."
        else:
            listing = "Current PKM tree ('/' is the PKM root):\n" + "\n".join(tree.lines)
            if tree.total > FIRST_MESSAGE_TREE_LIMIT:
                listing += f"\n... {tree.total - FIRST_MESSAGE_TREE_LIMIT} more entries"
        return (
            wrap(
                f"{listing}\n\nUser language: {self.agent_input.user_language}. Write notes and "
                "the insight in this language."
            )
            + "\n\nOrganise the following raw input into the user's PKM, then update its "
            "timeline card insight. If the user says not to file it, call "
            "skip_pkm_organization instead.\n\n"
            f"Published Time: {published_text(self.agent_input.published_at)}\n"
            f"Raw Input ID (fact_id): {self.fact_id}\n"
            f"Raw Input Content:\n{self.agent_input.content}"
        )

    def missing_requirements(self) -> list[str]:
        """Empty when complete; else the unmet requirements of both ways to finish, with the
        original harness's names."""
        if self.wrote_para and self.updated_insight:
            return []
        if self.skipped and not self.successful_mutation:
            return []
        missing: list[str] = []
        if not self.wrote_para:
            missing.append("wrote_para_with_fact_id")
        if not self.updated_insight:
            missing.append("updated_timeline_card_insight")
        if not self.skipped:
            missing.append("skip_pkm_organization")
        else:
            missing.append("skip_without_successful_pkm_mutation")
        return missing

    def reminder(self, missing: list[str]) -> str:
        self.reminders_this_run = []
        items = "\n".join(
            f"- {name}: {REQUIREMENT_TEXT.get(name, name).format(fact_id=self.fact_id)}"
            for name in missing
        )
        return wrap(
            "The task is not finished. Missing:\n"
            f"{items}\n"
            "Finish by saving the input (Write/Edit with the fact id comment, then "
            "update_timeline_card_insight), or, if it is not to be filed (for example, the user "
            "asked not to file it) and nothing was changed, by calling skip_pkm_organization."
        )

    # -- insight and skip ----------------------------------------------------------------------

    def _related(self, raw_ids: list[str]) -> list[dict[str, str]]:
        if not self.options.strict_insight:
            return [{"id": raw} for raw in raw_ids]
        related: list[dict[str, str]] = []
        for raw in raw_ids:
            try:
                fid = str(FactId.parse(raw))
            except FactIdError as err:
                raise ToolError(f"related_fact_ids: {err}") from None
            if fid != self.fact_id and {"id": fid} not in related:
                related.append({"id": fid})
        return related

    def _insight(self, args: InsightArgs) -> ToolResult:
        try:
            target = FactId.parse(args.fact_id)
        except FactIdError as err:
            raise ToolError(str(err)) from None
        if self.workspace.read_fact(target) is None:
            raise ToolError(f"fact {target} does not exist in its fact file {target.fact_file}")
        strict = self.options.strict_insight
        if strict and str(target) != self.fact_id:
            raise ToolError(
                f"fact_id must be this input's Raw Input ID {self.fact_id}, got {args.fact_id!r}"
            )
        text = args.insight_text.strip() if strict else args.insight_text
        if strict and not text:
            raise ToolError("insight_text is empty")
        related = self._related(list(args.related_fact_ids or []))

        def mutate(card: dict[str, Any]) -> None:
            card.setdefault("fact_id", str(target))
            card["insight"] = {"text": text, "related_facts": related, "character_id": CHARACTER_ID}

        try:
            update_card(self.workspace.card_path(target), mutate, durable=self.workspace.durable)
        except (CardFileError, OSError) as err:
            raise ToolError(f"could not update the card: {type(err).__name__}") from None
        if str(target) == self.fact_id:
            self.updated_insight = True
        if self.reminders_this_run:
            pending = "\n".join(f"- {r}" for r in self.reminders_this_run)
            self.reminders_this_run = []
            return ToolResult(
                content="Insight saved. Before finishing, act on the system reminder(s) from "
                f"this session:\n{pending}\nCall this tool again only if the insight changes."
            )
        return ToolResult(content="Insight saved.", stop=True)

    def _skip(self, args: SkipArgs) -> ToolResult:
        if self.options.require_skip_evidence and not args.evidence.strip():
            raise ToolError("evidence is empty: say what in the input makes it not worth saving")
        self.skipped = True
        self.skip_evidence = args.evidence
        note = ""
        if self.successful_mutation:
            note = " Files were already changed in this session, so the skip is not clean."
        return ToolResult(content=f"Skip recorded.{note}", stop=True)

    # -- after the run -------------------------------------------------------------------------

    def record_session(self) -> bool:
        """Add this session to the user's session stats if it wrote or edited a file (Move and
        Remove alone do not count)."""
        if not self.written:
            return False
        append_session(
            self.workspace.root,
            self.fact_id,
            self.agent_input.published_at.isoformat(),
            self.written,
        )
        return True

    def outcome(self, transcript: Transcript) -> dict[str, Any]:
        """The SPEC outcome keys plus before-contents and the card insight."""
        after = self.workspace.snapshot("PKM")
        missing = self.missing_requirements()
        insight: dict[str, Any] | None = None
        card_path = self.workspace.card_path(self.fact_id)
        if card_path.is_file():
            try:
                value = read_card(card_path).get("insight")
                insight = value if isinstance(value, dict) else None
            except CardFileError:
                insight = None
        return {
            "is_complete": not missing,
            "wrote_para": self.wrote_para,
            "updated_insight": self.updated_insight,
            "skipped_pkm": self.skipped,
            "successful_pkm_mutation": self.successful_mutation,
            "missing_requirements": missing,
            "skip_evidence": self.skip_evidence,
            "file_contents": _texts(after),
            "file_contents_before": _texts(self._before),
            "workspace_diff": diff_snapshots(self._before, after),
            "insight": insight,
            "n_reminders": self.reminders_total,
            "n_tool_errors": sum(c.is_error for c in transcript.tool_calls),
        }


def _texts(snapshot: dict[str, bytes]) -> dict[str, str]:
    return {path: data.decode("utf-8", errors="replace") for path, data in snapshot.items()}
