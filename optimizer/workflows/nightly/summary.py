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

from optimizer.core.pricing import ModelPrice, estimate_cost
from optimizer.report.html.kit import esc, page
from optimizer.run.cache import atomic_write_text
from optimizer.run.usage import usage_tokens
from optimizer.workflows.nightly.publish import accepted_steps, manual_commands
from optimizer.workflows.nightly.state import BucketRank, Checkpoint, PublishRecord

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


def _read(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return f"(PR body not found at {path})"


def build_summary(
    cp: Checkpoint, repo: Path, models: Mapping[str, str], prices: Mapping[str, ModelPrice]
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
    for role, u in sorted(cp.spend.usage.items()):
        model = models.get(role, "")
        roles.append(RoleSpend(role=role, model=model, tokens=usage_tokens(u),
                               usd=estimate_cost(model, u, prices).usd))
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
        rejected=rejected, budget=budget, infra_errors=cp.infra_errors, notes=cp.notes,
        steps=steps)


def _usd(v: float | None) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def _limit(v: Any, unit: str = "") -> str:
    return "none" if v is None else f"{v}{unit}"


def _budget_rows(b: BudgetReport) -> list[list[str]]:
    return [
        ["dollars (estimated)", _usd(b.used_usd), _limit(b.max_usd)],
        ["tokens", str(b.used_tokens), _limit(b.max_tokens)],
        ["wall time (min)", f"{b.used_wall_minutes:.1f}", _limit(b.max_wall_minutes)],
    ]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def cell(v: str) -> str:
        return v.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]


def _rank_rows(s: NightSummary) -> list[list[str]]:
    return [[str(i), r.suite, r.bucket, str(r.failing), str(r.trials),
             "-" if r.mean_score is None else f"{r.mean_score:.2f}"]
            for i, r in enumerate(s.ranking, 1)]


def _step_rows(s: NightSummary) -> list[list[str]]:
    return [[x.id, x.outcome, str(x.tokens), str(x.estimate_tokens), _usd(x.usd),
             f"{x.seconds:.1f}", x.note or x.estimate_basis] for x in s.steps]


RANK_HEAD = ["#", "suite", "bucket", "failing trials", "trials", "mean score"]
STEP_HEAD = ["step", "outcome", "tokens", "estimated before", "cost", "seconds", "basis / note"]


def render_markdown(s: NightSummary) -> str:
    lines = [f"# promptloop nightly {s.night_id}", "",
             f"**Status: {s.status}**" + (f" — {s.stop_reason}" if s.stop_reason else ""), "",
             f"Base commit `{s.base_commit[:12]}`; suites {', '.join(s.suites)}; attempts "
             f"{s.attempts}; agent `{s.models.get('agent', '')}`, proposer "
             f"`{s.models.get('proposer', '')}`.", "", "## Budget", ""]
    lines += _md_table(["budget", "used", "limit"], _budget_rows(s.budget))
    lines += ["", *(f"- {r.role} (`{r.model}`): {r.tokens} tokens, {_usd(r.usd)}"
                    for r in s.budget.roles), "", "## Buckets with failing trials", ""]
    lines += _md_table(RANK_HEAD, _rank_rows(s)) if s.ranking else ["None."]
    if s.skipped_buckets:
        lines += ["", "Not optimized (no capability trials to gate on): "
                  + ", ".join(s.skipped_buckets)]
    lines += ["", f"## Accepted branches ({len(s.accepted)})", ""]
    for a in s.accepted:
        lines += [f"### `{a.branch}` ({a.suite} / {a.bucket}, iteration {a.iteration})", "",
                  f"**Hypothesis.** {a.hypothesis}", ""]
        if a.published is not None and a.published.pr_url:
            lines += [f"PR: {a.published.pr_url}", ""]
        lines += ["To publish by hand:", "", "```sh", *a.commands, "```", "",
                  "<details><summary>PR body</summary>", "", a.pr_body.rstrip(), "",
                  "</details>", ""]
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
    lines += ["", "## Steps", "", *_md_table(STEP_HEAD, _step_rows(s))]
    if s.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in s.notes)]
    return "\n".join(lines) + "\n"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(s: NightSummary) -> str:
    status = esc(s.status) + (f" — {esc(s.stop_reason)}" if s.stop_reason else "")
    parts = [f"<h1>promptloop nightly {esc(s.night_id)}</h1>",
             f"<p><b>Status: {status}</b></p>",
             f"<p class=\"muted\">base commit <code>{esc(s.base_commit[:12])}</code>; suites "
             f"{esc(', '.join(s.suites))}; attempts {s.attempts}</p>"]
    if s.infra_errors:
        items = "".join(f"<li>{esc(e)}</li>" for e in s.infra_errors)
        parts.append(f"<div class=\"banner\">Infrastructure errors<ul>{items}</ul></div>")
    parts += ["<h2>Budget</h2>",
              _html_table(["budget", "used", "limit"], _budget_rows(s.budget)),
              _html_table(["role", "model", "tokens", "cost"],
                          [[r.role, r.model, str(r.tokens), _usd(r.usd)] for r in s.budget.roles]),
              "<h2>Buckets with failing trials</h2>",
              _html_table(RANK_HEAD, _rank_rows(s)) if s.ranking else "<p>None.</p>",
              f"<h2>Accepted branches ({len(s.accepted)})</h2>"]
    for a in s.accepted:
        url = a.published.pr_url if a.published else None
        parts += [f"<div class=\"card\"><h3><code>{esc(a.branch)}</code> ({esc(a.suite)} / "
                  f"{esc(a.bucket)}, iteration {a.iteration})</h3>",
                  f"<p><b>Hypothesis.</b> {esc(a.hypothesis)}</p>",
                  f"<p>PR: {esc(url)}</p>" if url else "",
                  f"<pre>{esc(chr(10).join(a.commands))}</pre>",
                  f"<details><summary>PR body</summary><pre>{esc(a.pr_body)}</pre></details>"
                  "</div>"]
    if not s.accepted:
        parts.append("<p>None tonight; the base prompts stay.</p>")
    parts.append(f"<h2>Rejected proposals ({len(s.rejected)})</h2>")
    parts.append(_html_table(
        ["suite", "bucket", "#", "outcome", "hypothesis", "reasons"],
        [[r.suite, r.bucket, str(r.iteration), r.outcome, r.hypothesis, "; ".join(r.reasons)]
         for r in s.rejected]) if s.rejected else "<p>None.</p>")
    parts += ["<h2>Steps</h2>", _html_table(STEP_HEAD, _step_rows(s))]
    if s.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in s.notes)
                     + "</ul>")
    return page(f"promptloop nightly {s.night_id}", "\n".join(parts))


def write_summary(
    cp: Checkpoint,
    folder: Path,
    repo: Path,
    models: Mapping[str, str],
    prices: Mapping[str, ModelPrice],
) -> tuple[NightSummary, dict[str, Path]]:
    """Write summary.json, summary.md and summary.html into the night's folder."""
    summary = build_summary(cp, repo, models, prices)
    paths = {ext: folder / f"summary.{ext}" for ext in ("json", "md", "html")}
    atomic_write_text(paths["json"], json.dumps(summary.model_dump(mode="json"), indent=2,
                                                 ensure_ascii=False) + "\n")
    atomic_write_text(paths["md"], render_markdown(summary))
    atomic_write_text(paths["html"], render_html(summary))
    return summary, paths
