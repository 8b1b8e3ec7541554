"""`promptloop nightly --dry-run`: what a night would do and cost, worked out without calling a
model, taking the lock, writing a checkpoint or creating a branch (the base commit's suites
are read through the state folder's source cache, as every command reads a commit).

Per agent, its baseline's trials and how many the trial cache cannot serve (what the night
pays for, keyed as the runner keys them), estimated as the night estimates a step before any
trial was seen (`assumed_tokens_per_trial`, `estimate_margin`); the iterations it may run
(`max_buckets` x `iterations_per_bucket` per agent) and the buckets it would leave out because
an accepted branch of an earlier night awaits review; the budgets, and whether the baselines
fit in them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from promptloop.optimizer.git import GitOps
from promptloop.optimizer.workflows.nightly.config import NightlyConfig, awaiting_review
from promptloop.optimizer.workflows.nightly.estimates import estimate_baseline
from promptloop.optimizer.workflows.nightly.state import Checkpoint


class PlannedBaseline(BaseModel):
    agent: str
    tokens: int
    """Estimated tokens of the trials the cache cannot serve (0 when it holds them all)."""
    basis: str


class NightPlan(BaseModel):
    base_commit: str
    agents: list[str]
    models: dict[str, str]
    proposer_format: str = "auto"
    """How the proposer replies: a unified diff, JSON edits, or auto (edits for the embedded
    model)."""
    baselines: list[PlannedBaseline]
    iterations_at_most: int
    awaiting_review: list[str]
    """`agent/bucket (branch)` left out tonight: an accepted branch not merged yet."""
    budgets: dict[str, Any]
    baselines_fit: bool
    """The baselines' estimate fits in the token budget (always, without one)."""


def plan_night(c: NightlyConfig) -> NightPlan:
    assert c.repo is not None
    with GitOps(c.repo) as git:
        base = git.resolve(c.base)
    awaiting = [f"{agent}/{bucket} ({branch})"
                for (agent, bucket), branch in awaiting_review(c, base).items()]
    now = datetime.now(UTC)
    cp = Checkpoint(night_id="dry-run", started_at=now, updated_at=now,
                    config=c.model_dump(mode="json", exclude={"repo", "state_dir"}),
                    base_commit=base)
    baselines = []
    for agent in c.suites:
        est = estimate_baseline(cp, c, c.repo, agent, c.model_ids)
        baselines.append(PlannedBaseline(agent=agent, tokens=est.spend.tokens, basis=est.basis))
    need = sum(b.tokens for b in baselines)
    return NightPlan(
        base_commit=base, agents=list(c.suites), models=c.models,
        proposer_format=c.proposer_format, baselines=baselines,
        iterations_at_most=c.max_buckets * c.iterations_per_bucket * len(c.suites),
        awaiting_review=sorted(set(awaiting)),
        budgets={"max_usd": c.max_usd, "max_tokens": c.max_tokens,
                 "max_wall_minutes": c.max_wall_minutes},
        baselines_fit=c.max_tokens is None or need <= c.max_tokens)


__all__ = ["NightPlan", "PlannedBaseline", "plan_night"]
