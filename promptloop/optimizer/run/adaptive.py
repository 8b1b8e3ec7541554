"""Adaptive concurrency (AIMD) for the trials of a run, per provider.

A run starts at its configured concurrency. A trial whose model calls had to be retried (HTTP
429, 529 overloaded, 5xx: the SDKs retry those and report how often) halves the limit, at most
once per "generation" of in-flight trials, so one burst of 429s halves it once, not once per
trial. Each `limit` clean trials in a row add one slot back, up to the configured level:
additive increase, multiplicative decrease. The level reached carries over to the provider's
next run in the same process (an optimize session runs many), and every run records what it
reached (`ConcurrencyStats`) so a report can say why a night took longer than planned.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.registry import parse_model_id
from promptloop.optimizer.core.results import ConcurrencyStats, TrialResult

_LEARNED: dict[str, int] = {}
"""Provider key -> the limit its last run ended at (process-wide, see the module docstring)."""


@dataclass
class Slot:
    """One acquired place; remembers the generation it started in."""

    generation: int


class AdaptiveLimit:
    """An asyncio concurrency limit that halves on overload and grows back one slot at a time."""

    def __init__(self, configured: int, provider: str = "") -> None:
        self.configured = max(1, configured)
        self.provider = provider
        start = min(self.configured, _LEARNED.get(provider, self.configured))
        self.limit = start
        self.in_flight = 0
        self.generation = 0
        self._clean = 0
        self._cond = asyncio.Condition()
        self.stats = ConcurrencyStats(
            configured=self.configured, lowest_limit=start, final_limit=start
        )

    async def acquire(self) -> Slot:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.stats.peak = max(self.stats.peak, self.in_flight)
            return Slot(self.generation)

    async def release(self, slot: Slot, *, overloaded: bool) -> None:
        async with self._cond:
            self.in_flight -= 1
            if overloaded:
                self._decrease(slot)
            else:
                self._increase()
            self.stats.final_limit = self.limit
            _LEARNED[self.provider] = self.limit
            self._cond.notify_all()

    def _decrease(self, slot: Slot) -> None:
        self._clean = 0
        if slot.generation != self.generation or self.limit == 1:
            return  # this burst already halved the limit (or it cannot go lower)
        self.limit = max(1, self.limit // 2)
        self.generation += 1
        self.stats.decreases += 1
        self.stats.lowest_limit = min(self.stats.lowest_limit, self.limit)

    def _increase(self) -> None:
        self._clean += 1
        if self._clean >= self.limit and self.limit < self.configured:
            self.limit += 1
            self._clean = 0
            self.stats.increases += 1


def overloaded(result: TrialResult) -> bool:
    """Whether the provider pushed back during this trial: a retried call, or an infrastructure
    error whose HTTP status was 429 or 5xx (`ProviderError.overloaded`; the error's text is
    not read)."""
    return result.transcript.metrics.n_retries > 0 or result.overloaded


def provider_key(model_id: str) -> str:
    """The provider whose capacity a model id draws on (`anthropic`, `openai`, `local`...)."""
    try:
        return parse_model_id(model_id)[0]
    except ModelConfigError:
        return model_id


def forget_learned() -> None:
    """Start every provider at its configured level again (tests, a new night)."""
    _LEARNED.clear()


__all__ = ["AdaptiveLimit", "Slot", "forget_learned", "overloaded", "provider_key"]
