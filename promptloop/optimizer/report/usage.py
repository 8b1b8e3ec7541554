"""Token usage and cost of a run: agent and judge tokens, and their price.

Split from summary.py (which re-exports these names). Judge tokens come from
`Score.metadata["usage"]` when a grader records them; cached trials cost nothing now.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.pricing import (
    BATCH_PRICE_FACTOR,
    CostEstimate,
    PriceOverrides,
    estimate_cost,
)
from promptloop.optimizer.core.results import RunResult, TrialResult


class CamelModel(BaseModel):
    """Snake-case in Python, camelCase on disk (the SPEC report shape)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class UsageSummary(CamelModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    retries: int = 0
    tool_calls: int = 0
    turns: int = 0


class CostSummary(CamelModel):
    agent: CostEstimate
    judge: CostEstimate | None = None
    total_usd: float | None
    """All trials, including ones served from the cache (None if a price is unknown)."""
    spent_usd: float | None
    """Only trials actually run now (cached trials were paid for by an earlier run)."""
    notes: list[str] = Field(default_factory=list)



def _usage_summary(total: Usage, **counts: int) -> UsageSummary:
    return UsageSummary(
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        cache_read_tokens=total.cache_read_tokens,
        cache_write_tokens=total.cache_write_tokens,
        total_tokens=total.total_tokens,
        **counts,
    )


def usage_of(trials: Sequence[TrialResult]) -> tuple[UsageSummary, Usage]:
    total = Usage()
    calls = retries = tools = turns = 0
    for t in trials:
        m = t.transcript.metrics
        total = total + m.usage
        calls += m.n_model_calls
        retries += m.n_retries
        tools += m.n_tool_calls
        turns += m.n_turns
    return _usage_summary(
        total, model_calls=calls, retries=retries, tool_calls=tools, turns=turns
    ), total


def judge_usage_of(trials: Sequence[TrialResult]) -> tuple[UsageSummary, Usage]:
    """Judge tokens, from `Score.metadata["usage"]` (a Usage-shaped dict) when graders set it."""
    total = Usage()
    calls = 0
    for t in trials:
        for s in t.scores:
            raw = s.metadata.get("usage")
            if isinstance(raw, dict):
                known = {k: int(v) for k, v in raw.items() if k in Usage.model_fields}
                total = total + Usage(**known)
                calls += 1
    return _usage_summary(total, model_calls=calls), total


def spent_usage(trials: Sequence[TrialResult]) -> Usage:
    """Agent plus judge tokens of the trials actually run now (cached ones cost nothing)."""
    fresh = [t for t in trials if not t.cached]
    return usage_of(fresh)[1] + judge_usage_of(fresh)[1]


def _sum_usd(parts: Sequence[float | None]) -> float | None:
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _batched(cost: CostEstimate) -> CostEstimate:
    return cost.model_copy(
        update={"usd": None if cost.usd is None else cost.usd * BATCH_PRICE_FACTOR})


def run_cost(run: RunResult, prices: PriceOverrides | None) -> CostSummary:
    prov = run.provenance
    fresh = [t for t in run.trials if not t.cached]
    agent_all = estimate_cost(prov.agent_model, usage_of(run.trials)[1], prices)
    agent_new = estimate_cost(prov.agent_model, usage_of(fresh)[1], prices)
    notes = [agent_all.note] if agent_all.note else []
    if prov.agent_batched:  # a provider batch bills at a fraction of the list price
        agent_all, agent_new = _batched(agent_all), _batched(agent_new)
        notes.append(f"agent turns went through provider batches: priced at "
                     f"{BATCH_PRICE_FACTOR:.0%} of the list price")
    totals, spent = [agent_all.usd], [agent_new.usd]
    judge: CostEstimate | None = None
    judge_tokens = judge_usage_of(run.trials)[1]
    if judge_tokens.total_tokens or judge_tokens.cache_read_tokens:
        judge = estimate_cost(prov.judge_model or "", judge_tokens, prices)
        fresh_judge = estimate_cost(prov.judge_model or "", judge_usage_of(fresh)[1], prices).usd
        if prov.judge_batched:  # a provider batch bills at a fraction of the list price
            judge = _batched(judge)
            fresh_judge = None if fresh_judge is None else fresh_judge * BATCH_PRICE_FACTOR
            notes.append(f"judge calls went through a provider batch: priced at "
                         f"{BATCH_PRICE_FACTOR:.0%} of the list price")
        totals.append(judge.usd)
        spent.append(fresh_judge)
        if judge.note:
            notes.append(judge.note)
    elif prov.judge_model:
        notes.append("judge tokens were not recorded by the graders; judge cost not included")
    return CostSummary(
        agent=agent_all,
        judge=judge,
        total_usd=_sum_usd(totals),
        spent_usd=_sum_usd(spent),
        notes=notes,
    )


