"""Per-bucket comparison of paired trials: effect, interval, exact p-values. Pure, no I/O.

Each bucket gets the mean paired score difference (candidate - baseline), pass rates, the
fail->pass (`fixed`) and pass->fail (`broken`) counts, one-sided sign-flip p-values for
improvement and for regression, the two-sided exact McNemar p-value on the pass flips, and a
paired-bootstrap interval that is shown to readers but never decides anything: the
decisions of `optimizer.gate.verdict` and `optimizer.gate.sequential` use the exact p-values.
`GatePolicy` lives in `promptloop.optimizer.gate.policy` (imported here too, for older imports).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.gate.exact import mcnemar_pvalue, sign_flip_pvalue
from promptloop.optimizer.gate.pairing import Pair, pair_runs
from promptloop.optimizer.gate.policy import GatePolicy  # re-exported: its home was this module

BucketStatus = Literal["improved", "regressed", "unchanged", "inconclusive"]


class BucketComparison(BaseModel):
    """Base vs candidate on one bucket. Mean/CI/rate fields are None when no pair survived."""

    model_config = ConfigDict(extra="forbid")

    bucket: str
    n_pairs: int
    n_dropped: int = 0
    confidence: float = 0.95
    base_mean: float | None = None
    cand_mean: float | None = None
    delta: float | None = None
    """Mean of the paired differences cand - base."""
    ci_low: float | None = None
    ci_high: float | None = None
    """Paired-bootstrap interval of `delta` (display only; None when all differences are equal,
    where resampling says nothing about the spread)."""
    base_pass_rate: float | None = None
    cand_pass_rate: float | None = None
    pass_delta: float | None = None
    fixed: int = 0
    """Discordant pairs that went fail -> pass."""
    broken: int = 0
    """Discordant pairs that went pass -> fail."""
    p_value: float = 1.0
    """Exact two-sided McNemar (binomial) test on the discordant pairs."""
    p_improve: float = 1.0
    """One-sided sign-flip permutation test: the candidate scores higher."""
    p_regress: float = 1.0
    """One-sided sign-flip permutation test: the candidate scores lower."""
    tasks: int = 0
    status: BucketStatus = "inconclusive"


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals)


def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


_GRID = 10**6
_EXACT_LIMIT = 20_000


def _exact_bootstrap(diffs: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """Percentile interval from the exact bootstrap distribution of the mean, when the
    differences take so few values that every resample composition can be listed (pass/fail
    scores: three values); None when there would be more than _EXACT_LIMIT compositions."""
    counts = Counter(round(d * _GRID) for d in diffs)
    values = sorted(counts)
    n, k = len(diffs), len(values)
    if math.comb(n + k - 1, k - 1) > _EXACT_LIMIT:
        return None
    logs = [math.log(counts[v] / n) for v in values]
    mass: dict[int, float] = {}

    def spread(j: int, left: int, total: int, logw: float) -> None:
        if j == k - 1:
            w = logw - math.lgamma(left + 1) + left * logs[j]
            key = total + left * values[j]
            mass[key] = mass.get(key, 0.0) + math.exp(w)
            return
        for c in range(left + 1):
            spread(j + 1, left - c, total + c * values[j],
                   logw - math.lgamma(c + 1) + c * logs[j])

    spread(0, n, 0, math.lgamma(n + 1))
    a = 1.0 - confidence
    ends: list[float] = []
    for q in (a / 2, 1.0 - a / 2):
        acc = 0.0
        for key in sorted(mass):
            acc += mass[key]
            if acc >= q - 1e-12:
                ends.append(key / _GRID / n)
                break
    return ends[0], ends[1]


def paired_bootstrap_ci(
    diffs: Sequence[float], *, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile interval of the mean paired difference; None for equal differences.

    Exact (the whole bootstrap distribution) for differences with few distinct values, else
    `n_boot` seeded resamples."""
    if not diffs:
        raise ValueError("bootstrap needs at least one pair")
    if all(d == diffs[0] for d in diffs):
        return None
    exact = _exact_bootstrap(diffs, confidence)
    if exact is not None:
        return exact
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(math.fsum(rng.choices(diffs, k=n)) / n for _ in range(n_boot))
    a = 1.0 - confidence
    return _quantile(means, a / 2), _quantile(means, 1.0 - a / 2)


def bucket_status(c: BucketComparison, policy: GatePolicy) -> BucketStatus:
    """Descriptive status of one bucket tested on its own (uncorrected, one look).

    Verdicts do not use this label alone: they apply the multiplicity correction and the
    sequential stopping rule. Regression is checked first: on conflict, caution wins."""
    if c.n_pairs == 0 or c.delta is None:
        return "inconclusive"
    if c.p_regress <= policy.regression_alpha and c.delta < 0:
        return "regressed"
    if c.delta <= -policy.regression_tolerance:
        return "regressed"
    significant = c.p_improve <= policy.alpha or not policy.require_significant_improvement
    if c.delta >= policy.min_improvement and significant:
        return "improved"
    if c.fixed == 0 and c.broken == 0 and abs(c.delta) < policy.min_improvement:
        return "unchanged"
    return "inconclusive"


def compare_bucket(
    bucket: str,
    pairs: Sequence[Pair],
    policy: GatePolicy | None = None,
    *,
    n_dropped: int = 0,
    interval: bool = True,
) -> BucketComparison:
    """Compare one bucket's pairs (`interval=False` skips the display-only bootstrap)."""
    pol = policy or GatePolicy()
    if not pairs:
        return BucketComparison(bucket=bucket, n_pairs=0, n_dropped=n_dropped,
                                confidence=pol.confidence)
    diffs = [p.diff for p in pairs]
    ci = (paired_bootstrap_ci(diffs, confidence=pol.confidence, n_boot=pol.n_boot, seed=pol.seed)
          if interval else None)
    fixed = sum(1 for p in pairs if p.cand_passed and not p.base_passed)
    broken = sum(1 for p in pairs if p.base_passed and not p.cand_passed)
    base_rate = _mean(float(p.base_passed) for p in pairs)
    cand_rate = _mean(float(p.cand_passed) for p in pairs)
    comparison = BucketComparison(
        bucket=bucket,
        n_pairs=len(pairs),
        n_dropped=n_dropped,
        confidence=pol.confidence,
        base_mean=_mean(p.base_score for p in pairs),
        cand_mean=_mean(p.cand_score for p in pairs),
        delta=_mean(diffs),
        ci_low=None if ci is None else ci[0],
        ci_high=None if ci is None else ci[1],
        base_pass_rate=base_rate,
        cand_pass_rate=cand_rate,
        pass_delta=cand_rate - base_rate,
        fixed=fixed,
        broken=broken,
        p_value=mcnemar_pvalue(fixed, broken),
        p_improve=sign_flip_pvalue(diffs, "greater", seed=pol.seed),
        p_regress=sign_flip_pvalue(diffs, "less", seed=pol.seed),
        tasks=len({p.task_id for p in pairs}),
    )
    comparison.status = bucket_status(comparison, pol)
    return comparison


def compare_runs(
    base: RunResult, cand: RunResult, policy: GatePolicy | None = None, *, prefix: str = ""
) -> list[BucketComparison]:
    """Compare every bucket present in both runs, sorted by bucket name (names get `prefix`)."""
    pol = policy or GatePolicy()
    paired = pair_runs(base, cand)
    return [
        compare_bucket(prefix + bucket, paired[bucket], pol,
                       n_dropped=paired.dropped.get(bucket, 0))
        for bucket in sorted(paired)
    ]


def describe(c: BucketComparison) -> str:
    """A one-line summary of a comparison, used in verdict reasons."""
    if c.n_pairs == 0 or c.delta is None:
        return f"no usable pairs ({c.n_dropped} dropped)"
    ci = ("" if c.ci_low is None or c.ci_high is None
          else f" ({round(c.confidence * 100)}% CI [{c.ci_low:+.3f}, {c.ci_high:+.3f}])")
    return (f"delta {c.delta:+.3f}{ci}, pass rate {c.base_pass_rate:.0%} -> "
            f"{c.cand_pass_rate:.0%}, {c.fixed} fixed / {c.broken} broken, sign-flip p "
            f"(improve) {c.p_improve:.3g} / (regress) {c.p_regress:.3g}, McNemar p "
            f"{c.p_value:.3g}, n={c.n_pairs}")
