"""Usage accounting: every model response's tokens, per role, in one meter.

A `MeteredClient` reports the usage of each response to a `Meter` under its role (agent, judge,
proposer), so spend is what the providers reported; cached trials call no model and cost
nothing. `ModelSet` (run/models.py) wraps every client it hands out this way, which makes its
meter the single source of spend for eval, optimize, review and nightly budgets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from promptloop.agents.llm.types import (
    Message,
    ModelClient,
    ModelResponse,
    ModelSettings,
    ToolSpec,
    Usage,
)
from promptloop.agents.llm.wrapper import WrappedClient
from promptloop.optimizer.core.pricing import BATCH_PRICE_FACTOR, ModelPrice, estimate_cost

Role = Literal["agent", "judge", "proposer"]
ROLES: tuple[Role, ...] = ("agent", "judge", "proposer")
TRIAL_ROLES: tuple[Role, ...] = ("agent", "judge")
"""The roles that trials spend on (the proposer is paid per iteration)."""


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
    """Token usage per role (agent, judge, proposer) of one step or of a whole session."""

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
    def total(self) -> Usage:
        """The usage of every role summed."""
        return sum(self.usage.values(), Usage())

    @property
    def tokens(self) -> int:
        return sum(usage_tokens(u) for u in self.usage.values())

    def usd(
        self, models: Mapping[str, str], prices: Mapping[str, ModelPrice] | None = None
    ) -> float | None:
        """Estimated dollars with the model of each role; None if some price is unknown."""
        total = 0.0
        for key, u in self.usage.items():
            if not usage_tokens(u):
                continue
            role, batched = batch_role_of(key)
            cost = estimate_cost(models.get(role, ""), u, prices).usd
            if cost is None:
                return None
            total += cost * (BATCH_PRICE_FACTOR if batched else 1.0)
        return total


BATCHED = ":batch"
"""Suffix of a role's usage key when its requests went through a batch API (billed at
BATCH_PRICE_FACTOR of the list price): `judge:batch`."""


def batch_role_of(key: str) -> tuple[str, bool]:
    """(role, batched) of a usage key: `judge:batch` -> (`judge`, True)."""
    return (key.removesuffix(BATCHED), True) if key.endswith(BATCHED) else (key, False)


class Meter:
    """Sums the usage of every model response per role (batched requests apart)."""

    def __init__(self) -> None:
        self.spend = Spend()

    def add(self, role: Role, usage: Usage, *, batched: bool = False) -> None:
        key = role + BATCHED if batched else role
        self.spend = self.spend + Spend(usage={key: usage})


class MeteredClient(WrappedClient):
    """A ModelClient that reports the usage of each response to a `Meter` under its role."""

    inner: ModelClient

    def __init__(self, inner: ModelClient, meter: Meter, role: Role) -> None:
        super().__init__(inner)
        self.meter, self.role = meter, role

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


__all__ = [
    "ROLES",
    "TRIAL_ROLES",
    "Meter",
    "MeteredClient",
    "Role",
    "Spend",
    "batch_role_of",
    "scale_usage",
    "usage_tokens",
]
