"""Bookkeeping of the step in progress: when it began, what it was estimated to cost, and what
it spent by the time it ended (from the night's meter), appended to the checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from promptloop.optimizer.run.models import ModelSet
from promptloop.optimizer.run.usage import TRIAL_ROLES, Spend
from promptloop.optimizer.workflows.nightly.budget import Estimate, TrialRate
from promptloop.optimizer.workflows.nightly.config import NightlyConfig
from promptloop.optimizer.workflows.nightly.state import Checkpoint, StepRecord


class StepBook:
    """`begin(estimate)` before a step, `record(...)` when it ended. `fresh()` counts the trials
    run (not served from the cache) so far in the night."""

    def __init__(self, config: NightlyConfig, models: ModelSet, fresh: Callable[[], int]) -> None:
        self.c, self.models, self._fresh = config, models, fresh
        self._est = Estimate(Spend(), 0.0, "")
        self._t0, self._started = time.monotonic(), datetime.now(UTC)
        self._spend0, self._fresh0 = models.spend, fresh()

    def begin(self, estimate: Estimate) -> None:
        self._est = estimate
        self._t0, self._started = time.monotonic(), datetime.now(UTC)
        self._spend0, self._fresh0 = self.models.spend, self._fresh()

    @property
    def seconds(self) -> float:
        """Wall time of the step so far."""
        return time.monotonic() - self._t0

    @property
    def spent(self) -> Spend:
        """What the meter counted since the step began."""
        return self.models.spend - self._spend0

    @property
    def fresh(self) -> int:
        """Trials the step ran so far (cached ones excluded)."""
        return self._fresh() - self._fresh0

    def record(
        self,
        cp: Checkpoint,
        step_id: str,
        kind: Literal["baseline", "profile", "iteration"],
        suite: str,
        observed: TrialRate | None = None,
        **fields: Any,
    ) -> StepRecord:
        """Append the step that just ended, with its metered spend; `observed` overrides the
        trial rate learnt from it (default: the trials it ran and their metered spend)."""
        est, seconds, fresh = self._est, self.seconds, self.fresh
        spend = self.spent
        models, prices = self.c.models, self.c.prices
        rec = StepRecord(
            id=step_id,
            kind=kind,
            suite=suite,
            started_at=self._started,
            ended_at=datetime.now(UTC),
            seconds=seconds,
            fresh_trials=fresh,
            spend=spend,
            usd=spend.usd(models, prices),
            estimate_tokens=est.spend.tokens,
            estimate_usd=est.spend.usd(models, prices),
            estimate_basis=est.basis,
            **fields,
        )
        cp.steps.append(rec)
        cp.spend = cp.spend + spend
        if observed is None:
            observed = TrialRate(
                trials=fresh, spend=spend.only(TRIAL_ROLES), timed_trials=fresh, seconds=seconds
            )
        if observed.trials:
            cp.rates[suite] = cp.rates.get(suite, TrialRate()) + observed
        return rec


__all__ = ["StepBook"]
