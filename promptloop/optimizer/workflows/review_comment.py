"""The review's PR comment, as Markdown.

The comment stays under GitHub's size limit: the diff and the newly failing trials are cut
with explicit markers (the full data is in the review's result.json). The review's result is
read through the structural types below, so this module needs nothing from the workflow that
produced it; posting the comment is `promptloop.optimizer.workflows.github`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Protocol

from promptloop.optimizer.core.results import pairing_text
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy
from promptloop.optimizer.gate.verdict import HARM_ORDER
from promptloop.optimizer.propose.package import FailingTrial, fence
from promptloop.optimizer.report.fmt import num, short
from promptloop.optimizer.report.markdown import STATUS_WORDS, cell, table_lines
from promptloop.optimizer.report.plain import review_headline
from promptloop.optimizer.report.table import comparison_table
from promptloop.optimizer.workflows.github import MARKER
from promptloop.optimizer.workflows.review_models import ReviewOutcome

MAX_COMMENT_CHARS = 60_000
"""GitHub rejects comments over 65,536 characters; keep a margin."""
MAX_DIFF_CHARS = 20_000
_BADGE = {"regresses": "🔴 regresses", "improves": "🟢 improves", "neutral": "⚪ neutral",
          "inconclusive": "🟡 inconclusive", "broken": "⛔ broken"}
_HARM = {"regressed": "🔴 regressed", "harm not ruled out": "🟡 harm not ruled out",
         "no harm": "🟢 no harm"}


class BucketVerdictLike(Protocol):
    """One bucket's harm statement (`gate.policy.BucketVerdict`)."""

    @property
    def bucket(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def statement(self) -> str: ...


class HeadBreakLike(Protocol):
    """A head's prompt target that fails the region guard (`review_models.HeadBreak`)."""

    path: str
    region: str
    line: int | None
    reason: str

    @property
    def where(self) -> str: ...


class TrialChangeLike(Protocol):
    """A paired trial whose pass/fail flipped (`workflows.review.TrialChange`)."""

    bucket: str
    task_id: str
    trial_index: int
    status: str
    failure_reason: str | None
    detail: FailingTrial | None


class AgentReviewLike(Protocol):
    """One agent's part of a review (`workflows.review.AgentReview`)."""

    agent: str
    prompt_path: str
    decision: ReviewOutcome
    reasons: list[str]
    comparisons: list[BucketComparison]
    regressed: list[str]
    improved: list[str]
    open: list[str]
    confirmed_buckets: list[str]
    base_trials: int
    base_cached_trials: int
    head_trials: int
    head_cached_trials: int
    seeded: bool
    harm_trials: int
    paired_trials: int

    @property
    def buckets(self) -> Sequence[BucketVerdictLike]: ...

    @property
    def newly_failing(self) -> Sequence[TrialChangeLike]: ...

    @property
    def fixed(self) -> Sequence[TrialChangeLike]: ...

    @property
    def head_breaks(self) -> Sequence[HeadBreakLike]: ...


class ReviewLike(Protocol):
    """What the comment shows of a review (`workflows.review.ReviewResult`)."""

    decision: ReviewOutcome | None
    message: str
    review_id: str
    base_ref: str
    head_ref: str
    base_commit: str
    head_commit: str
    agent_model: str
    policy: GatePolicy
    confirm_trials: int
    unchanged: list[str]
    notes: list[str]
    diff: str

    @property
    def agents(self) -> Sequence[AgentReviewLike]: ...


def bucket_table(comparisons: Sequence[BucketComparison],
                 harm: Mapping[str, str] | None = None) -> str:
    """Every bucket of the agent's suites, head vs base on paired trials (`harm`: each
    bucket's harm statement, `comparison_table`)."""
    return "\n".join(table_lines(comparison_table(comparisons, cand="Head", harm=harm)))


def group_by_task(changes: Sequence[TrialChangeLike]) -> list[list[TrialChangeLike]]:
    """Changes of the same task (and bucket) together, in first-seen order."""
    groups: dict[tuple[str, str], list[TrialChangeLike]] = {}
    for c in changes:
        groups.setdefault((c.bucket, c.task_id), []).append(c)
    return list(groups.values())


def _label(group: Sequence[TrialChangeLike], html: bool = False) -> str:
    first = group[0]
    indices = ", ".join(f"#{c.trial_index}" for c in group)
    if html:  # inside <summary>, Markdown code spans are not rendered everywhere
        task, bucket = (escape(x) for x in (first.task_id, first.bucket))
        return f"<code>{task}</code> (<code>{bucket}</code>) trial {indices}"
    return f"`{first.task_id}` (`{first.bucket}`) trial {indices}"


def _failing_detail(group: Sequence[TrialChangeLike]) -> str:
    """One collapsible block per task: the first newly failing trial in full, the other
    trials' failure reasons when they differ."""
    c = group[0]
    reason = short(c.failure_reason or c.status, 160)
    summary = f"<summary>{_label(group, html=True)}: {escape(cell(reason))}</summary>"
    d = c.detail
    if d is None:
        return f"- {_label(group)}: {cell(reason)}"
    lines = [
        "<details>",
        summary,
        "",
        f"Trial #{c.trial_index}, head status **{STATUS_WORDS.get(c.status, c.status)}**; "
        "this task passed "
        f"{d.task_passed_trials}/{d.task_counted_trials} counted head trials.",
        "",
        "**Input**",
        "",
        fence(short(d.input_content, 600)),
        "",
        "**Graders**",
        "",
    ]
    for s in d.scores:
        verdict = {True: "passed", False: "FAILED", None: "n/a"}[s.passed]
        lines.append(
            f"- `{s.grader}` {num(s.value, 2)} ({verdict})"
            + (f": {cell(short(s.rationale, 400))}" if s.rationale else "")
        )
        lines += [f"  - ✗ {cell(a)}" for a in s.failing_assertions]
    if d.trace:
        lines += ["", "**Tool calls**", "", fence("\n".join(d.trace[:20]))]
    others = [x for x in group[1:] if x.failure_reason != c.failure_reason]
    if others:
        lines += ["", "**Other trials of this task**", ""]
        lines += [
            f"- #{x.trial_index}: {cell(short(x.failure_reason or x.status, 200))}" for x in others
        ]
    return "\n".join([*lines, "", "</details>"])


def plain_md(text: str) -> str:
    """Text shown as written in Markdown prose: backslashes and backticks escaped (a reason
    quoting a literal's backtick opened a code span and garbled the rest), one line."""
    return cell(text.replace("\\", "\\\\").replace("`", "\\`"))


def _broken_section(a: AgentReviewLike) -> list[str]:
    """An agent whose head fails the region guard: where and why, no trial run."""
    said = review_headline("broken", [], [], [], [], [b.where for b in a.head_breaks])
    out = [f"### `{a.agent}` (`{a.prompt_path}`): {_BADGE['broken']}", "",
           cell(said[:1].upper() + said[1:]) + ".", ""]
    for b in a.head_breaks:  # the reason quotes source characters (a backtick): escaped
        out.append(f"- **`{b.path}`" + (f" line {b.line}" if b.line else "") + f"**, "
                   f"{plain_md(b.region)}: {plain_md(b.reason)}")
    return [*out, "", "No trial was run for this agent: the gate does not judge a prompt whose "
            "source file is broken.", ""]


def _agent_section(a: AgentReviewLike, confirm_trials: int) -> list[str]:
    if a.decision == "broken":
        return _broken_section(a)
    out = [f"### `{a.agent}` (`{a.prompt_path}`): {_BADGE[a.decision]}", ""]
    # in plain words first; the findings and the method follow
    said = review_headline(a.decision, a.comparisons, a.regressed, a.improved, a.open,
                           reasons=a.reasons,
                           moved=(len(a.fixed), len(a.newly_failing), a.paired_trials))
    out += [cell(said[:1].upper() + said[1:]) + ".", ""]
    out += [f"- {cell(r)}" for r in a.reasons]
    if a.confirmed_buckets:
        out.append(
            f"- suspected regressions re-run with {confirm_trials} extra trial(s) per task on "
            f"both sides before this verdict: {', '.join(f'`{b}`' for b in a.confirmed_buckets)}"
        )
    out.append(
        f"- trials: base {a.base_trials} ({a.base_cached_trials} reused from the trial cache), "
        f"head {a.head_trials} ({a.head_cached_trials} reused)"
    )
    out.append(f"- {pairing_text(a.seeded)}")
    harm = ({b.bucket: b.state for b in a.buckets} | dict.fromkeys(a.improved, "improved")
            | dict.fromkeys(a.regressed, "regressed"))
    return [*out, "", bucket_table(a.comparisons, harm), "", *harm_lines(a), ""]


def harm_lines(a: AgentReviewLike) -> list[str]:
    """Every bucket's harm statement, regressed and open ones first."""
    if not a.buckets:
        return []
    out = [f"**Harm detection per bucket** ({a.harm_trials} trial(s) added for it):", ""]
    for b in sorted(a.buckets, key=lambda b: HARM_ORDER.get(b.state, 3)):
        out.append(f"- `{b.bucket}`: {_HARM.get(b.state, b.state)}: {cell(b.statement)}")
    return out


def render_comment(result: ReviewLike, max_chars: int = MAX_COMMENT_CHARS) -> str:
    """The PR comment: verdict, per-bucket tables, prompt diff, newly failing and fixed trials."""
    r = result
    decision = r.decision or "neutral"
    evaluated = any(a.decision != "broken" for a in r.agents)
    head = [
        MARKER,
        f"## promptloop review: {_BADGE[decision]}",
        "",
        f"Prompt change `{r.base_ref}` (`{r.base_commit[:10]}`) → `{r.head_ref}` "
        f"(`{r.head_commit[:10]}`), "
        + (f"evaluated with `{r.agent_model}` on paired trials (same task, same trial index)."
           if evaluated else "not evaluated: the head's prompt source fails the region guard."),
        "",
        f"**Verdict: {decision}.** {cell(r.message.removeprefix(f'{decision}: '))}",
        "",
    ]
    head += [f"> {cell(n)}" for n in r.notes]
    if r.unchanged:
        head += [
            f"Unchanged prompts (not evaluated): {', '.join(f'`{u}`' for u in r.unchanged)}",
            "",
        ]
    for a in r.agents:
        head += _agent_section(a, r.confirm_trials)
    diff = r.diff.rstrip()
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n[... {len(diff) - MAX_DIFF_CHARS} more chars ...]"
    head += ["### Prompt diff", "", fence(diff, "diff"), ""]
    broken = [c for a in r.agents for c in a.newly_failing]
    fixed = [c for a in r.agents for c in a.fixed]
    fixed_groups = group_by_task(fixed)
    fixed_block = [f"### Trials fixed ({len(fixed)})", ""]
    fixed_block += [f"- {_label(g)}" for g in fixed_groups[:50]] or ["- none"]
    if len(fixed_groups) > 50:
        fixed_block.append(f"- [... {len(fixed_groups) - 50} more task(s) ...]")
    footer = [
        "",
        "---",
        f"<sub>promptloop review `{r.review_id}`: a bucket regresses when one of its tasks "
        "broke against its own baseline record, when its adaptive betting test is rejected, or "
        "when the fixed-sample family rejects it (or its mean score drops by "
        f"{num(r.policy.regression_tolerance, 2)} or more); the review is inconclusive while a "
        "bucket's harm is not ruled out; it improves with a gain of at least "
        f"{num(r.policy.min_improvement, 2)} significant after Holm, and only when every "
        "bucket said no harm; it is broken when the head's prompt source fails the region "
        "guard optimize applies (the literal closed early, a new interpolation, a stray `$` "
        "in Dart, an edit outside the region), and no trial is run for that agent. Full "
        "data: result.json next to this comment.</sub>",
    ]
    if not evaluated:  # no trial ran: no trials to list
        return "\n".join(head + footer) + "\n"
    text = "\n".join(head) + f"\n### Newly failing trials ({len(broken)})\n\n"
    budget = max_chars - len(text) - len("\n".join(fixed_block + footer)) - 200
    if not broken:
        text += "None.\n"
    groups = group_by_task(broken)
    for n, group in enumerate(groups):
        block = _failing_detail(group) + "\n\n"
        if len(block) > budget:
            text += (
                f"[... {len(groups) - n} more task(s) with newly failing trials not shown: "
                "size cap; see result.json ...]\n\n"
            )
            break
        text += block
        budget -= len(block)
    return text + "\n".join(fixed_block + footer) + "\n"
