"""The PKM Agent session: eleven tools, completion evidence, re-prompt text and outcome.

Completion (SPEC section 4): (a successful Write/Edit whose arguments contain the fact id AND
a successful insight update) OR (a skip AND no successful Write/Edit/Move/Remove).

A *run* (in the runtime's sense) starts with `first_message()` and after each `reminder()`.
The insight tool ends the run, unless a structural reminder fired on a Read earlier in the
run: then the insight is saved but the model keeps the turn to act on the reminder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from agents.base import AgentInput
from agents.card.card_file import CardFileError, read_card, update_card
from agents.pkm.fs_tools import FileTools
from agents.pkm.paths import Sandbox
from agents.pkm.reminders import append_session, load_sessions, wrap
from agents.pkm.search_tools import SearchTools, render_tree
from agents.tools import Tool, ToolArgs, ToolError, ToolResult
from agents.transcript import Transcript
from agents.workspace import FACT_ID_PATTERN, FactId, FactIdError, Workspace, diff_snapshots

NAME = "pkm_agent"
MUTATING_TOOLS = ("Write", "Edit", "Move", "Remove")
FIRST_MESSAGE_TREE_LIMIT = 1000


class InsightArgs(ToolArgs):
    fact_id: str = Field(description="The Raw Input ID (fact_id) of this task",
                         json_schema_extra={"pattern": FACT_ID_PATTERN})
    insight_text: str = Field(description="The insight shown on the user's timeline card")
    related_fact_ids: list[str] | None = Field(
        None, description="fact ids of earlier inputs this insight connects to (from the PKM)"
    )


class SkipArgs(ToolArgs):
    evidence: str = Field(
        description="Why this input should not be saved, quoting what in it shows that"
    )


INSIGHT_DESC = (
    "Save the insight of the timeline card of this input, after the input has been written to "
    "the PKM. fact_id must be this task's Raw Input ID. related_fact_ids lists fact ids (found "
    "in `<!-- fact_id: ... -->` comments) of earlier inputs the insight draws on. Normally "
    "ends the session."
)
SKIP_DESC = (
    "Declare that this input should not be organised into the PKM (trivial content such as a "
    "greeting, filler or emoji only, or the user asked not to save it). Write nothing before "
    "calling it. Ends the session."
)

REQUIREMENT_TEXT = {
    "wrote_para_with_fact_id": (
        "No successful Write or Edit contains this input's fact id. Save the input into the "
        "right PARA file and put `<!-- fact_id: {fact_id} -->` next to what you wrote."
    ),
    "updated_insight": (
        "The card insight was not saved. Call update_timeline_card_insight with fact_id "
        "{fact_id} and a short insight grounded in the user's files."
    ),
    "skip_without_mutation": (
        "You called skip_pkm_organization, but files in the PKM were changed in this session. "
        "A skip must not change anything: if the input is worth keeping, finish saving it "
        "(fact id comment and insight) instead."
    ),
}


class PkmAgentSession:
    """One PKM Agent run over one input in one workspace (implements AgentSession)."""

    name = NAME

    def __init__(self, workspace: Workspace, agent_input: AgentInput, system_prompt: str) -> None:
        self.workspace = workspace
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
        if tool in ("Write", "Edit") and self.fact_id in json.dumps(arguments, ensure_ascii=False):
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
        published = self.agent_input.published_at
        return (
            wrap(
                f"{listing}\n\nUser language: {self.agent_input.user_language}. Write notes and "
                "the insight in this language."
            )
            + "\n\nOrganise the following raw input into the user's PKM, then update its "
            "timeline card insight; or skip it if it is not worth keeping.\n\n"
            f"Published Time: {published:%Y-%m-%d %H:%M:%S} ({published:%A})\n"
            f"Raw Input ID (fact_id): {self.fact_id}\n"
            f"Raw Input Content:\n{self.agent_input.content}"
        )

    def missing_requirements(self) -> list[str]:
        if self.wrote_para and self.updated_insight:
            return []
        if self.skipped and not self.successful_mutation:
            return []
        missing: list[str] = []
        if self.skipped:
            missing.append("skip_without_mutation")
        if not self.wrote_para:
            missing.append("wrote_para_with_fact_id")
        if not self.updated_insight:
            missing.append("updated_insight")
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
            "Finish either by saving the input (Write/Edit with the fact id comment, then "
            "update_timeline_card_insight) or, for content not worth keeping and with nothing "
            "written, by calling skip_pkm_organization."
        )

    # -- insight and skip ----------------------------------------------------------------------

    def _insight(self, args: InsightArgs) -> ToolResult:
        if args.fact_id.strip() != self.fact_id:
            raise ToolError(
                f"fact_id must be this input's Raw Input ID {self.fact_id}, got {args.fact_id!r}"
            )
        text = args.insight_text.strip()
        if not text:
            raise ToolError("insight_text is empty")
        related: list[dict[str, str]] = []
        for raw in args.related_fact_ids or []:
            try:
                fid = str(FactId.parse(raw))
            except FactIdError as err:
                raise ToolError(f"related_fact_ids: {err}") from None
            if fid != self.fact_id and {"id": fid} not in related:
                related.append({"id": fid})

        def mutate(card: dict[str, Any]) -> None:
            card.setdefault("fact_id", self.fact_id)
            old = card.get("insight")
            character = old.get("character_id") if isinstance(old, dict) else None
            card["insight"] = {"text": text, "related_facts": related, "character_id": character}

        try:
            update_card(
                self.workspace.card_path(self.fact_id), mutate, durable=self.workspace.durable
            )
        except (CardFileError, OSError) as err:
            raise ToolError(f"could not update the card: {type(err).__name__}") from None
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
        evidence = args.evidence.strip()
        if not evidence:
            raise ToolError("evidence is empty: say what in the input makes it not worth saving")
        self.skipped = True
        self.skip_evidence = evidence
        note = ""
        if self.successful_mutation:
            note = " Files were already changed in this session, so the skip is not clean."
        return ToolResult(content=f"Skip recorded.{note}", stop=True)

    # -- after the run -------------------------------------------------------------------------

    def record_session(self) -> bool:
        """Append this session to the user's session history if it changed files."""
        if not self.successful_mutation:
            return False
        append_session(
            self.workspace.root,
            self.fact_id,
            self.agent_input.published_at.isoformat(),
            self.edited,
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
