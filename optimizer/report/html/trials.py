"""The expandable detail of one trial in the HTML report: scores, diff, outcome, transcript.

Rendered server-side as escaped markup, so the page needs no script to show a trial and no
text from a transcript can become markup. Long texts are cut with a visible marker to keep a
100-trial report a few megabytes at most; system prompts are shown once per page, not per
trial (they are the same few texts in every trial).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from agents.llm.types import Message
from graders.base import Score
from optimizer.core.results import TrialResult
from optimizer.report.html.kit import esc, json_text, num, short, truncate

MESSAGE_LIMIT = 6000
ARGS_LIMIT = 4000
RESULT_LIMIT = 4000
SNIPPET_LIMIT = 3000
DIFF_LINES = 160
OUTCOME_VALUE_LIMIT = 400
HIDDEN_OUTCOME_KEYS = ("file_contents", "file_contents_before", "workspace_diff")
LONG_OUTCOME_KEYS = ("card_yaml_blob",)


class PromptPool:
    """Distinct system prompts of a page, numbered in order of first appearance."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def ref(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.texts) + 1
            self.texts.append(text)
        return self._index[text]

    def render(self) -> str:
        if not self.texts:
            return ""
        items = "".join(
            f'<details id="prompt-{i}"><summary>System prompt P{i} '
            f'<span class="muted">({len(t)} characters)</span></summary>'
            f"<pre>{esc(truncate(t, 60_000))}</pre></details>"
            for i, t in enumerate(self.texts, 1)
        )
        return f'<section><h2>System prompts</h2><div class="card">{items}</div></section>'


def pre(text: str, limit: int, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    return f"<pre{cls}>{esc(truncate(text, limit))}</pre>"


def badge(status: Any, text: str | None = None) -> str:
    key = "none" if status is None else str(status).lower() if isinstance(status, bool) else status
    return f'<span class="badge b-{esc(key)}">{esc(text if text is not None else status)}</span>'


# --- scores ----------------------------------------------------------------------------


def _score_block(score: Score) -> str:
    verdict = {True: "passed", False: "failed", None: "n/a"}[score.passed]
    head = (
        f'<div class="score"><h4>{esc(score.grader)} {badge(score.passed, verdict)} '
        f'<span class="mono">{esc(num(score.value, 2))}</span></h4>'
    )
    body = [head]
    if score.rationale:
        body.append(f'<div class="rationale">{esc(truncate(score.rationale, 3000))}</div>')
    if score.assertions:
        rows = "".join(
            f'<tr class="{"ok" if a.passed else "bad"}"><td>{"✓" if a.passed else "✗"}</td>'
            f"<td>{esc(a.description)}</td>"
            f'<td class="mono">{esc(short(a.actual, 240)) if a.actual is not None else ""}</td>'
            f'<td class="mono">{esc(short(a.expected, 240)) if a.expected is not None else ""}'
            "</td></tr>"
            for a in score.assertions
        )
        body.append(
            '<table class="asserts"><thead><tr><th></th><th>assertion</th><th>actual</th>'
            f"<th>expected</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    meta = {k: v for k, v in score.metadata.items() if k != "usage"}
    if meta:
        body.append(f'<div class="small muted mono">{esc(short(meta, 400))}</div>')
    body.append("</div>")
    return "".join(body)


def render_scores(trial: TrialResult) -> str:
    if not trial.scores:
        return '<p class="muted">No grader scores (the trial did not reach grading).</p>'
    return "".join(_score_block(s) for s in trial.scores)


# --- workspace diff --------------------------------------------------------------------


def _text_map(outcome: Mapping[str, Any], key: str) -> dict[str, str]:
    raw = outcome.get(key)
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def _diff_lines(before: str, after: str, path: str) -> str:
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", n=2, lineterm=""
        )
    )
    extra = len(lines) - DIFF_LINES
    out = []
    for line in lines[:DIFF_LINES]:
        css = ("add" if line.startswith("+") and not line.startswith("+++")
               else "del" if line.startswith("-") and not line.startswith("---")
               else "hunk" if line.startswith("@@") else "")
        text = esc(line if len(line) <= 400 else line[:400] + "…")
        out.append(f'<span class="{css}">{text}</span>' if css else text)
    if extra > 0:
        out.append(esc(f"… [truncated: {extra} more diff lines]"))
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def render_diff(outcome: Mapping[str, Any]) -> str:
    diff = outcome.get("workspace_diff")
    if not isinstance(diff, dict):
        return ""
    created = [str(p) for p in diff.get("created", [])]
    modified = [str(p) for p in diff.get("modified", [])]
    deleted = [str(p) for p in diff.get("deleted", [])]
    if not (created or modified or deleted):
        return '<p class="muted">No file under PKM/ changed.</p>'
    snippets = {str(k): str(v) for k, v in (diff.get("snippets") or {}).items()}
    before, after = _text_map(outcome, "file_contents_before"), _text_map(outcome, "file_contents")
    parts = []
    for kind, paths in (("created", created), ("modified", modified), ("deleted", deleted)):
        for path in paths:
            head = f'<div class="file"><span class="badge b-{kind}">{kind}</span> ' \
                   f'<span class="mono">{esc(path)}</span></div>'
            if kind == "modified" and path in before and path in after:
                body = _diff_lines(before[path], after[path], path)
            elif kind == "deleted" and path in before:
                body = pre(before[path], SNIPPET_LIMIT, "del-block")
            elif path in snippets:
                body = pre(snippets[path], SNIPPET_LIMIT, "add-block" if kind == "created" else "")
            else:
                body = ""
            parts.append(head + body)
    return "".join(parts)


def render_outcome(outcome: Mapping[str, Any]) -> str:
    rows, blocks = [], []
    for key, value in outcome.items():
        if key in HIDDEN_OUTCOME_KEYS:
            continue
        if key in LONG_OUTCOME_KEYS and isinstance(value, str):
            blocks.append(f"<h4>{esc(key)}</h4>{pre(value, SNIPPET_LIMIT)}")
            continue
        text = value if isinstance(value, str) else json_text(value, indent=None)
        rows.append(
            f'<tr><th class="mono">{esc(key)}</th>'
            f'<td class="mono">{esc(truncate(text, OUTCOME_VALUE_LIMIT))}</td></tr>'
        )
    table = f'<table class="kv"><tbody>{"".join(rows)}</tbody></table>' if rows else ""
    return table + "".join(blocks) or '<p class="muted">No outcome was captured.</p>'


# --- transcript ------------------------------------------------------------------------


def _message(msg: Message, prompts: PromptPool) -> str:
    if msg.role == "system":
        ref = prompts.ref(msg.content)
        return (
            f'<div class="msg m-system"><div class="role">system</div>'
            f'<div>System prompt <a href="#prompt-{ref}">P{ref}</a> '
            f'<span class="muted">({len(msg.content)} characters, shown once under '
            "System prompts)</span></div></div>"
        )
    head = f'<div class="role">{esc(msg.role)}'
    if msg.role == "tool":
        head += f' · <span class="mono">{esc(msg.tool_name or "?")}</span>'
        head += f' <span class="muted mono">{esc(msg.tool_call_id or "")}</span>'
        if msg.is_error:
            head += " " + badge("failed", "error")
    head += "</div>"
    body = [head]
    if msg.content:
        limit = RESULT_LIMIT if msg.role == "tool" else MESSAGE_LIMIT
        body.append(pre(msg.content, limit))
    for call in msg.tool_calls:
        args = call.raw_arguments if call.parse_error and call.raw_arguments else call.arguments
        body.append(
            f'<div class="call">→ <b class="mono">{esc(call.name)}</b> '
            f'<span class="muted mono">{esc(call.id)}</span>'
            + (f" {badge('failed', 'unparseable arguments')} {esc(call.parse_error)}"
               if call.parse_error else "")
            + pre(args if isinstance(args, str) else json_text(args), ARGS_LIMIT)
            + "</div>"
        )
    css = "m-error" if msg.is_error else f"m-{msg.role}"
    return f'<div class="msg {css}">{"".join(body)}</div>'


def render_transcript(trial: TrialResult, prompts: PromptPool) -> str:
    msgs = trial.transcript.messages
    if not msgs:
        return '<p class="muted">No messages were recorded.</p>'
    return "".join(_message(m, prompts) for m in msgs)


def render_tool_calls(trial: TrialResult) -> str:
    calls = trial.transcript.tool_calls
    if not calls:
        return '<p class="muted">No tool calls.</p>'
    rows = []
    for i, c in enumerate(calls, 1):
        secs = (c.ended_at - c.started_at).total_seconds()
        rows.append(
            f'<tr class="{"bad" if c.is_error else ""}"><td class="num">{i}</td>'
            f'<td class="mono">{esc(c.tool_name)}</td>'
            f"<td>{badge('failed', 'error') if c.is_error else badge('passed', 'ok')}</td>"
            f"<td>{pre(json_text(c.arguments), ARGS_LIMIT)}</td>"
            f"<td>{pre(c.result, RESULT_LIMIT)}</td>"
            f'<td class="num">{secs:.3f}s</td></tr>'
        )
    return (
        '<table class="calls"><thead><tr><th class="num">#</th><th>tool</th><th>error</th>'
        '<th>arguments</th><th>result</th><th class="num">time</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render_events(trial: TrialResult) -> str:
    events = trial.transcript.events
    if not events:
        return ""
    items = "".join(
        f'<li><span class="mono">{esc(e.kind)}</span> {esc(truncate(e.detail, 1500))}</li>'
        for e in events
    )
    return f'<ul class="events">{items}</ul>'


def _section(title: str, body: str, *, open_: bool = True) -> str:
    if not body:
        return ""
    return f'<details class="sec"{" open" if open_ else ""}><summary>{esc(title)}</summary>' \
           f"{body}</details>"


def render_trial_detail(trial: TrialResult, prompts: PromptPool) -> str:
    """Everything recorded about one trial, in reading order for a failure investigation."""
    head = []
    if trial.infra_error:
        head.append(
            f'<div class="banner">Infrastructure error (not an agent failure): '
            f"{esc(truncate(trial.infra_error, 2000))}</div>"
        )
    if trial.failure_reason:
        head.append(f'<p><b>Failure reason:</b> {esc(truncate(trial.failure_reason, 2000))}</p>')
    head.append(f'<p class="small muted mono">{esc(trial.transcript.summary())}'
                + (" · served from cache" if trial.cached else "") + "</p>")
    diff = render_diff(trial.outcome)
    return "".join([
        *head,
        _section("Grader scores", render_scores(trial)),
        _section("Workspace diff", diff),
        _section("Outcome", render_outcome(trial.outcome), open_=not diff),
        _section(f"Transcript ({len(trial.transcript.messages)} messages)",
                 render_transcript(trial, prompts)),
        _section(f"Tool calls ({len(trial.transcript.tool_calls)})", render_tool_calls(trial),
                 open_=False),
        _section(f"Events ({len(trial.transcript.events)})", render_events(trial), open_=False),
    ])


TRIAL_CSS = """
.score{border-left:3px solid var(--line);padding:2px 0 6px 10px;margin:8px 0}
.score h4{margin:0 0 4px;font-size:13px}
.rationale{margin:2px 0 6px}
table.asserts td,table.asserts th,table.kv td,table.kv th,table.calls td,table.calls th{
font-size:12px;padding:3px 6px}
table.asserts td:first-child{width:18px}table.asserts td:nth-child(2){width:42%}
table.asserts tr.bad td,table.calls tr.bad td{background:var(--del)}
table.kv th{width:220px}
table.calls pre{max-height:220px;margin:0}
.msg{border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:6px 0;
background:var(--card)}
.msg .role .mono{text-transform:none;letter-spacing:0}
.msg .role{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);
font-weight:700}
.m-user{border-left:3px solid var(--accent)}.m-assistant{border-left:3px solid var(--pass)}
.m-tool{border-left:3px solid var(--base)}.m-error{border-left:3px solid var(--fail)}
.m-system{border-left:3px solid var(--warn)}
.call{margin:4px 0}
.file{margin:8px 0 2px}
.b-created{background:var(--pass)}.b-modified{background:var(--accent)}
.b-deleted{background:var(--fail)}
pre.diff .add{background:var(--add);display:inline-block;width:100%}
pre.diff .del{background:var(--del);display:inline-block;width:100%}
pre.diff .hunk{color:var(--muted)}
pre.add-block{background:var(--add)}pre.del-block{background:var(--del)}
details.sec{margin:8px 0}details.sec>summary{font-weight:650;padding:3px 0}
ul.events{margin:4px 0;padding-left:18px;font-size:12px}
"""
