"""The summary of one night as JSON, Markdown and self-contained HTML (summary.{json,md,html}).

Lists accepted branches with their PR bodies, rejected proposals with their reasons, the budget
used against its limits, and infrastructure errors. Built from the checkpoint alone, so it can
be rewritten for any night at any time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.pricing import ModelPrice
from promptloop.optimizer.lifecycle.graduation import GraduationProposal
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.html.kit import render
from promptloop.optimizer.report.markdown import table_lines
from promptloop.optimizer.report.table import Cell, Column, Table
from promptloop.optimizer.run.usage import Spend, batch_role_of, usage_tokens
from promptloop.optimizer.workflows.nightly.lifecycle import NightLifecycle
from promptloop.optimizer.workflows.nightly.publish import accepted_steps, manual_commands
from promptloop.optimizer.workflows.nightly.state import BucketRank, Checkpoint, PublishRecord

SUMMARY_VERSION = 1


class AcceptedBranch(BaseModel):
    suite: str
    bucket: str
    iteration: int
    branch: str
    commit: str | None
    hypothesis: str
    reasons: list[str]
    pr_body_path: str | None
    pr_body: str
    commands: list[str] = Field(default_factory=list)
    """How to publish it by hand (push, then `gh pr create`)."""
    published: PublishRecord | None = None


class RejectedProposal(BaseModel):
    suite: str
    bucket: str
    iteration: int
    outcome: str
    hypothesis: str
    reasons: list[str]


class RoleSpend(BaseModel):
    role: str
    model: str
    tokens: int
    usd: float | None


class BudgetReport(BaseModel):
    max_usd: float | None
    max_tokens: int | None
    max_wall_minutes: float | None
    used_usd: float | None
    used_tokens: int
    used_wall_minutes: float
    roles: list[RoleSpend]


class StepLine(BaseModel):
    id: str
    outcome: str
    tokens: int
    usd: float | None
    seconds: float
    estimate_tokens: int
    estimate_usd: float | None
    estimate_basis: str
    note: str = ""


class NightSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = SUMMARY_VERSION
    night_id: str
    status: str
    stop_reason: str | None
    started_at: datetime
    updated_at: datetime
    attempts: int
    base_commit: str
    suites: list[str]
    models: dict[str, str]
    ranking: list[BucketRank]
    skipped_buckets: list[str]
    accepted: list[AcceptedBranch]
    rejected: list[RejectedProposal]
    budget: BudgetReport
    infra_errors: list[str]
    notes: list[str]
    steps: list[StepLine]
    health_markdown: str = ""
    """Suite health sections (optimizer/lifecycle), empty before a suite has a lineage."""
    graduations: list[GraduationProposal] = Field(default_factory=list)
    """Buckets ready to move into the regression suite: proposed, never applied."""


def _read(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return f"(PR body not found at {path})"


def build_summary(
    cp: Checkpoint, repo: Path, models: Mapping[str, str], prices: Mapping[str, ModelPrice],
    life: NightLifecycle | None = None,
) -> NightSummary:
    published = {p.branch: p for p in cp.published}
    accepted = []
    for s in accepted_steps(cp):
        it = s.result
        assert it is not None and it.branch
        accepted.append(AcceptedBranch(
            suite=s.suite, bucket=s.bucket or "", iteration=it.iteration, branch=it.branch,
            commit=it.commit, hypothesis=it.hypothesis, reasons=it.reasons,
            pr_body_path=it.pr_body_path, pr_body=_read(it.pr_body_path),
            commands=manual_commands(repo, s), published=published.get(it.branch)))
    rejected = [
        RejectedProposal(suite=s.suite, bucket=s.bucket or "", iteration=s.result.iteration,
                         outcome=s.outcome, hypothesis=s.result.hypothesis,
                         reasons=s.result.reasons)
        for s in cp.steps
        if s.kind == "iteration" and s.result is not None and s.outcome != "accepted"
    ]
    roles = []
    for key, u in sorted(cp.spend.usage.items()):
        model = models.get(batch_role_of(key)[0], "")
        roles.append(RoleSpend(role=key, model=model, tokens=usage_tokens(u),
                               usd=Spend(usage={key: u}).usd({key.split(":")[0]: model}, prices)))
    cfg = cp.config
    budget = BudgetReport(
        max_usd=cfg.get("max_usd"), max_tokens=cfg.get("max_tokens"),
        max_wall_minutes=cfg.get("max_wall_minutes"), used_usd=cp.spend.usd(models, prices),
        used_tokens=cp.spend.tokens, used_wall_minutes=cp.wall_seconds / 60, roles=roles)
    steps = [StepLine(id=s.id, outcome=s.outcome, tokens=s.spend.tokens, usd=s.usd,
                      seconds=s.seconds, estimate_tokens=s.estimate_tokens,
                      estimate_usd=s.estimate_usd, estimate_basis=s.estimate_basis, note=s.note)
             for s in cp.steps]
    return NightSummary(
        night_id=cp.night_id, status=cp.status, stop_reason=cp.stop_reason,
        started_at=cp.started_at, updated_at=cp.updated_at, attempts=cp.attempts,
        base_commit=cp.base_commit, suites=list(cfg.get("suites", [])), models=dict(models),
        ranking=cp.ranking or [], skipped_buckets=cp.skipped_buckets, accepted=accepted,
        rejected=rejected, budget=budget,
        infra_errors=[*cp.infra_errors, *publish_errors(cp)], notes=cp.notes,
        steps=steps, health_markdown=life.health_markdown if life else "",
        graduations=life.graduations if life else [])


def publish_errors(cp: Checkpoint) -> list[str]:
    """Each push or PR that failed, as an infrastructure error of the night (exit 2)."""
    out = []
    for p in cp.published:
        if p.push_error:
            out.append(f"push of {p.branch} failed: {p.push_error}")
        elif p.pr == "failed":
            out.append(f"opening the PR of {p.branch} failed: "
                       f"{p.pr_error or 'gh pr create failed'}")
    return out


def _limit(v: Any, unit: str = "") -> str:
    return "none" if v is None else f"{v}{unit}"


def budget_table(b: BudgetReport) -> Table:
    return Table.of(["Budget", "Used", "Limit"], [
        ["dollars (estimated)", fmt.usd(b.used_usd), _limit(b.max_usd)],
        ["tokens", str(b.used_tokens), _limit(b.max_tokens)],
        ["wall time (min)", fmt.num(b.used_wall_minutes, 1), _limit(b.max_wall_minutes)],
    ])


def role_table(b: BudgetReport) -> Table:
    return Table.of(["Role", "Model", "Tokens", "Cost"],
                    [[r.role, r.model, str(r.tokens), fmt.usd(r.usd)] for r in b.roles])


def rank_table(s: NightSummary) -> Table:
    """The buckets with failing trials, in the order the night optimizes them."""
    cols = (Column("rank", "#", True), Column("suite", "Suite"), Column("bucket", "Bucket"),
            Column("failing", "Failing trials", True), Column("trials", "Trials", True),
            Column("mean", "Mean score", True))
    rows = tuple(
        (Cell(str(i), i), Cell(r.suite, r.suite), Cell(r.bucket, r.bucket, code=True),
         Cell(str(r.failing), r.failing, tone="alert" if r.failing else ""),
         Cell(str(r.trials), r.trials), Cell(fmt.num(r.mean_score), r.mean_score))
        for i, r in enumerate(s.ranking, 1)
    )
    return Table(cols, rows)


def step_table(s: NightSummary) -> Table:
    return Table.of(
        ["Step", "Outcome", "Tokens", "Estimated before", "Cost", "Seconds", "Basis / note"],
        [[x.id, x.outcome, str(x.tokens), str(x.estimate_tokens), fmt.usd(x.usd),
          fmt.num(x.seconds, 1), x.note or x.estimate_basis] for x in s.steps])


def rejected_table(s: NightSummary) -> Table:
    return Table.of(
        ["Suite", "Bucket", "#", "Outcome", "Hypothesis", "Reasons"],
        [[r.suite, r.bucket, str(r.iteration), r.outcome, r.hypothesis, "; ".join(r.reasons)]
         for r in s.rejected])


def _accepted_markdown(a: AcceptedBranch) -> list[str]:
    lines = [f"### `{a.branch}` ({a.suite} / {a.bucket}, iteration {a.iteration})", "",
             f"**Hypothesis.** {a.hypothesis}", ""]
    p = a.published
    if p is not None and p.pr_url:
        lines += [f"PR: {p.pr_url}", ""]
    if p is not None and p.push_error:
        lines += [f"**Push failed:** {p.push_error}", ""]
    if p is not None and p.pr == "failed":
        lines += [f"**Opening the PR failed:** {p.pr_error or 'gh pr create failed'}", ""]
    # what is left to do by hand: everything when the night did not publish, else only
    # what publishing could not do (never a second `gh pr create` for an opened PR)
    todo = a.commands if p is None else p.commands
    if todo:
        lines += ["To publish by hand:", "", "```sh", *todo, "```", ""]
    return [*lines, "<details><summary>PR body</summary>", "", a.pr_body.rstrip(), "",
            "</details>", ""]


def render_markdown(s: NightSummary) -> str:
    lines = [f"# promptloop nightly {s.night_id}", "",
             f"**Status: {s.status}**" + (f" — {s.stop_reason}" if s.stop_reason else ""), "",
             f"Base commit `{s.base_commit[:12]}`; suites {', '.join(s.suites)}; attempts "
             f"{s.attempts}; agent `{s.models.get('agent', '')}`, proposer "
             f"`{s.models.get('proposer', '')}`.", "", "## Budget", ""]
    lines += table_lines(budget_table(s.budget))
    lines += ["", *(f"- {r.role} (`{r.model}`): {r.tokens} tokens, {fmt.usd(r.usd)}"
                    for r in s.budget.roles), "", "## Buckets with failing trials", ""]
    lines += (table_lines(rank_table(s)) if s.ranking else
              ["None to optimize: every one is left out (below)."] if s.skipped_buckets
              else ["None."])
    if s.skipped_buckets:  # each says why: a regression-only bucket, or a branch in review
        lines += ["", "Not optimized: " + "; ".join(s.skipped_buckets)]
    lines += ["", f"## Accepted branches ({len(s.accepted)})", ""]
    for a in s.accepted:
        lines += _accepted_markdown(a)
    if not s.accepted:
        lines += ["None tonight; the base prompts stay.", ""]
    lines += [f"## Rejected proposals ({len(s.rejected)})", ""]
    for r in s.rejected:
        lines.append(f"- **{r.suite} / {r.bucket} #{r.iteration}** ({r.outcome}): "
                     f"{r.hypothesis or '(no hypothesis)'}")
        lines += [f"  - {why}" for why in r.reasons]
    if not s.rejected:
        lines.append("None.")
    lines += ["", "## Infrastructure errors", ""]
    lines += [f"- {e}" for e in s.infra_errors] or ["None."]
    lines += _lifecycle_markdown(s)
    lines += ["", "## Steps", "", *table_lines(step_table(s))]
    if s.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in s.notes)]
    return "\n".join(lines) + "\n"


def _lifecycle_markdown(s: NightSummary) -> list[str]:
    lines = ["", f"## Graduation proposals ({len(s.graduations)})", ""]
    lines += [f"- **{g.agent_name} / {g.bucket}**: {g.reason} Apply with `{g.command}`."
              for g in s.graduations] or ["None."]
    if s.health_markdown:
        lines += ["", "## Suite health", "", s.health_markdown.rstrip()]
    return lines


def render_html(s: NightSummary) -> str:
    """The night as one self-contained page (templates/nightly.html.j2 of report/html)."""
    return render(
        "nightly.html.j2", title=f"promptloop nightly {s.night_id}", s=s,
        budget=budget_table(s.budget), roles=role_table(s.budget), ranking=rank_table(s),
        rejected=rejected_table(s), steps=step_table(s),
    )


def write_summary(
    cp: Checkpoint,
    folder: Path,
    repo: Path,
    models: Mapping[str, str],
    prices: Mapping[str, ModelPrice],
    life: NightLifecycle | None = None,
) -> tuple[NightSummary, dict[str, Path]]:
    """Write summary.json, summary.md and summary.html into the night's folder."""
    summary = build_summary(cp, repo, models, prices, life)
    paths = {ext: folder / f"summary.{ext}" for ext in ("json", "md", "html")}
    atomic_write_text(paths["json"], json.dumps(summary.model_dump(mode="json"), indent=2,
                                                 ensure_ascii=False) + "\n")
    atomic_write_text(paths["md"], render_markdown(summary))
    atomic_write_text(paths["html"], render_html(summary))
    return summary, paths
