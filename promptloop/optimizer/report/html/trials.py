"""What the HTML report shows of one trial: its input, system prompts, workspace diff, outcome,
tool calls. The input is what the failure package shows (report/trial_input.py): the task's
input as declared and the first user message as the agent sent it, the same for every agent.

Prepares plain values for templates/trial.html.j2, which renders the expandable detail of a
trial server-side (the page needs no script to show one, and autoescaping keeps transcript
text from becoming markup). Long texts are cut with a visible marker to keep a 100-trial
report a few megabytes at most; system prompts are shown once per page, not per trial (they
are the same few texts in every trial).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from promptloop.agents.llm.types import ToolCall
from promptloop.graders.base import Score
from promptloop.optimizer.core.results import TrialResult
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.trial_input import input_view

MESSAGE_LIMIT = 6000
ARGS_LIMIT = 4000
RESULT_LIMIT = 4000
SNIPPET_LIMIT = 3000
PROMPT_LIMIT = 60_000
DIFF_LINES = 160
DIFF_LINE_CHARS = 400
OUTCOME_VALUE_LIMIT = 400
HIDDEN_OUTCOME_KEYS = ("file_contents", "file_contents_before", "workspace_diff")
LONG_OUTCOME_KEYS = ("card_yaml_blob",)


class PromptPool:
    """Distinct system prompts of a page, numbered in order of first appearance."""

    def __init__(self, trials: Iterable[TrialResult] = ()) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}
        for t in trials:
            for m in t.transcript.messages:
                if m.role == "system":
                    self.ref(m.content)

    def ref(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.texts) + 1
            self.texts.append(text)
        return self._index[text]


# --- workspace diff --------------------------------------------------------------------


@dataclass(frozen=True)
class DiffFile:
    """One created / modified / deleted file: coloured diff lines, or its text as a block."""

    kind: str
    path: str
    lines: tuple[tuple[str, str], ...] = ()
    """(css class: add / del / hunk / "", text) of a unified diff."""
    more_lines: int = 0
    block: str | None = None
    block_css: str = ""


def _text_map(outcome: Mapping[str, Any], key: str) -> dict[str, str]:
    raw = outcome.get(key)
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def line_css(line: str) -> str:
    """The css class of one unified-diff line (add / del / hunk / ""), for every diff shown."""
    if line.startswith("+") and not line.startswith("+++"):
        return "add"
    if line.startswith("-") and not line.startswith("---"):
        return "del"
    return "hunk" if line.startswith("@@") else ""


def modified_file(path: str, before: str, after: str, labels: tuple[str, str] | None = None,
                  ) -> DiffFile:
    """The one diff of a modified file every page shows (a trial's workspace, the prompts of
    two runs): unified, 2 lines of context, coloured, at most DIFF_LINES lines of at most
    DIFF_LINE_CHARS characters. `labels` name the sides (default a/<path>, b/<path>)."""
    a, b = labels or (f"a/{path}", f"b/{path}")
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), a, b, n=2,
                                      lineterm=""))
    shown = tuple(
        (line_css(x), x if len(x) <= DIFF_LINE_CHARS else x[:DIFF_LINE_CHARS] + "…")
        for x in lines[:DIFF_LINES]
    )
    return DiffFile("modified", path, shown, max(0, len(lines) - DIFF_LINES))


def diff_files(outcome: Mapping[str, Any]) -> list[DiffFile] | None:
    """The files the trial changed under PKM/, in created / modified / deleted order; None
    when the outcome has no workspace diff at all."""
    diff = outcome.get("workspace_diff")
    if not isinstance(diff, dict):
        return None
    snippets = {str(k): str(v) for k, v in (diff.get("snippets") or {}).items()}
    before, after = _text_map(outcome, "file_contents_before"), _text_map(outcome, "file_contents")
    out = []
    for kind in ("created", "modified", "deleted"):
        for path in (str(p) for p in diff.get(kind, [])):
            if kind == "modified" and path in before and path in after:
                out.append(modified_file(path, before[path], after[path]))
            elif kind == "deleted" and path in before:
                out.append(DiffFile(kind, path, block=before[path], block_css="del-block"))
            elif path in snippets:
                css = "add-block" if kind == "created" else ""
                out.append(DiffFile(kind, path, block=snippets[path], block_css=css))
            else:
                out.append(DiffFile(kind, path))
    return out


# --- outcome, scores, calls -------------------------------------------------------------


def outcome_rows(outcome: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(key, one-line value) rows and (key, long text) blocks of the outcome worth showing."""
    rows, blocks = [], []
    for key, value in outcome.items():
        if key in HIDDEN_OUTCOME_KEYS:
            continue
        if key in LONG_OUTCOME_KEYS and isinstance(value, str):
            blocks.append((key, value))
            continue
        text = value if isinstance(value, str) else fmt.json_text(value, indent=None)
        rows.append((key, fmt.truncate(text, OUTCOME_VALUE_LIMIT)))
    return rows, blocks


def score_meta(score: Score) -> dict[str, Any]:
    """Grader metadata worth showing (token usage is summed in the header instead)."""
    return {k: v for k, v in score.metadata.items() if k != "usage"}


def call_arguments(call: ToolCall) -> str:
    """Arguments of a model's tool call as text: raw when they did not parse."""
    args = call.raw_arguments if call.parse_error and call.raw_arguments else call.arguments
    return args if isinstance(args, str) else fmt.json_text(args)


def template_globals() -> dict[str, Any]:
    """What templates/trial.html.j2 calls: the helpers above and the text limits."""
    return {
        "diff_files": diff_files, "outcome_rows": outcome_rows, "score_meta": score_meta,
        "call_arguments": call_arguments, "input_view": input_view,
        "limits": {"message": MESSAGE_LIMIT, "args": ARGS_LIMIT, "result": RESULT_LIMIT,
                   "snippet": SNIPPET_LIMIT, "prompt": PROMPT_LIMIT},
    }
