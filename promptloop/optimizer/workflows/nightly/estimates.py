"""What the next step of a night will cost, worked out before it runs.

A baseline costs its uncached trials at the suite's observed rate per trial (else the other
suite's, else an assumed size); an iteration costs what the last evaluated iteration of the
suite cost, else its trials (incl. confirmations) plus a proposal. Every estimate derived from
earlier steps is multiplied by the configured safety margin.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.pricing import batch_saving
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.git import GitOps
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import uncached_trials
from promptloop.optimizer.run.usage import Spend, batch_role_of
from promptloop.optimizer.workflows.nightly.budget import Estimate, TrialRate, assumed_trial
from promptloop.optimizer.workflows.nightly.config import NightlyConfig, proposer_guess
from promptloop.optimizer.workflows.nightly.state import Checkpoint
from promptloop.optimizer.workflows.optimize_models import Baseline
from promptloop.optimizer.workflows.paired import agent_suites
from promptloop.optimizer.workflows.sources import RepoSource


def observed_rate(runs: list[RunResult], fresh: int, seconds: float) -> TrialRate:
    """Token use recorded in every trial of `runs` (cached ones too), timed by the fresh ones."""
    spend, n = Spend(), 0
    for run in runs:
        s = summarize(run)
        n += sum(t.status != "skipped" for t in run.trials)
        for role, u in (("agent", s.usage), ("judge", s.judge_usage)):
            spend = spend + Spend(
                usage={
                    role: Usage(
                        input_tokens=u.input_tokens,
                        output_tokens=u.output_tokens,
                        cache_read_tokens=u.cache_read_tokens,
                        cache_write_tokens=u.cache_write_tokens,
                    )
                }
            )
    return TrialRate(trials=n, spend=spend, timed_trials=fresh, seconds=seconds)


def per_trial(cp: Checkpoint, c: NightlyConfig, suite: str) -> tuple[Spend, float, str]:
    """Spend and seconds of one trial of `suite`, and where that figure comes from."""
    rates = cp.rates
    own = rates[suite].per_trial() if suite in rates else None
    if own is not None:
        return own[0], own[1], f"{suite} average per trial"
    pooled = sum(rates.values(), TrialRate()).per_trial()
    if pooled is not None:
        return pooled[0], pooled[1], "average per trial of the other suite"
    guess = c.assumed_tokens_per_trial
    return assumed_trial(guess), 0.0, f"assumed {guess} tokens per trial"


def estimate_baseline(cp: Checkpoint, c: NightlyConfig, repo: Path, suite: str,
                      ids: ModelIds) -> Estimate:
    """The baseline's cost: only its trials the trial cache cannot serve, keyed as the run
    will key them (`ids`: the models the night runs with)."""
    with GitOps(repo) as git:
        source = RepoSource(repo, cp.base_commit, c.state_dir / "sources", ops=git)
        prompt = source.prompt(suite).text
        suites = agent_suites(suite, c.kinds, source)
    options = replace(c.optimize_config(suite, "*", cp.base_commit).run_options(
        ids.agent, prompt, "baseline"), judge_model=ids.judge_id)
    n = sum(uncached_trials(s, options, prompt) for s in suites)
    per, secs, basis = per_trial(cp, c, suite)
    m = c.estimate_margin
    spend = per.scaled(n * m)
    return Estimate(spend, secs * n * m, f"{n} uncached trial(s) x {basis}" + _saving(c, spend))


def _saving(c: NightlyConfig, spend: Spend) -> str:
    """With `batch`, what sending the judge calls as batches saves (the estimate itself stays
    at the standard price, so the budget check errs on the safe side)."""
    judge = [u for key, u in spend.usage.items() if batch_role_of(key)[0] == "judge"]
    if not c.batch or not judge:
        return ""
    usd = batch_saving(c.judge_id, sum(judge, Usage()), c.prices)
    return "; batch: judge calls at 50% save " + ("an unknown amount (no price)" if usd is None
                                                  else f"~${usd:.4f}")


def estimate_iteration(
    cp: Checkpoint, c: NightlyConfig, suite: str, baseline: Baseline
) -> Estimate:
    m = c.estimate_margin
    last = next((s for s in reversed(cp.steps) if s.evaluated and s.suite == suite), None)
    if last is not None:
        spend = last.spend.scaled(m)
        return Estimate(spend, last.seconds * m,
                        f"last evaluated iteration {last.id} x {m:g}" + _saving(c, spend))
    per, secs, basis = per_trial(cp, c, suite)
    n = sum(len(r.trials) for r in baseline.runs)
    n += 2 * c.confirm_trials * sum(len(s.tasks) for s in baseline.suites)
    seen = next(
        (s.spend.usage["proposer"] for s in reversed(cp.steps) if "proposer" in s.spend.usage),
        None,
    )
    proposer = seen or proposer_guess(c.proposer_id)
    spend = (per.scaled(n) + Spend(usage={"proposer": proposer})).scaled(m)
    return Estimate(
        spend, secs * n * m,
        f"proposal + {n} trial(s) incl. confirmations x {basis} x {m:g}" + _saving(c, spend),
    )


__all__ = ["estimate_baseline", "estimate_iteration", "observed_rate", "per_trial"]
