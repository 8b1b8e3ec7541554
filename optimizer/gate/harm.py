"""Regression evidence of the sequential gate on the buckets other than the target. Pure.

Two kinds of evidence, both computed on every paired difference collected so far:

- the pooled differences of all other buckets: a regression spread thinly over the suite,
  which no single bucket of three tasks can show;
- the differences of each bucket: a regression concentrated in one place.

Both are tested with the anytime-valid sign-flip betting test (`exact.betting_log_wealth`).
The gate looks after every round and picks the next trials from what it saw; the betting test
stays valid under exactly that, so its p-values (1 / the largest wealth seen at any look) can
go into one weighted Holm family at the end, whatever the sampling path was. Wald's SPRT ratio
on the pooled differences decides only when to stop sampling for lack of harm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from optimizer.gate.compare import GatePolicy
from optimizer.gate.exact import anytime_pvalue, betting_log_wealth, holm, sprt_log_ratio
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import POOLED


@dataclass(frozen=True)
class PooledLook:
    """The pooled differences of all other buckets at one look."""

    n: int
    mean: float
    p: float
    """Anytime-valid p-value of the pooled betting test (harm), over every look so far."""
    log_ratio: float
    """Wald's log-likelihood ratio of a drop of `drop` against no drop (negative: no drop)."""
    drop: float

    def describe(self, policy: GatePolicy) -> str:
        return (f"delta {self.mean:+.3f} over {self.n} pairs, "
                f"harm test p={self.p:.3g} (anytime-valid sign-flip betting test), Wald "
                f"log-ratio {_fmt(self.log_ratio)} for a drop of {self.drop:g} against none "
                f"(no-drop bound {math.log(policy.harm_beta):.2f})")


def _fmt(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


@dataclass
class HarmEvidence:
    """The largest betting wealth seen at any look, pooled and per bucket."""

    policy: GatePolicy
    pooled_max: float = 0.0
    bucket_max: dict[str, float] = field(default_factory=dict)

    def look(self, pairs: Mapping[str, Sequence[Pair]]) -> PooledLook:
        """Update the evidence with every pair of the other buckets collected so far."""
        p = self.policy
        pooled = [x.diff for ps in pairs.values() for x in ps]
        self.pooled_max = max(self.pooled_max, betting_log_wealth(pooled, p.harm_bet))
        for bucket, ps in pairs.items():
            wealth = betting_log_wealth([x.diff for x in ps], p.bucket_bet)
            self.bucket_max[bucket] = max(self.bucket_max.get(bucket, 0.0), wealth)
        mean = math.fsum(pooled) / len(pooled) if pooled else 0.0
        return PooledLook(n=len(pooled), mean=mean, p=self.p_pooled(),
                          log_ratio=sprt_log_ratio(pooled, p.harm_drop), drop=p.harm_drop)

    def p_pooled(self) -> float:
        return anytime_pvalue(self.pooled_max)

    def p_bucket(self, bucket: str) -> float:
        return anytime_pvalue(self.bucket_max.get(bucket, 0.0))

    def pooled_harm(self) -> bool:
        """The pooled test alone is below its share of the regression alpha: weighted Holm
        rejects it whatever the buckets' p-values are."""
        p = self.policy
        return self.p_pooled() <= p.regression_alpha * p.pooled_weight + 1e-15

    def family(self, buckets: Sequence[str]) -> list[str]:
        """Weighted Holm at `regression_alpha` over each bucket's and the pooled anytime
        p-values (the pooled test weighted `pooled_weight`): the hypotheses it rejects."""
        p = self.policy
        names = [*buckets, POOLED]
        share = (1.0 - p.pooled_weight) / max(1, len(buckets))
        pvals = [self.p_bucket(b) for b in buckets] + [self.p_pooled()]
        weights = [share] * len(buckets) + [p.pooled_weight]
        rejected = holm(pvals, p.regression_alpha, weights)
        return [n for n, r in zip(names, rejected, strict=True) if r]


def stands(pairs: Sequence[Pair], since: int, margin: float) -> bool:
    """A drop past `margin` survives confirmation: the mean difference of the trials added
    after the bucket became a suspect (trial index >= `since`; all of them when none could
    be added) is still at or below -margin."""
    fresh = [x.diff for x in pairs if x.trial_index >= since] or [x.diff for x in pairs]
    return bool(fresh) and math.fsum(fresh) / len(fresh) <= -margin + 1e-12


def cleared(pairs: Sequence[Pair], since: int) -> bool:
    """A suspect is cleared once its fresh trials, taken together, did not fall."""
    fresh = [x.diff for x in pairs if x.trial_index >= since]
    return bool(fresh) and math.fsum(fresh) >= 0.0
