"""Budgets of a nightly run: limits, trial rates, and the estimate made before each step.

Spend comes from the night's `ModelSet` meter (run/usage.py): what the providers reported, per
role (cached trials call no model and cost nothing). Before each step the engine estimates the
step's spend and duration and stops when the estimate would not fit in what is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.pricing import ModelPrice
from promptloop.optimizer.run.usage import Spend

BudgetName = Literal["usd", "tokens", "wall"]


class Budget(BaseModel):
    """Limits of one night; None means unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_usd: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_wall_minutes: float | None = Field(None, gt=0)


class TrialRate(BaseModel):
    """Token use and duration of trials seen so far, to extrapolate the next step.

    Token use counts every observed trial (a cached trial's transcript still holds what it
    cost when it ran); duration counts only trials run now, as wall time at this concurrency.
    """

    model_config = ConfigDict(extra="forbid")

    trials: int = 0
    spend: Spend = Field(default_factory=Spend)
    timed_trials: int = 0
    seconds: float = 0.0

    def __add__(self, other: TrialRate) -> TrialRate:
        return TrialRate(
            trials=self.trials + other.trials,
            spend=self.spend + other.spend,
            timed_trials=self.timed_trials + other.timed_trials,
            seconds=self.seconds + other.seconds,
        )

    def per_trial(self) -> tuple[Spend, float] | None:
        if self.trials <= 0:
            return None
        secs = self.seconds / self.timed_trials if self.timed_trials else 0.0
        return self.spend.scaled(1 / self.trials), secs


@dataclass(frozen=True)
class Estimate:
    """What the next step is expected to cost, and how that was worked out."""

    spend: Spend
    seconds: float
    basis: str


def assumed_trial(tokens: int) -> Spend:
    """A guess for one trial before any was observed: mostly input, as agent transcripts are."""
    return Spend(usage={"agent": Usage(input_tokens=tokens * 85 // 100,
                                       output_tokens=tokens - tokens * 85 // 100)})


def over_budget(
    budget: Budget,
    used: Spend,
    used_seconds: float,
    estimate: Estimate,
    models: Mapping[str, str],
    prices: Mapping[str, ModelPrice],
) -> tuple[BudgetName, str] | None:
    """The first budget the step would exceed and a sentence saying by how much, else None."""
    if budget.max_tokens is not None:
        left = budget.max_tokens - used.tokens
        if estimate.spend.tokens > left:
            return "tokens", (f"needs ~{estimate.spend.tokens} tokens, {max(left, 0)} of "
                              f"{budget.max_tokens} left")
    if budget.max_usd is not None:
        need = estimate.spend.usd(models, prices)
        have = used.usd(models, prices)
        if need is None or have is None:
            return "usd", "a model of this night has no known price"
        left_usd = budget.max_usd - have
        if need > left_usd + 1e-12:
            return "usd", (f"needs ~${need:.4f}, ${max(left_usd, 0.0):.4f} of "
                           f"${budget.max_usd:.2f} left")
    if budget.max_wall_minutes is not None:
        left_s = budget.max_wall_minutes * 60 - used_seconds
        if estimate.seconds > left_s or left_s <= 0:
            return "wall", (f"needs ~{estimate.seconds / 60:.1f} min, "
                            f"{max(left_s, 0.0) / 60:.1f} of {budget.max_wall_minutes:g} min left")
    return None
