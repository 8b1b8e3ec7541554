"""Budgets of a nightly run: metered clients, spend per role, and estimates made before a step.

Every model call of the night goes through a `MeteredClient`, so the spend is what the providers
reported (cached trials call no model and cost nothing). Before each step the engine estimates
the step's spend and duration and stops when the estimate would not fit in what is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agents.llm.types import Message, ModelClient, ModelResponse, ModelSettings, ToolSpec, Usage
from optimizer.core.pricing import ModelPrice, estimate_cost

Role = Literal["agent", "judge", "proposer"]
BudgetName = Literal["usd", "tokens", "wall"]
TRIAL_ROLES: tuple[Role, ...] = ("agent", "judge")


def usage_tokens(u: Usage) -> int:
    """Every token a provider processed (cache reads/writes are reported apart from input)."""
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


def scale_usage(u: Usage, factor: float) -> Usage:
    return Usage(
        input_tokens=round(u.input_tokens * factor),
        output_tokens=round(u.output_tokens * factor),
        cache_read_tokens=round(u.cache_read_tokens * factor),
        cache_write_tokens=round(u.cache_write_tokens * factor),
    )


class Spend(BaseModel):
    """Token usage per role (agent, judge, proposer) of one step or of a whole night."""

    model_config = ConfigDict(extra="forbid")

    usage: dict[str, Usage] = Field(default_factory=dict)

    def __add__(self, other: Spend) -> Spend:
        out = dict(self.usage)
        for role, u in other.usage.items():
            out[role] = out.get(role, Usage()) + u
        return Spend(usage=out)

    def __sub__(self, other: Spend) -> Spend:
        out = {}
        for role, u in self.usage.items():
            o = other.usage.get(role, Usage())
            out[role] = Usage(
                input_tokens=u.input_tokens - o.input_tokens,
                output_tokens=u.output_tokens - o.output_tokens,
                cache_read_tokens=u.cache_read_tokens - o.cache_read_tokens,
                cache_write_tokens=u.cache_write_tokens - o.cache_write_tokens,
            )
        return Spend(usage=out)

    def scaled(self, factor: float) -> Spend:
        return Spend(usage={r: scale_usage(u, factor) for r, u in self.usage.items()})

    def only(self, roles: Sequence[str]) -> Spend:
        return Spend(usage={r: u for r, u in self.usage.items() if r in roles})

    @property
    def tokens(self) -> int:
        return sum(usage_tokens(u) for u in self.usage.values())

    def usd(self, models: Mapping[str, str], prices: Mapping[str, ModelPrice]) -> float | None:
        """Estimated dollars with the model of each role; None if some price is unknown."""
        total = 0.0
        for role, u in self.usage.items():
            if not usage_tokens(u):
                continue
            cost = estimate_cost(models.get(role, ""), u, prices).usd
            if cost is None:
                return None
            total += cost
        return total


class Meter:
    """Sums the usage of every model response per role; the night's single source of spend."""

    def __init__(self) -> None:
        self.spend = Spend()

    def add(self, role: Role, usage: Usage) -> None:
        self.spend = self.spend + Spend(usage={role: usage})


class MeteredClient:
    """A ModelClient that reports the usage of each response to a `Meter` under its role."""

    def __init__(self, inner: ModelClient, meter: Meter, role: Role) -> None:
        self.inner, self.meter, self.role = inner, meter, role
        self.model_id = inner.model_id

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        response = await self.inner.complete(messages, tools=list(tools), settings=settings)
        self.meter.add(self.role, response.usage)
        return response

    async def preflight(self) -> None:
        await self.inner.preflight()

    async def aclose(self) -> None:
        await self.inner.aclose()


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
