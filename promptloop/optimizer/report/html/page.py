"""`promptloop report RUN --format html`: one self-contained page to browse a run.

Header (suite, models, provenance, rates, errors, tokens, cost), a per-bucket bar chart and
table (optionally base vs candidate with deltas), grader and pass@k tables, and a trial browser
with filters whose rows expand into the full trial. This module computes what the page shows;
templates/report.html.j2 lays it out. Trial detail is rendered server-side; a small inline
script (static/report.js) adds filtering, sorting and expand/collapse, reading its index from
a `<script type="application/json">` block.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.html.kit import Chart, ChartRow, macro, render
from promptloop.optimizer.report.html.trials import PromptPool, diff_files
from promptloop.optimizer.report.summary import (
    RunSummary,
    failed_text,
    outside_text,
    summarize,
    task_order,
)
from promptloop.optimizer.report.table import bucket_table, grader_table, pass_k_table

__all__ = ["bucket_chart_rows", "render_diff", "render_html", "report_context"]

STATUSES = ("passed", "failed", "timedOut", "errored", "skipped")
NUMERIC = ("index", "score", "tokens", "secs")


@dataclass(frozen=True)
class Stat:
    """A stat card: label, big value, lines below, and with a base run its value and delta."""

    label: str
    value: str
    lines: tuple[str, ...] = ()
    alert: bool = False
    base: str | None = None
    delta: str = ""
    tone: str = ""


@dataclass(frozen=True)
class TrialRow:
    n: int
    trial: TrialResult
    base: TrialResult | None
    changed: bool
    tokens: int
    secs: float
    reason: str


def _versus(label: str, value: str, lines: list[str], base: float | None, cand: float | None,
            bs: RunSummary | None, *, rate: bool = True) -> Stat:
    if bs is None:
        return Stat(label, value, tuple(lines))
    shown = fmt.pct(base) if rate else fmt.num(base)
    delta = fmt.delta_pp(base, cand) if rate else fmt.delta(base, cand)
    return Stat(label, value, tuple(lines), base=shown, delta=delta, tone=fmt.trend(base, cand))


def stat_cards(s: RunSummary, bs: RunSummary | None) -> list[Stat]:
    u, ju, c = s.usage, s.judge_usage, s.cost
    threshold = f", threshold {s.task_pass_threshold:g}" if s.task_pass_threshold < 1 else ""
    tokens = [f"in {fmt.tokens(u.input_tokens)} · out {fmt.tokens(u.output_tokens)}"]
    if u.cache_read_tokens:
        tokens.append(f"cache read {fmt.tokens(u.cache_read_tokens)}")
    tokens.append(f"{u.model_calls} model calls, {u.tool_calls} tool calls")
    if ju.model_calls:
        tokens.append(f"judge {fmt.tokens(ju.total_tokens)} tokens")
    return [
        _versus("Task pass rate", fmt.pct(s.task_pass_rate),
                [f"{s.original.passed_tasks}/{s.num_tasks} tasks{threshold}",
                 f"errored excluded: {fmt.pct(s.counted_task_pass_rate)} "
                 f"({s.passed_tasks}/{s.decided_tasks})"],
                bs.task_pass_rate if bs else None, s.task_pass_rate, bs),
        _versus("Trial pass rate", fmt.pct(s.trial_pass_rate),
                [f"{s.original.passed_trials}/{s.num_trials} trials",
                 f"errored excluded: {fmt.pct(s.counted_trial_pass_rate)} "
                 f"({s.passed_trials}/{s.counted_trials})"],
                bs.trial_pass_rate if bs else None, s.trial_pass_rate, bs),
        _versus("Mean score", fmt.num(s.mean_score),
                [failed_text(s)],
                bs.mean_score if bs else None, s.mean_score, bs, rate=False),
        Stat("Errored trials", str(s.errored_trials),
             ("infrastructure errors or promptloop bugs: failed in the original's rates, "
              f"excluded from ours{outside_text(s)}" if s.errored_trials
              else "no infrastructure errors",), alert=s.errored_trials > 0),
        Stat("Trials", str(s.num_trials),
             (f"{s.cached_trials} from cache"
              + (f", {s.skipped_trials} skipped" if s.skipped_trials else ""),)),
        Stat("Tokens", fmt.tokens(u.total_tokens), tuple(tokens)),
        Stat("Estimated cost", fmt.usd(c.total_usd),
             (f"spent now {fmt.usd(c.spent_usd)}", *c.notes)),
    ]


def provenance(run: RunResult, base: RunResult | None) -> list[tuple[str, str, str]]:
    """(label, shown value, full value for the tooltip): models, commit, hashes, timing."""
    p = run.provenance
    secs = (run.ended_at - run.started_at).total_seconds()
    dirty = " (dirty)" if p.git_dirty else "" if p.git_dirty is False else " (dirty: unknown)"
    commit = p.git_commit or "unknown"
    rows = [
        ("agent", run.agent_name, run.agent_name), ("kind", run.suite_kind, run.suite_kind),
        ("agent model", p.agent_model or "?", p.agent_model or "?"),
        ("judge model", p.judge_model or "none", p.judge_model or "none"),
        ("mode", p.mode, p.mode),
        *((("candidate commit", p.candidate_commit[:12], p.candidate_commit),
           ("base commit", commit[:12] + dirty, commit)) if p.candidate_commit
          else (("commit", commit[:12] + dirty, commit),)),
        *((("role", p.role + (f" ({p.branch})" if p.branch else ""), p.role),)
          if p.role else ()),
        *((f"prompt {name}", h[:12], h) for name, h in sorted(p.prompt_hashes.items())),
        ("suite hash", p.suite_hash[:12] or "?", p.suite_hash),
        ("started", f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC", ""),
        ("duration", fmt.seconds(secs), ""),
    ]
    if base is not None:
        rows.append(("base run", base.run_name, base.run_name))
    return [(k, v, full or v) for k, v, full in rows]


def bucket_chart_rows(summary: RunSummary, base_summary: RunSummary | None = None,
                      attr: str = "trial_pass_rate") -> list[ChartRow]:
    """Chart rows per bucket (union of both runs) for `attr` of `BucketSummary`
    (`trial_pass_rate`, `task_pass_rate` or `mean_score`)."""
    mine = {b.bucket: b for b in summary.buckets}
    theirs = {b.bucket: b for b in base_summary.buckets} if base_summary else {}
    out = []
    for n in sorted(set(mine) | set(theirs)):
        b, o = mine.get(n), theirs.get(n)
        note = f"{b.passed_trials}/{b.trials} trials" if b else "not in this run"
        out.append(ChartRow(label=n, value=getattr(b, attr) if b else None,
                            base=getattr(o, attr) if o else None, note=note))
    return out


def _trial_rows(run: RunResult, base: RunResult | None) -> list[TrialRow]:
    trials = [t for task_id in task_order(run) for t in run.trials_of(task_id)]
    base_by = {(t.task_id, t.trial_index): t for t in base.trials} if base else {}
    rows = []
    for n, t in enumerate(trials, 1):
        b = base_by.get((t.task_id, t.trial_index))
        rows.append(TrialRow(
            n=n, trial=t, base=b, changed=b is not None and b.status != t.status,
            tokens=t.transcript.metrics.usage.total_tokens,
            secs=(t.ended_at - t.started_at).total_seconds(),
            reason=t.infra_error or t.failure_reason or "",
        ))
    return rows


def _index(run: RunResult, rows: list[TrialRow]) -> dict[str, Any]:
    """The trial index the page script reads (filters, counts)."""
    trials = [r.trial for r in rows]
    return {
        "run": run.run_name,
        "buckets": sorted({t.bucket for t in trials}),
        "statuses": sorted({t.status for t in trials}, key=STATUSES.index),
        "trials": [
            {"n": r.n, "task": r.trial.task_id, "bucket": r.trial.bucket,
             "index": r.trial.trial_index, "status": r.trial.status,
             "score": round(r.trial.score, 4)}
            for r in rows
        ],
    }


def report_context(
    run: RunResult,
    summary: RunSummary,
    *,
    base: RunResult | None = None,
    base_summary: RunSummary | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """What templates/report.html.j2 needs (the viewer renders it inside its own pages)."""
    if base is not None and base_summary is None:
        base_summary = summarize(base)
    rows = _trial_rows(run, base)
    columns = [("", ""), ("task", "task"), ("bucket", "bucket"), ("trial", "index"),
               ("status", "status"), ("score", "score"), *([("base", "")] if base else []),
               ("tools", ""), ("tokens", "tokens"), ("time", "secs"), ("failure reason", "")]
    return {
        "title": title or f"{run.suite_name} · {run.run_name}",
        "run": run,
        "summary": summary,
        "stats": stat_cards(summary, base_summary),
        "provenance": provenance(run, base),
        "charts": {
            "pass": Chart(tuple(bucket_chart_rows(summary, base_summary))),
            "score": Chart(tuple(bucket_chart_rows(summary, base_summary, "mean_score")),
                           metric="mean score"),
        },
        "buckets": bucket_table(summary, base_summary),
        "graders": grader_table(summary),
        "pass_k": pass_k_table(summary),
        "has_base": base is not None,
        "trial_columns": columns,
        "numeric": NUMERIC,
        "trials": rows,
        "prompts": PromptPool(r.trial for r in rows),
        "index": _index(run, rows),
    }


def render_html(
    run: RunResult,
    summary: RunSummary,
    *,
    base: RunResult | None = None,
    base_summary: RunSummary | None = None,
    title: str | None = None,
) -> str:
    """The whole report as one self-contained HTML document.

    With `base` (and its summary; computed when omitted) the header, bucket chart and trial
    table compare the base run with this one, pairing trials by task and trial index.
    """
    context = report_context(run, summary, base=base, base_summary=base_summary, title=title)
    return render("report.html.j2", **context)


def render_diff(outcome: Mapping[str, Any]) -> str:
    """The workspace diff of a trial's outcome as HTML ('' when the outcome has none)."""
    return str(macro("trial.html.j2", "diff")(diff_files(outcome))).strip()
