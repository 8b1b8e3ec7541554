"""Export the failing trials of one bucket in the compact form the proposer LLM reads.

For each failed or timed-out trial: the raw input, every grader's verdict with its rationale
and failing assertions, the outcome, the workspace diff and a one-line-per-call tool trace.
Errored trials are infrastructure, listed apart and never shown as agent failures. Ordering is
deterministic and the rendered text has a size cap with explicit truncation markers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.transcript import ToolCallRecord, Transcript
from optimizer.core.results import RunResult, TrialResult
from optimizer.report.fmt import num, short, truncate
from optimizer.report.markdown import FAILED_STATUSES
from optimizer.report.summary import bucket_of, task_order

INPUT_MARKER = "Raw Input Content:"
_BULKY_OUTCOME_KEYS = ("workspace_diff", "file_contents", "card_yaml_blob", "card")
_QUIET_EVENTS = ("timing",)


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


class FailingTrial(_Model):
    task_id: str
    trial_index: int
    status: str
    failure_reason: str | None
    task_passed_trials: int
    task_counted_trials: int
    input_content: str
    scores: list[ScoreView]
    outcome: dict[str, str]
    """Small outcome keys, each rendered short (bulky ones are shown as card/diff instead)."""
    saved_card: str | None = None
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


def extract_input(transcript: Transcript) -> str | None:
    """The raw user text from the first user message (after "Raw Input Content:")."""
    users = [m for m in transcript.messages[:2] if m.role == "user"]
    if not users:
        return None
    content = users[0].content
    at = content.rfind(INPUT_MARKER)
    return content[at + len(INPUT_MARKER):].strip("\n") if at >= 0 else content


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


def _failing_trial(run: RunResult, t: TrialResult, inputs: Mapping[str, str],
                   snippet_chars: int, max_files: int, max_trace: int) -> FailingTrial:
    siblings = [x for x in run.trials_of(t.task_id) if x.counts]
    content = inputs.get(t.task_id)
    if content is None:
        content = extract_input(t.transcript) or "(input not recorded)"
    finals = [m.content for m in t.transcript.messages if m.role == "assistant" and m.content]
    card = t.outcome.get("card_yaml_blob")
    return FailingTrial(
        task_id=t.task_id,
        trial_index=t.trial_index,
        status=t.status,
        failure_reason=t.failure_reason,
        task_passed_trials=sum(x.passed for x in siblings),
        task_counted_trials=len(siblings),
        input_content=truncate(content, 2000),
        scores=_scores(t),
        outcome={k: short(v, 200) for k, v in sorted(t.outcome.items())
                 if k not in _BULKY_OUTCOME_KEYS},
        saved_card=truncate(card, snippet_chars) if isinstance(card, str) and card else None,
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
    task_inputs: Mapping[str, str] | None = None,
    snippet_chars: int = 1200,
    max_files: int = 8,
    max_trace: int = 40,
) -> FailingExport:
    """The failed/timed-out trials of `bucket` (at most `max_trials`, spread over tasks).

    `task_inputs` (task id -> raw input text) wins over the text found in the transcript.
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
        trials=[_failing_trial(run, t, task_inputs or {}, snippet_chars, max_files, max_trace)
                for t in chosen],
        infra=[InfraTrial(task_id=t.task_id, trial_index=t.trial_index,
                          error=short(t.infra_error or t.failure_reason or "unknown", 300))
               for t in errored],
    )


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
    blocks = [head, meta, "**Input**", fence(t.input_content)]
    blocks += ["**Scores**", "\n".join(_score_block(s) for s in t.scores) or "(no scores)"]
    if t.outcome:
        blocks += ["**Outcome**", "\n".join(f"- {k}: {v}" for k, v in t.outcome.items())]
    if t.saved_card:
        blocks += ["**Saved card**", fence(t.saved_card, "yaml")]
    if t.diff is not None:
        d = t.diff
        summary = "; ".join(f"{name}: {', '.join(paths) or '-'}" for name, paths in
                            (("created", d.created), ("modified", d.modified),
                             ("deleted", d.deleted)))
        blocks += ["**Workspace diff** (PKM/)", summary]
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
