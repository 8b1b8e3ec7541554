"""Estimated model cost: USD per million tokens for a few known model ids.

Prices are list prices at the time of writing and only feed an estimate in reports; a config
can override or extend them. Local and scripted models cost nothing. An unknown model gives no
cost (None) plus a note, rather than a made-up number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from promptloop.agents.llm.types import Usage

FREE_PROVIDERS = ("local", "scripted")
_DATED = re.compile(r"^-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


class ModelPrice(BaseModel):
    """USD per million tokens. Cache prices default to the input price when not given.

    Usage counts cache reads/writes separately from `input_tokens` (both providers report it
    that way), so the four parts add up without double counting.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = (usage.input_tokens * self.input + usage.output_tokens * self.output
                 + usage.cache_read_tokens * read + usage.cache_write_tokens * write)
        return total / 1_000_000


def _anthropic(inp: float, out: float) -> ModelPrice:
    return ModelPrice(input=inp, output=out, cache_read=inp * 0.1, cache_write=inp * 1.25)


def _openai(inp: float, out: float, cached: float) -> ModelPrice:
    return ModelPrice(input=inp, output=out, cache_read=cached)


PRICES: dict[str, dict[str, ModelPrice]] = {
    "anthropic": {
        "claude-opus-4-5": _anthropic(5.0, 25.0),
        "claude-opus-4-1": _anthropic(15.0, 75.0),
        "claude-opus-4": _anthropic(15.0, 75.0),
        "claude-sonnet-4-5": _anthropic(3.0, 15.0),
        "claude-sonnet-4": _anthropic(3.0, 15.0),
        "claude-3-7-sonnet": _anthropic(3.0, 15.0),
        "claude-3-5-sonnet": _anthropic(3.0, 15.0),
        "claude-haiku-4-5": _anthropic(1.0, 5.0),
        "claude-3-5-haiku": _anthropic(0.8, 4.0),
        "claude-3-haiku": _anthropic(0.25, 1.25),
    },
    "openai": {
        "gpt-5": _openai(1.25, 10.0, 0.125),
        "gpt-5-mini": _openai(0.25, 2.0, 0.025),
        "gpt-5-nano": _openai(0.05, 0.4, 0.005),
        "gpt-4.1": _openai(2.0, 8.0, 0.5),
        "gpt-4.1-mini": _openai(0.4, 1.6, 0.1),
        "gpt-4.1-nano": _openai(0.1, 0.4, 0.025),
        "gpt-4o": _openai(2.5, 10.0, 1.25),
        "gpt-4o-mini": _openai(0.15, 0.6, 0.075),
        "o4-mini": _openai(1.1, 4.4, 0.275),
        "o3": _openai(2.0, 8.0, 0.5),
    },
}

BATCH_PRICE_FACTOR = 0.5
"""Batch price / standard price: the Anthropic Message Batches API and the OpenAI Batch API
both bill batched requests at 50% of the list prices above (input, output and cache)."""

PriceOverrides = Mapping[str, ModelPrice | Mapping[str, Any]]


class CostEstimate(BaseModel):
    """Cost of some usage of one model; `usd` is None when the model's price is unknown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    usd: float | None
    note: str | None = None


def _split(model_id: str) -> tuple[str, str]:
    provider, sep, name = model_id.partition(":")
    return (provider.strip().lower(), name.strip()) if sep else ("", model_id.strip())


def _lookup(table: Mapping[str, ModelPrice], name: str) -> ModelPrice | None:
    """Exact name, else the longest known name followed by a date or `-latest` suffix."""
    if name in table:
        return table[name]
    best = ""
    for known in table:
        if name.startswith(known) and _DATED.match(name[len(known):]) and len(known) > len(best):
            best = known
    return table[best] if best else None


def price_for(model_id: str, overrides: PriceOverrides | None = None) -> ModelPrice | None:
    """The price of `model_id` ("provider:name"); overrides match the full id or the bare name."""
    provider, name = _split(model_id)
    if overrides:
        for key in (model_id, name):
            if key in overrides:
                value = overrides[key]
                return value if isinstance(value, ModelPrice) else ModelPrice.model_validate(value)
    if provider in FREE_PROVIDERS:
        return ModelPrice(input=0.0, output=0.0)
    return _lookup(PRICES.get(provider, {}), name)


def estimate_cost(
    model_id: str, usage: Usage, overrides: PriceOverrides | None = None
) -> CostEstimate:
    if not model_id:
        return CostEstimate(model=model_id, usd=None, note="no model id recorded")
    price = price_for(model_id, overrides)
    if price is None:
        return CostEstimate(
            model=model_id,
            usd=None,
            note=(f"no price known for {model_id}; give it in promptloop.toml's "
                  f"[nightly.prices.\"{model_id}\"] table (docs/nightly.md) for an estimate"),
        )
    return CostEstimate(model=model_id, usd=price.cost(usage))


def batch_saving(
    model_id: str, usage: Usage, overrides: PriceOverrides | None = None
) -> float | None:
    """Dollars saved when `usage` of `model_id` goes through a batch API instead of direct
    calls (None when the price is unknown; 0 for free providers)."""
    cost = estimate_cost(model_id, usage, overrides).usd
    return None if cost is None else cost * (1 - BATCH_PRICE_FACTOR)
