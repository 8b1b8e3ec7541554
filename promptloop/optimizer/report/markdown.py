"""Markdown: the summary of one run (rates, graders, pass@k, buckets, cost, provenance,
failures), the gate's verdict with its per-bucket table, and the one Markdown table writer.

Deterministic for a given run (no clock reads), so it can be diffed and stored next to the
JSON report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from promptloop.graders.base import Score
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.gate.compare import BucketComparison, describe
from promptloop.optimizer.gate.verdict import HARM_ORDER, Verdict
from promptloop.optimizer.report.fmt import num, pct, seconds, short, usd
from promptloop.optimizer.report.summary import RunSummary, failed_text, outside_text, task_order
from promptloop.optimizer.report.table import (
    Cell,
    Table,
    bucket_table,
    comparison_table,
    grader_table,
    pass_k_table,
)

FAILED_STATUSES = ("failed", "timedOut")
STATUS_WORDS = {"timedOut": "timed out"}
"""A trial status as a person reads it (`timedOut` is the stored, original spelling)."""


def cell(text: Any) -> str:
    """A value made safe for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _cell(c: Cell) -> str:
    text = cell(c.text)
    if c.code and text:
        text = f"`{text}`"
    return f"**{text}**" if c.strong and text else text


def table_lines(table: Table) -> list[str]:
    """The Markdown rendering of a table view-model (the only Markdown table writer)."""
    out = ["| " + " | ".join(cell(t) for t in table.titles) + " |",
           "|" + "---|" * len(table.columns)]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows)
    return out


def score_lines(score: Score, *, indent: str = "") -> list[str]:
    """One bullet for a score, then its failing assertions as sub-bullets."""
    verdict = {True: "passed", False: "FAILED", None: "n/a"}[score.passed]
    head = f"{indent}- `{score.grader}`: {num(score.value, 2)} ({verdict})"
    if score.rationale:
        head += f" — {short(score.rationale, 600)}"
    lines = [head]
    for a in score.assertions:
        if a.passed:
            continue
        detail = f"{indent}  - ✗ {short(a.description, 200)}"
        if a.actual is not None or a.expected is not None:
            detail += f" (actual: {short(a.actual, 120)}; expected: {short(a.expected, 120)})"
        lines.append(detail)
    return lines


def _headline(run: RunResult, s: RunSummary) -> list[str]:
    lines = [
        f"# Run `{run.run_name}`",
        "",
        f"Suite **{run.suite_name}** ({run.suite_kind}, {run.agent_name}) · "
        f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC · "
        f"{seconds((run.ended_at - run.started_at).total_seconds())}",
        "",
        f"- **Task pass rate: {pct(s.task_pass_rate)}** ({s.original.passed_tasks}/"
        f"{s.num_tasks} tasks"
        + (f", threshold {s.task_pass_threshold:g}" if s.task_pass_threshold < 1.0 else "")
        + f"); errored excluded: {pct(s.counted_task_pass_rate)} ({s.passed_tasks}/"
        f"{s.decided_tasks})",
        f"- **Trial pass rate: {pct(s.trial_pass_rate)}** ({s.original.passed_trials}/"
        f"{s.num_trials} trials); errored excluded: {pct(s.counted_trial_pass_rate)} "
        f"({s.passed_trials}/{s.counted_trials})",
        f"- Trial outcomes: {s.passed_trials} passed, {failed_text(s)}, "
        f"{s.errored_trials} errored{outside_text(s)}",
        f"- Mean trial score: {num(s.mean_score)}",
        f"- Trials: {s.num_trials} total, {s.cached_trials} from cache"
        + (f", {s.skipped_trials} skipped" if s.skipped_trials else ""),
    ]
    if s.errored_trials:
        label = "ALL TRIALS ERRORED" if s.all_errored else f"{s.errored_trials} TRIAL(S) ERRORED"
        lines += [
            "",
            f"> **⚠ {label}** ({s.errored_trials}/{s.num_trials}): infrastructure errors or "
            "bugs in promptloop, counted as failed by the original's rates and excluded from "
            "the errored-excluded ones. Fix them before trusting this run.",
        ]
        causes = list(s.infra_errors.items())
        lines += [f"> - {n}× {short(msg, 300)}" for msg, n in causes[:5]]
        if len(causes) > 5:  # never a silent cut: say how many causes and trials are not shown
            rest = sum(n for _, n in causes[5:])
            lines.append(f"> - and {len(causes) - 5} more cause(s) of {rest} trial(s): "
                         "`promptloop report RUN --format json` lists every trial")
    return lines


def _graders(s: RunSummary) -> list[str]:
    if not s.graders:
        return []
    return ["", "## Graders", "", *table_lines(grader_table(s))]


def _pass_k(s: RunSummary) -> list[str]:
    if not s.pass_at_k:
        return []
    return ["", "## pass@k / pass^k", "",
            f"Averaged over {s.pass_at_k[0].tasks} task(s); k up to the fewest counted trials.",
            "", *table_lines(pass_k_table(s))]


def _buckets(s: RunSummary) -> list[str]:
    return ["", "## Buckets", "", *table_lines(bucket_table(s))]


def _usage(s: RunSummary) -> list[str]:
    u, c = s.usage, s.cost
    lines = [
        "", "## Tokens and cost", "",
        f"- Agent: {u.total_tokens} tokens (in {u.input_tokens}, out {u.output_tokens}, "
        f"cache read {u.cache_read_tokens}, cache write {u.cache_write_tokens}); "
        f"{u.model_calls} model calls, {u.retries} retries, {u.tool_calls} tool calls",
    ]
    if s.judge_usage.model_calls:
        j = s.judge_usage
        lines.append(f"- Judge: {j.total_tokens} tokens (in {j.input_tokens}, out "
                     f"{j.output_tokens}) over {j.model_calls} judged scores")
    lines.append(f"- Estimated cost: {usd(c.total_usd)} (spent by this run, cache excluded: "
                 f"{usd(c.spent_usd)})")
    lines += [f"- Note: {n}" for n in c.notes]
    return lines


def _provenance(run: RunResult) -> list[str]:
    p = run.provenance
    commit = (p.git_commit or "unknown")[:12] + (" (dirty)" if p.git_dirty else "")
    if p.candidate_commit:  # a candidate's run: its own commit, on the base it was made from
        commit = f"{p.candidate_commit[:12]} (candidate, on base {commit})"
    if p.role:
        commit += f"; role: {p.role}" + (f", branch {p.branch}" if p.branch else "")
    hashes = ", ".join(f"{k} {v[:12]}" for k, v in sorted(p.prompt_hashes.items())) or "n/a"
    return [
        "", "## Provenance", "",
        f"- Git commit: {commit}",
        f"- Agent model: {p.agent_model or 'n/a'}; judge model: {p.judge_model or 'none'}",
        f"- Prompt hash: {hashes}",
        f"- Suite hash: {p.suite_hash[:12] or 'n/a'}; mode: {p.mode}",
        *_concurrency(run),
    ]


def _concurrency(run: RunResult) -> list[str]:
    c = run.concurrency
    if c is None:
        return []
    pushed = (f"; the provider pushed back {c.decreases} time(s), lowest limit {c.lowest_limit}"
              if c.decreases else "")
    return [f"- Concurrency: configured {c.configured}, reached {c.peak}{pushed}"]


def ordered_trials(run: RunResult, statuses: Sequence[str]) -> list[TrialResult]:
    """Trials with one of `statuses`, in suite task order then trial index."""
    rank = {tid: i for i, tid in enumerate(task_order(run))}
    chosen = [t for t in run.trials if t.status in statuses]
    return sorted(chosen, key=lambda t: (rank.get(t.task_id, len(rank)), t.trial_index))


def _failures(run: RunResult) -> list[str]:
    failed = ordered_trials(run, FAILED_STATUSES)
    lines = ["", f"## Failed trials ({len(failed)})"]
    if not failed:
        lines += ["", "None."]
    for t in failed:
        lines += ["", f"### `{t.task_id}` #{t.trial_index} ({t.bucket}) — "
                  f"{STATUS_WORDS.get(t.status, t.status)}"]
        if t.failure_reason:
            lines.append(f"Reason: {short(t.failure_reason, 400)}")
        lines.append("")
        for s in t.scores:
            lines += score_lines(s)
        if not t.scores:
            lines.append("- (no scores)")
    errored = ordered_trials(run, ("errored",))
    if errored:
        lines += ["", f"## Errored trials ({len(errored)}, infrastructure; not scored)", ""]
        lines += [f"- `{t.task_id}` #{t.trial_index}: "
                  f"{short(t.infra_error or t.failure_reason or 'unknown error', 300)}"
                  for t in errored]
    return lines


def render_markdown(run: RunResult, summary: RunSummary) -> str:
    lines = [
        *_headline(run, summary), *_graders(summary), *_pass_k(summary),
        *_buckets(summary), *_usage(summary), *_provenance(run), *_failures(run),
    ]
    return "\n".join(lines) + "\n"


def movement_lines(verdict: Verdict) -> list[str]:
    """The target's movement: its visible tasks (the ones the proposer saw) and its held-out
    tasks, counted but never named (these lines reach the ledger the proposer reads)."""
    out = []
    visible = verdict.visible or verdict.target
    if visible is not None:
        out.append(f"visible target tasks ({visible.tasks or '?'}): {describe(visible)}")
    if verdict.heldout is not None:
        out.append(f"held-out target tasks ({len(verdict.heldout_tasks)}): "
                   f"{describe(verdict.heldout)}")
    elif verdict.heldout_tasks:
        out.append(f"held-out target tasks ({len(verdict.heldout_tasks)}): not run (the gate "
                   "stopped first)")
    return out




def harm_lines(verdict: Verdict) -> list[str]:
    """Every other bucket's statement (regressed and open ones first), then a summary that
    says "no bucket regressed" only when every bucket said "no harm"."""
    if not verdict.buckets:
        return []
    ordered = sorted(verdict.buckets, key=lambda b: HARM_ORDER.get(b.state, 3))
    out = [f"[{b.state}] {b.statement}" for b in ordered]
    bad = [b.bucket for b in ordered if b.state == "regressed"]
    open_ = [b.bucket for b in ordered if b.state == "harm not ruled out"]
    if not bad and not open_:
        out.append(f"no bucket regressed: all {len(ordered)} other bucket(s) said no harm")
    else:
        out.append(f"{len(bad)} bucket(s) regressed, harm not ruled out in {len(open_)}, no "
                   f"harm in {len(ordered) - len(bad) - len(open_)}")
    return out


def verdict_markdown(verdict: Verdict, comparisons: Sequence[BucketComparison]) -> str:
    """The gate's verdict, its reasons, the target's visible and held-out movement, every
    other bucket's harm statement and the per-bucket table (commit messages, PR bodies)."""
    lines = [f"**Verdict: {verdict.decision.upper()}** (target bucket "
             f"`{verdict.target_bucket}`)", ""]
    lines += [f"- {cell(r)}" for r in verdict.reasons]
    if verdict.suspected_regressions:
        lines.append("- suspected regressions: "
                     + ", ".join(f"`{b}`" for b in verdict.suspected_regressions))
    moved = movement_lines(verdict)
    if moved:
        lines += ["", "**Target movement**", "", *(f"- {cell(m)}" for m in moved)]
    harm = harm_lines(verdict)
    if harm:
        lines += ["", "**Harm per bucket**", "", *(f"- {cell(h)}" for h in harm)]
    # the table's Status as the verdict decided it (a team's accepted PR body read "[no harm]"
    # above a table calling every bucket "inconclusive", the improved target included)
    said: dict[str, str] = {b.bucket: b.state for b in verdict.buckets}
    if verdict.decision == "accept":
        said[verdict.target_bucket] = "improved"
    table = comparison_table(comparisons, verdict.target_bucket, harm=said)
    return "\n".join([*lines, "", *table_lines(table)]) + "\n"
