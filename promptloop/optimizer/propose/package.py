"""Export the failing trials of one bucket in the compact form the proposer LLM reads.

Built the same way for every agent from one record: the trial's transcript (for an agent
outside promptloop, the conversation the model gateway saw merged with the agent's own,
optimizer/run/record.py) and the run's task info. For each failed or timed-out trial: the task's
input as the task declares it (text or JSON), the first user message as the agent sent it,
every grader's verdict with its rationale and failing assertions, the outcome, the views the
agent's own adapter adds (`<entry>_views`, e.g. the card agent's saved card), the workspace
diff and a one-line-per-call tool trace with each call's arguments and result.
Errored trials are infrastructure, listed apart and never shown as agent failures. Ordering is
deterministic and the rendered text has a size cap with explicit truncation markers.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from promptloop.agents.transcript import ToolCallRecord, Transcript
from promptloop.optimizer.core.project import ConfigError, active_project
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.report.fmt import num, short, truncate
from promptloop.optimizer.report.markdown import FAILED_STATUSES
from promptloop.optimizer.report.summary import bucket_of, task_order
from promptloop.optimizer.report.trial_input import (
    INPUT_MARKER,
    extract_input,
    first_user_message,
    input_line,
    input_view,
    render_input,
    task_input,
)

_BULKY_OUTCOME_KEYS = ("workspace_diff",)
VIEWS_SUFFIX = "_views"
_QUIET_EVENTS = ("timing", "stop")
"""Events the package leaves out: timings, and `stop` (the tool that ended the run is the last
line of the trace; an agent outside promptloop's loop records no such event)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScoreView(_Model):
    grader: str
    value: float | None
    passed: bool | None
    rationale: str
    failing_assertions: list[str] = Field(default_factory=list)


class DiffView(_Model):
    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    snippets: dict[str, str] = Field(default_factory=dict)
    snippets_omitted: int = 0


class AgentView(_Model):
    """A view of the outcome the agent's own adapter provides (its `<entry>_views` hook)."""

    title: str
    text: str
    lang: str = "text"


class FailingTrial(_Model):
    task_id: str
    trial_index: int
    status: str
    failure_reason: str | None
    task_passed_trials: int
    task_counted_trials: int
    input_content: str
    """The task's input as the task declares it: its text, or its JSON."""
    input_lang: str = "text"
    first_message: str = ""
    """The first user message as the agent sent it (empty when it is the input itself)."""
    scores: list[ScoreView]
    outcome: dict[str, str]
    """Small outcome keys, each rendered short (bulky ones are shown as views/diff instead)."""
    views: list[AgentView] = Field(default_factory=list)
    diff: DiffView | None = None
    trace: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)
    final_message: str = ""


class InfraTrial(_Model):
    task_id: str
    trial_index: int
    error: str


class FailingExport(_Model):
    run_name: str
    suite_name: str
    agent_name: str
    bucket: str
    task_ids: list[str]
    counted_trials: int
    passed_trials: int
    failed_total: int
    omitted: int
    """Failed trials left out by `max_trials`."""
    trials: list[FailingTrial]
    infra: list[InfraTrial]


def trial_input(run: RunResult, trial: TrialResult) -> str:
    """The input of `trial` in one text: the task's declared input, else what the transcript
    shows of it."""
    return input_line(run, trial)


ViewsHook = Callable[[Mapping[str, Any]], Any]


def agent_views_hook(agent_name: str) -> ViewsHook | None:
    """The agent's own package hook: the agent table's `views` (any adapter kind), else
    `<entry>_views` next to its python entry (agents/adapters.py has the bundled agents');
    None for an agent without one. A `views` that does not import is a configuration error."""
    try:
        agent = active_project().agent(agent_name)
    except ConfigError:
        return None
    config = agent.config
    declared = getattr(config, "views", None)
    entry = getattr(config.spec, "entry", None)
    if isinstance(declared, str) and ":" in declared:
        module, _, attr = declared.partition(":")
    elif isinstance(entry, str) and ":" in entry:
        module, _, attr = entry.partition(":")
        attr += VIEWS_SUFFIX
    else:
        return None
    if agent.project.root is not None and str(agent.project.root) not in sys.path:
        sys.path.insert(0, str(agent.project.root))  # a hook of the team's own repository
    try:
        hook = getattr(importlib.import_module(module), attr, None)
    except ImportError as err:
        if declared is None:
            return None
        raise ConfigError(f"{agent.project.where}: {agent.table} key 'views': {declared!r} "
                          f"does not import: {err}") from None
    if declared is not None and not callable(hook):
        raise ConfigError(f"{agent.project.where}: {agent.table} key 'views': {declared!r} "
                          "names no function")
    return hook if callable(hook) else None


def _hook_views(hook: ViewsHook | None, outcome: Mapping[str, Any],
                snippet_chars: int) -> tuple[list[AgentView], set[str]]:
    if hook is None:
        return [], set()
    got = hook(outcome)
    views = [AgentView(title=str(v.title), text=truncate(str(v.text), snippet_chars),
                       lang=str(getattr(v, "lang", "text"))) for v in getattr(got, "views", ())]
    return views, set(getattr(got, "hides", ()))


def _arg(value: Any) -> str:
    return short(json.dumps(value, ensure_ascii=False, default=str), 60)


def trace_line(n: int, call: ToolCallRecord) -> str:
    args = ", ".join(f"{k}={_arg(v)}" for k, v in call.arguments.items())
    verdict = "ERROR" if call.is_error else "ok"
    return f"{n}. {call.tool_name}({short(args, 180)}) -> {verdict}: {short(call.result, 160)}"


def condensed_trace(transcript: Transcript, max_lines: int = 40) -> list[str]:
    """One line per tool call; long traces keep their head and last five calls."""
    lines = [trace_line(i, c) for i, c in enumerate(transcript.tool_calls, 1)]
    if len(lines) <= max_lines:
        return lines
    head = max(max_lines - 5, 1)
    hidden = len(lines) - head - 5
    return [*lines[:head], f"[... {hidden} more tool calls omitted ...]", *lines[-5:]]


def _diff_view(raw: Any, snippet_chars: int, max_files: int) -> DiffView | None:
    if raw is None:
        return None
    data = raw.model_dump() if isinstance(raw, BaseModel) else dict(raw)
    view = DiffView(created=sorted(data.get("created", [])),
                    modified=sorted(data.get("modified", [])),
                    deleted=sorted(data.get("deleted", [])))
    snippets = data.get("snippets") or {}
    paths = [p for p in (*view.created, *view.modified, *view.deleted) if p in snippets]
    for p in paths[:max_files]:
        view.snippets[p] = truncate(str(snippets[p]), snippet_chars)
    view.snippets_omitted = max(len(paths) - max_files, 0)
    return view


def _scores(trial: TrialResult) -> list[ScoreView]:
    out = []
    for s in trial.scores:
        failing = []
        for a in s.assertions:
            if a.passed:
                continue
            item = short(a.description, 200)
            if a.actual is not None or a.expected is not None:
                item += f" (actual: {short(a.actual, 120)}; expected: {short(a.expected, 120)})"
            failing.append(item)
        out.append(ScoreView(grader=s.grader, value=s.value, passed=s.passed,
                             rationale=short(s.rationale, 800), failing_assertions=failing))
    return out


def _failing_trial(run: RunResult, t: TrialResult, inputs: Mapping[str, Any],
                   hook: ViewsHook | None, snippet_chars: int, max_files: int,
                   max_trace: int) -> FailingTrial:
    siblings = [x for x in run.trials_of(t.task_id) if x.counts]
    given = input_view(run, t, inputs.get(t.task_id))
    finals = [m.content for m in t.transcript.messages if m.role == "assistant" and m.content]
    views, hides = _hook_views(hook, t.outcome, snippet_chars)
    return FailingTrial(
        task_id=t.task_id,
        trial_index=t.trial_index,
        status=t.status,
        failure_reason=t.failure_reason,
        task_passed_trials=sum(x.passed for x in siblings),
        task_counted_trials=len(siblings),
        input_content=truncate(given.text, 2000),
        input_lang=given.lang,
        first_message=truncate(given.first_message, 2000),
        scores=_scores(t),
        outcome={k: short(v, 200) for k, v in sorted(t.outcome.items())
                 if k not in _BULKY_OUTCOME_KEYS and k not in hides},
        views=views,
        diff=_diff_view(t.outcome.get("workspace_diff"), snippet_chars, max_files),
        trace=condensed_trace(t.transcript, max_trace),
        events=[f"{e.kind}: {short(e.detail, 160)}" for e in t.transcript.events
                if e.kind not in _QUIET_EVENTS][:10],
        final_message=short(finals[-1], 400) if finals else "",
    )


def export_failing(
    run: RunResult,
    bucket: str,
    *,
    max_trials: int = 12,
    task_inputs: Mapping[str, Any] | None = None,
    snippet_chars: int = 1200,
    max_files: int = 8,
    max_trace: int = 40,
) -> FailingExport:
    """The failed/timed-out trials of `bucket` (at most `max_trials`, spread over tasks).

    `task_inputs` (task id -> the task's input, a text or any JSON) wins over the input kept
    in the run's task info, which wins over the text found in the transcript.
    """
    order = task_order(run)
    buckets = sorted({bucket_of(run, tid) for tid in order})
    if bucket not in buckets:
        raise ValueError(f"unknown bucket '{bucket}' in run {run.run_name}; "
                         f"known: {', '.join(buckets) or '(none)'}")
    ids = [tid for tid in order if bucket_of(run, tid) == bucket]
    rank = {tid: i for i, tid in enumerate(ids)}
    mine = [t for t in run.trials if t.task_id in rank]
    failed = [t for t in mine if t.status in FAILED_STATUSES]
    # Round-robin over tasks so the cap keeps variety: every task's first failure first.
    nth: dict[str, int] = {}
    spread = []
    for t in sorted(failed, key=lambda t: (rank[t.task_id], t.trial_index)):
        spread.append((nth.get(t.task_id, 0), rank[t.task_id], t.trial_index, t))
        nth[t.task_id] = nth.get(t.task_id, 0) + 1
    chosen = [x[3] for x in sorted(spread, key=lambda x: x[:3])[:max_trials]]
    chosen.sort(key=lambda t: (rank[t.task_id], t.trial_index))
    errored = sorted((t for t in mine if t.status == "errored"),
                     key=lambda t: (rank[t.task_id], t.trial_index))
    counted = [t for t in mine if t.counts]
    hook = agent_views_hook(run.agent_name) if chosen else None
    return FailingExport(
        run_name=run.run_name,
        suite_name=run.suite_name,
        agent_name=run.agent_name,
        bucket=bucket,
        task_ids=ids,
        counted_trials=len(counted),
        passed_trials=sum(t.passed for t in counted),
        failed_total=len(failed),
        omitted=len(failed) - len(chosen),
        trials=[_failing_trial(run, t, task_inputs or {}, hook, snippet_chars, max_files,
                               max_trace) for t in chosen],
        infra=[InfraTrial(task_id=t.task_id, trial_index=t.trial_index,
                          error=short(t.infra_error or t.failure_reason or "unknown", 300))
               for t in errored],
    )


__all__ = [
    "INPUT_MARKER", "AgentView", "DiffView", "FailingExport", "FailingTrial", "InfraTrial",
    "ScoreView", "agent_views_hook", "condensed_trace", "export_failing", "extract_input",
    "fence", "first_user_message", "render_failing_markdown", "render_input", "task_input",
    "trace_line", "trial_input",
]


# --- rendering -------------------------------------------------------------------------


def fence(text: str, lang: str = "text") -> str:
    """A fenced block whose fence is longer than any backtick run inside `text`."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{lang}\n{text}\n{bar}"


def _score_block(s: ScoreView) -> str:
    verdict = {True: "passed", False: "FAILED", None: "n/a"}[s.passed]
    lines = [f"- `{s.grader}`: {num(s.value, 2)} ({verdict})"
             + (f" — {s.rationale}" if s.rationale else "")]
    lines += [f"  - ✗ {a}" for a in s.failing_assertions]
    return "\n".join(lines)


def _trial_blocks(t: FailingTrial) -> list[str]:
    head = f"## `{t.task_id}` trial {t.trial_index} — {t.status}"
    meta = (f"This task passed {t.task_passed_trials}/{t.task_counted_trials} counted trials."
            + (f" Failure: {t.failure_reason}" if t.failure_reason else ""))
    blocks = [head, meta, "**Input** (the task's input)", fence(t.input_content, t.input_lang)]
    if t.first_message:
        blocks += ["**First user message** (as the agent sent it)", fence(t.first_message)]
    blocks += ["**Scores**", "\n".join(_score_block(s) for s in t.scores) or "(no scores)"]
    if t.outcome:
        blocks += ["**Outcome**", "\n".join(f"- {k}: {v}" for k, v in t.outcome.items())]
    for view in t.views:
        blocks += [f"**{view.title}**", fence(view.text, view.lang)]
    if t.diff is not None:
        d = t.diff
        summary = "; ".join(f"{name}: {', '.join(paths) or '-'}" for name, paths in
                            (("created", d.created), ("modified", d.modified),
                             ("deleted", d.deleted)))
        blocks += ["**Workspace diff**", summary]
        for path, text in d.snippets.items():
            kind = "deleted, before" if path in d.deleted else "after"
            blocks += [f"`{path}` ({kind}):", fence(text, "markdown")]
        if d.snippets_omitted:
            blocks.append(f"[... {d.snippets_omitted} more changed file(s) not shown ...]")
    blocks += ["**Tool calls**", fence("\n".join(t.trace) or "(no tool calls)")]
    if t.events:
        blocks += ["**Events**", "\n".join(f"- {e}" for e in t.events)]
    if t.final_message:
        blocks += [f"**Final assistant text**: {t.final_message}"]
    return blocks


def render_failing_markdown(export: FailingExport, *, max_chars: int = 40_000) -> str:
    """The export as Markdown, at most about `max_chars` long (truncation is marked)."""
    e = export
    head = [
        f"# Failing trials of bucket `{e.bucket}` ({e.suite_name}, run {e.run_name})",
        f"{e.failed_total} failed of {e.counted_trials} counted trials "
        f"({e.passed_trials} passed) over {len(e.task_ids)} task(s): {', '.join(e.task_ids)}."
        + (f" {e.omitted} failed trial(s) left out by the trial cap." if e.omitted else ""),
    ]
    if e.infra:
        lines = [f"- `{x.task_id}` trial {x.trial_index}: {x.error}" for x in e.infra[:10]]
        if len(e.infra) > 10:
            lines.append(f"- [... {len(e.infra) - 10} more ...]")
        head += [f"**Infrastructure errors (not agent failures, excluded):** {len(e.infra)}",
                 "\n".join(lines)]
    if not e.trials:
        head.append("No failed trials in this bucket.")
    out = "\n\n".join(head)
    for n, trial in enumerate(e.trials):
        section = "\n\n".join(_trial_blocks(trial))
        if len(out) + 2 + len(section) <= max_chars:
            out += "\n\n" + section
            continue
        shown = n
        if n == 0:  # keep what fits of the first trial rather than nothing
            for block in _trial_blocks(trial):
                if len(out) + 2 + len(block) > max_chars - 80:
                    out += "\n\n[... rest of this trial truncated: size cap ...]"
                    break
                out += "\n\n" + block
            shown = 1
        rest = len(e.trials) - shown
        if rest:
            out += f"\n\n[... {rest} more failing trial(s) not shown: size cap {max_chars} ...]"
        break
    return out + "\n"
