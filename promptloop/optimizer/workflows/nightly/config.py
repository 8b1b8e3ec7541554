"""Settings of `promptloop nightly` and the planning helpers that need no engine state.

`NightlyConfig` is the `[nightly]` table of promptloop.toml; `rank_buckets` orders the buckets
a night works on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.buckets import qualified
from promptloop.optimizer.core.config import STATE_FOLDER, ConfigError
from promptloop.optimizer.core.names import AgentName, agent_names
from promptloop.optimizer.core.pricing import ModelPrice, price_for
from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.run.models import CommandModels
from promptloop.optimizer.workflows.nightly.budget import Budget
from promptloop.optimizer.workflows.nightly.state import BucketRank
from promptloop.optimizer.workflows.optimize import Baseline, OptimizeConfig

_SHARED_WITH_OPTIMIZE = {
    "trials", "agent_model", "judge_model", "proposer_model", "base_url", "max_changed_lines",
    "proposer_format", "confirm_trials", "concurrency", "batch", "kinds", "policy", "repo",
    "state_dir", "candidates",
}


class NightlyConfig(CommandModels):
    """The `[nightly]` table of promptloop.toml (flags and PROMPTLOOP_* env vars override it)."""

    model_config = ConfigDict(extra="forbid")

    suites: list[AgentName] = Field(default_factory=lambda: list(agent_names()), min_length=1)
    """The agents whose suites the night runs (default: every registered agent)."""
    base: str = "HEAD"
    iterations_per_bucket: int = Field(2, ge=1)
    candidates: int = Field(1, ge=1, le=16)
    """Patches asked per iteration (`optimize --candidates`): screened, the winner gated."""
    max_buckets: int = Field(3, ge=1)
    profile_share: float = Field(0.1, ge=0.0, le=0.5)
    """Share of the night's planned trials spent on `promptloop profile` after the baselines
    and before the first iteration: per suite, this share of (max_buckets x
    iterations_per_bucket x the baseline's trials), on the tasks whose records are least
    decided (short records first). The runs it saves are lineage history to the iterations
    that follow. 0 turns it off."""
    trials: int | None = Field(None, ge=1)
    concurrency: int | None = Field(None, ge=1)
    batch: bool = False
    """Judge calls of every run as one provider batch at the batch price (docs/batch.md)."""
    confirm_trials: int = Field(2, ge=0)
    max_changed_lines: int = Field(40, ge=1)
    proposer_format: Literal["auto", "diff", "edits"] = "auto"
    max_usd: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_wall_minutes: float | None = Field(480, gt=0)
    """Default 8 hours: an unattended night ends by morning unless the config says otherwise."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """USD per million tokens by model id, overriding/extending the built-in table."""
    assumed_tokens_per_trial: int = Field(20_000, ge=1)
    """Tokens of one trial until the night has seen real ones (cached trials count)."""
    estimate_margin: float = Field(1.25, ge=1.0)
    """Safety factor on every estimate derived from earlier steps."""
    kinds: tuple[str, ...] = ("capability", "regression")
    policy: GatePolicy = Field(default_factory=GatePolicy)
    repo: Path | None = None
    state_dir: Path = Path(STATE_FOLDER)

    @property
    def budget(self) -> Budget:
        return Budget(max_usd=self.max_usd, max_tokens=self.max_tokens,
                      max_wall_minutes=self.max_wall_minutes)

    @property
    def models(self) -> dict[str, str]:
        return {"agent": self.agent_model, "judge": self.judge_id, "proposer": self.proposer_id}

    def check_prices(self) -> None:
        """With a dollar budget every model of the night needs a known price."""
        if self.max_usd is None:
            return
        for model in dict.fromkeys(self.models.values()):
            if price_for(model, self.prices) is None:
                raise ConfigError(
                    f"max_usd is set but no price is known for {model}; add "
                    f'[nightly.prices."{model}"] with input = and output = (USD per million '
                    "tokens) to promptloop.toml"
                )

    def optimize_config(self, suite: str, bucket: str, base: str, first: int = 1,
                        last: int | None = None) -> OptimizeConfig:
        shared = self.model_dump(include=_SHARED_WITH_OPTIMIZE)
        return OptimizeConfig.model_validate(
            shared | {"suite": suite, "bucket": bucket, "base": base, "first_iteration": first,
                      "iterations": self.iterations_per_bucket if last is None else last}
        )


def awaiting_review(c: NightlyConfig, base: str) -> dict[tuple[str, str], str]:
    """(agent, bucket) -> an accepted branch of an earlier session of the night's agents that
    still exists and is not merged into `base`: its patch awaits review (the night leaves the
    bucket out; `nightly --dry-run` lists it). The ledger names them; so does the repository
    itself: a `promptloop/<agent>/<bucket>/<id>` branch whose tip carries an accept verdict
    (a night with a fresh state folder, e.g. a CI cache lost, must not open a second PR)."""
    from promptloop.optimizer.core.ledger import Ledger
    from promptloop.optimizer.git import BRANCH_PREFIX, GitOps
    from promptloop.optimizer.git_sweep import verdict_in

    entries = [e for e in Ledger(c.state_dir / "ledger.jsonl").entries()
               if e.outcome == "accepted" and e.branch and e.agent in c.suites]
    out: dict[tuple[str, str], str] = {}
    if c.repo is None:
        return out
    with GitOps(c.repo) as git:
        for e in entries:
            if e.branch and git.branch_exists(e.branch) and not git.is_ancestor(e.branch, base):
                out[(e.agent, e.bucket)] = e.branch
        for branch in git.list_branches(BRANCH_PREFIX):
            parts = branch.removeprefix(BRANCH_PREFIX).split("/")
            if len(parts) != 3 or parts[0] not in c.suites or tuple(parts[:2]) in out:
                continue
            if (verdict_in(branch, git.message(branch)) == "accept"
                    and not git.is_ancestor(branch, base)):
                out[(parts[0], parts[1])] = branch
    return out


def rank_buckets(
    baselines: Mapping[str, Baseline], limit: int,
    awaiting: Mapping[tuple[str, str], str] | None = None,
) -> tuple[list[BucketRank], list[str]]:
    """Buckets with failing trials: most failing first, then lowest mean score, then name.

    Only buckets of capability suites can be a gate target; failing regression-only buckets
    are returned apart so the summary can name them, as are buckets in `awaiting` ((suite,
    bucket) -> an accepted branch not merged yet: another night's patch awaits review, and a
    second one for the same bucket would be a duplicate PR)."""
    awaiting = awaiting or {}
    ranks, skipped = [], []
    for suite, b in baselines.items():
        # namespaced: a regression bucket `links` is not the capability bucket `links`
        targetable = {t.bucket for s in b.suites if s.config.kind == "capability" for t in s.tasks}
        named = [(qualified(r.suite_kind, t.bucket), t) for r in b.runs for t in r.trials]
        for bucket in sorted({name for name, _ in named}):
            trials = [t for name, t in named if name == bucket and t.counts]
            failing = sum(t.status in ("failed", "timedOut") for t in trials)
            if not failing:
                continue
            if bucket not in targetable:
                skipped.append(f"{suite}/{bucket} (no capability trials to gate on)")
                continue
            if (suite, bucket) in awaiting:
                skipped.append(f"{suite}/{bucket} (accepted branch {awaiting[(suite, bucket)]} "
                               "awaits review: merge or delete it to optimize the bucket again)")
                continue
            mean = sum(t.score for t in trials) / len(trials)
            ranks.append(BucketRank(suite=suite, bucket=bucket, failing=failing,
                                    trials=len(trials), mean_score=mean))
    ranks.sort(key=lambda r: (-r.failing, r.mean_score or 0.0, f"{r.suite}/{r.bucket}"))
    return ranks[:limit], skipped


def proposer_guess(model: str) -> Usage:
    """Up to three attempts, each re-sending the package (see proposer.ask_model)."""
    package = 2_500 if model.startswith("local:") else 12_000
    return Usage(input_tokens=3 * (package + 2_000), output_tokens=3 * 1_500)
