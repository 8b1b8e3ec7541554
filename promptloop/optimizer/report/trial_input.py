"""What a trial was given, read the same way for every agent from one record: the task's input
as the task declares it (kept with the run in `TaskInfo.input`: a text or any JSON), and the
first user message of the trial's conversation as the agent sent it (for an agent outside
promptloop, the conversation the model gateway saw; optimizer/run/record.py).

The failure package (propose/package.py), the HTML report's and the viewer's trial detail
(report/html/templates/trial.html.j2) all show it through `input_view`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from promptloop.agents.transcript import Transcript
from promptloop.optimizer.core.results import RunResult, TrialResult

INPUT_MARKER = "Raw Input Content:"
"""Where the bundled agents' first message puts the raw input (read only for runs saved before
the task's input was kept with the run)."""
NOT_RECORDED = "(input not recorded)"


def first_user_message(transcript: Transcript) -> str | None:
    """The first user message of the trial's conversation, as the agent sent it."""
    return next((m.content for m in transcript.messages if m.role == "user"), None)


def extract_input(transcript: Transcript) -> str | None:
    """The raw user text from the first user message (after "Raw Input Content:" where the
    bundled agents' harness puts it; the whole message otherwise)."""
    content = first_user_message(transcript)
    if content is None:
        return None
    at = content.rfind(INPUT_MARKER)
    return content[at + len(INPUT_MARKER):].strip("\n") if at >= 0 else content


def render_input(value: Any) -> tuple[str, str]:
    """(text, fence language) of a task's input: a text as itself, anything else as JSON."""
    if isinstance(value, str):
        return value, "text"
    return json.dumps(value, ensure_ascii=False, indent=2, default=str), "json"


def task_input(run: RunResult | None, task_id: str) -> Any:
    """The task's input as its task.json declares it (None: not kept with this run)."""
    info = run.task_info.get(task_id) if run is not None else None
    return info.input if info is not None else None


@dataclass(frozen=True)
class InputView:
    text: str
    """The task's input as declared (its text, or its JSON); what the transcript shows of it
    in runs saved without it; NOT_RECORDED when neither has it."""
    lang: str
    """text | json"""
    first_message: str
    """The first user message as the agent sent it; empty when it is the input itself or the
    trial has none."""
    declared: bool
    """The input is the task's own (not read back from the transcript)."""


def input_view(run: RunResult | None, trial: TrialResult, declared: Any = None) -> InputView:
    """What `trial` was given. `declared` (a task's input from elsewhere) wins over the run's
    task info, which wins over the text found in the transcript."""
    value = declared if declared is not None else task_input(run, trial.task_id)
    first = first_user_message(trial.transcript) or ""
    found = value is not None
    if value is None:
        value = extract_input(trial.transcript) or NOT_RECORDED
    text, lang = render_input(value)
    return InputView(text=text, lang=lang,
                     first_message=first if first.strip() != text.strip() else "",
                     declared=found)


def input_line(run: RunResult | None, trial: TrialResult) -> str:
    """The input of `trial` as one text (the task's declared input, else what the transcript
    shows of it; empty when neither has it)."""
    view = input_view(run, trial)
    return "" if view.text == NOT_RECORDED else view.text


__all__ = ["INPUT_MARKER", "NOT_RECORDED", "InputView", "extract_input", "first_user_message",
           "input_line", "input_view", "render_input", "task_input"]
