"""The review's PR comment: Markdown rendering, and posting it with the `gh` CLI.

The comment stays under GitHub's size limit: the diff and the newly failing trials are cut
with explicit markers (the full data is in the review's result.json).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from html import escape
from pathlib import Path

from optimizer.gate.stats import BucketComparison
from optimizer.propose.package import fence
from optimizer.report.markdown import short
from optimizer.workflows.review import AgentReview, ReviewResult, TrialChange

MAX_COMMENT_CHARS = 60_000
"""GitHub rejects comments over 65,536 characters; keep a margin."""
MAX_DIFF_CHARS = 20_000
_BADGE = {"regresses": "🔴 regresses", "improves": "🟢 improves", "neutral": "⚪ neutral"}
_HEADERS = [
    "Bucket",
    "n",
    "Base pass",
    "Head pass",
    "Base mean",
    "Head mean",
    "Delta",
    "CI",
    "Fixed/Broken",
    "p",
    "Status",
]


def _f(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def bucket_row(c: BucketComparison) -> str:
    ci = "n/a" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    status = f"**{c.status}**" if c.status in ("regressed", "improved") else c.status
    cells = [
        f"`{c.bucket}`",
        f"{c.n_pairs}" + (f" (+{c.n_dropped} dropped)" if c.n_dropped else ""),
        _f(c.base_pass_rate, ".0%"),
        _f(c.cand_pass_rate, ".0%"),
        _f(c.base_mean, ".3f"),
        _f(c.cand_mean, ".3f"),
        _f(c.delta, "+.3f"),
        ci,
        f"{c.fixed}/{c.broken}",
        f"{c.p_value:.3g}",
        status,
    ]
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def bucket_table(comparisons: list[BucketComparison]) -> str:
    """Every bucket of the agent's suites, head vs base on paired trials."""
    pct = {round(c.confidence * 100) for c in comparisons}
    headers = [f"{pct.pop()}% CI" if h == "CI" and len(pct) == 1 else h for h in _HEADERS]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + [bucket_row(c) for c in comparisons])


def group_by_task(changes: list[TrialChange]) -> list[list[TrialChange]]:
    """Changes of the same task (and bucket) together, in first-seen order."""
    groups: dict[tuple[str, str], list[TrialChange]] = {}
    for c in changes:
        groups.setdefault((c.bucket, c.task_id), []).append(c)
    return list(groups.values())


def _label(group: list[TrialChange], html: bool = False) -> str:
    first = group[0]
    indices = ", ".join(f"#{c.trial_index}" for c in group)
    if html:  # inside <summary>, Markdown code spans are not rendered everywhere
        task, bucket = (escape(x) for x in (first.task_id, first.bucket))
        return f"<code>{task}</code> (<code>{bucket}</code>) trial {indices}"
    return f"`{first.task_id}` (`{first.bucket}`) trial {indices}"


def _failing_detail(group: list[TrialChange]) -> str:
    """One collapsible block per task: the first newly failing trial in full, the other
    trials' failure reasons when they differ."""
    c = group[0]
    reason = short(c.failure_reason or c.status, 160)
    summary = f"<summary>{_label(group, html=True)}: {escape(_cell(reason))}</summary>"
    d = c.detail
    if d is None:
        return f"- {_label(group)}: {_cell(reason)}"
    lines = [
        "<details>",
        summary,
        "",
        f"Trial #{c.trial_index}, head status **{c.status}**; this task passed "
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
        value = "n/a" if s.value is None else f"{s.value:.2f}"
        lines.append(
            f"- `{s.grader}` {value} ({verdict})"
            + (f": {_cell(short(s.rationale, 400))}" if s.rationale else "")
        )
        lines += [f"  - ✗ {_cell(a)}" for a in s.failing_assertions]
    if d.trace:
        lines += ["", "**Tool calls**", "", fence("\n".join(d.trace[:20]))]
    others = [x for x in group[1:] if x.failure_reason != c.failure_reason]
    if others:
        lines += ["", "**Other trials of this task**", ""]
        lines += [
            f"- #{x.trial_index}: {_cell(short(x.failure_reason or x.status, 200))}" for x in others
        ]
    return "\n".join([*lines, "", "</details>"])


def _agent_section(a: AgentReview, confirm_trials: int) -> list[str]:
    out = [f"### `{a.agent}` (`{a.prompt_path}`): {_BADGE[a.decision]}", ""]
    out += [f"- {_cell(r)}" for r in a.reasons]
    if a.confirmed_buckets:
        out.append(
            f"- suspected regressions re-run with {confirm_trials} extra trial(s) per task on "
            f"both sides before this verdict: {', '.join(f'`{b}`' for b in a.confirmed_buckets)}"
        )
    out.append(
        f"- trials: base {a.base_trials} ({a.base_cached_trials} reused from the trial cache), "
        f"head {a.head_trials} ({a.head_cached_trials} reused)"
    )
    return [*out, "", bucket_table(a.comparisons), ""]


def render_comment(result: ReviewResult, max_chars: int = MAX_COMMENT_CHARS) -> str:
    """The PR comment: verdict, per-bucket tables, prompt diff, newly failing and fixed trials."""
    r = result
    decision = r.decision or "neutral"
    head = [
        f"## promptloop review: {_BADGE[decision]}",
        "",
        f"Prompt change `{r.base_ref}` (`{r.base_commit[:10]}`) → `{r.head_ref}` "
        f"(`{r.head_commit[:10]}`), evaluated with `{r.agent_model}` on paired trials "
        "(same task, same trial index).",
        "",
        f"**Verdict: {decision}.** {_cell(r.message.removeprefix(f'{decision}: '))}",
        "",
    ]
    head += [f"> {_cell(n)}" for n in r.notes]
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
        f"<sub>promptloop review `{r.review_id}`: a bucket regresses when its mean score drops "
        f"by {r.policy.regression_tolerance:.2f} or more (or more trials broke than were fixed "
        f"with such a pass-rate drop); it improves with a gain of at least "
        f"{r.policy.min_improvement:.2f} whose {round(r.policy.confidence * 100)}% bootstrap "
        "interval excludes 0. Full data: result.json next to this comment.</sub>",
    ]
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


# --- posting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PostResult:
    posted: bool
    message: str
    command: str
    """The `gh pr comment` command (to run by hand when posting was not possible)."""
    pr: int | None = None
    failed: bool = False
    """gh was usable but the comment could not be posted (an infrastructure failure)."""


def find_gh() -> str | None:
    return shutil.which("gh")


def head_branch(repo: Path, head_ref: str) -> str | None:
    """The branch name behind `head_ref` (local or remote-tracking), None for a bare commit."""
    proc = subprocess.run(
        ["git", "rev-parse", "--symbolic-full-name", head_ref],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    full = proc.stdout.strip()
    if full.startswith("refs/heads/"):
        return full.removeprefix("refs/heads/")
    if full.startswith("refs/remotes/") and full.count("/") >= 3:
        return full.split("/", 3)[3]
    return None


def _gh(gh: str, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [gh, *args], cwd=repo, capture_output=True, text=True, check=False, timeout=120
    )


def detect_pr(gh: str, repo: Path, head_ref: str) -> int | None:
    """The number of the open PR whose head is `head_ref`'s branch (`gh pr view --json`)."""
    branch = head_branch(repo, head_ref)
    if branch is None:
        return None
    proc = _gh(gh, repo, "pr", "view", branch, "--json", "number")
    try:
        number = json.loads(proc.stdout).get("number") if proc.returncode == 0 else None
    except (json.JSONDecodeError, AttributeError):
        return None
    return number if isinstance(number, int) else None


def post_comment(body_file: Path, *, repo: Path, head_ref: str, pr: int | None) -> PostResult:
    """Comment `body_file` on the PR through gh; when gh is missing, unauthenticated or the PR
    is unknown, say what to run instead."""

    def command(number: int | None) -> str:
        return shlex.join(
            [
                "gh",
                "pr",
                "comment",
                str(number) if number else "<PR-number>",
                "--body-file",
                str(body_file),
            ]
        )

    gh = find_gh()
    if gh is None:
        return PostResult(
            False, "the gh CLI is not installed; post the comment with:", command(pr), pr
        )
    try:
        if _gh(gh, repo, "auth", "status").returncode != 0:
            return PostResult(
                False,
                "gh is not authenticated (run `gh auth login`); then post the comment with:",
                command(pr),
                pr,
            )
        if pr is None:
            pr = detect_pr(gh, repo, head_ref)
            if pr is None:
                return PostResult(
                    False,
                    f"no open pull request found for {head_ref!r}; pass "
                    "--pr N or post the comment with:",
                    command(None),
                    None,
                )
        proc = _gh(gh, repo, "pr", "comment", str(pr), "--body-file", str(body_file))
    except subprocess.TimeoutExpired:
        return PostResult(
            False, "gh timed out; post the comment with:", command(pr), pr, failed=True
        )
    if proc.returncode != 0:
        detail = short(proc.stderr or proc.stdout or f"exit {proc.returncode}", 300)
        return PostResult(
            False, f"gh pr comment failed: {detail}; retry with:", command(pr), pr, failed=True
        )
    url = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return PostResult(True, f"commented on PR #{pr}" + (f": {url}" if url else ""), command(pr), pr)
