"""The acceptance gate: paired, per-bucket comparison of a candidate run against the baseline.

Trials are paired by (task id, trial index), so a task that is hard for both prompts cancels
out. Each bucket gets a seeded paired-bootstrap interval on the mean score difference and an
exact McNemar test on the pass/fail flips; `decide` turns those into accept / reject /
inconclusive. Errored or skipped trials are infrastructure, not evidence: their pairs are
dropped and counted. Everything here is pure; tables and text live in optimizer/report.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.core.results import RunResult, TrialResult

BucketStatus = Literal["improved", "regressed", "unchanged", "inconclusive"]
Decision = Literal["accept", "reject", "inconclusive"]


@dataclass(frozen=True)
class Pair:
    """One task trial run under both prompts (same task id, same trial index)."""

    task_id: str
    trial_index: int
    base_score: float
    cand_score: float
    base_passed: bool
    cand_passed: bool

    @property
    def diff(self) -> float:
        return self.cand_score - self.base_score


class PairedBuckets(dict[str, list[Pair]]):
    """Pairs per bucket; `dropped` counts per bucket the pairs lost to errored/skipped trials."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: dict[str, int] = {}


class GatePolicy(BaseModel):
    """Thresholds of the gate; the defaults suit a handful of trials per task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_improvement: float = Field(default=0.05, ge=0.0, le=1.0)
    regression_tolerance: float = Field(default=0.05, ge=0.0, le=1.0)
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    n_boot: int = Field(default=2000, ge=1)
    seed: int = 0
    require_significant_improvement: bool = True


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
    base_pass_rate: float | None = None
    cand_pass_rate: float | None = None
    pass_delta: float | None = None
    fixed: int = 0
    """Discordant pairs that went fail -> pass."""
    broken: int = 0
    """Discordant pairs that went pass -> fail."""
    p_value: float = 1.0
    """Exact two-sided McNemar (binomial) test on the discordant pairs."""
    status: BucketStatus = "inconclusive"


class Verdict(BaseModel):
    """The gate's decision; `reasons` are meant for humans (ledger, PR body)."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    target_bucket: str
    reasons: list[str] = Field(default_factory=list)
    suspected_regressions: list[str] = Field(default_factory=list)
    """Non-target buckets whose status is `regressed` (the loop confirms them with reruns)."""
    target: BucketComparison | None = None


# --- pairing ----------------------------------------------------------------------------


def _bucket_of(run: RunResult, trial: TrialResult) -> str:
    return run.task_buckets.get(trial.task_id, trial.bucket)


def _index(run: RunResult) -> dict[tuple[str, int], TrialResult]:
    out: dict[tuple[str, int], TrialResult] = {}
    for t in run.trials:
        key = (t.task_id, t.trial_index)
        if key in out:
            raise ValueError(f"run {run.run_name} has two trials for task {t.task_id} "
                             f"index {t.trial_index}")
        out[key] = t
    return out


def pair_runs(
    base: RunResult, cand: RunResult, buckets: set[str] | None = None
) -> PairedBuckets:
    """Pair trials present in both runs, grouped by bucket (optionally only `buckets`).

    A bucket appears when at least one of its tasks has trials on both sides, even if every
    pair was then dropped (so the gate can say "no evidence" instead of silently skipping it).
    A task filed under different buckets by the two runs means different suites: ValueError.
    """
    base_ix, cand_ix = _index(base), _index(cand)
    base_tasks = {t.task_id: _bucket_of(base, t) for t in base.trials}
    cand_tasks = {t.task_id: _bucket_of(cand, t) for t in cand.trials}
    base_indices: dict[str, list[int]] = {}
    for tid, index in base_ix:
        base_indices.setdefault(tid, []).append(index)
    out = PairedBuckets()
    for task_id in sorted(base_tasks.keys() & cand_tasks.keys()):
        bucket = base_tasks[task_id]
        if cand_tasks[task_id] != bucket:
            raise ValueError(f"task {task_id} is in bucket {bucket!r} in the base run but "
                             f"{cand_tasks[task_id]!r} in the candidate: not the same suite")
        if buckets is not None and bucket not in buckets:
            continue
        pairs = out.setdefault(bucket, [])
        out.dropped.setdefault(bucket, 0)
        for index in sorted(base_indices[task_id]):
            b, c = base_ix[(task_id, index)], cand_ix.get((task_id, index))
            if c is None:
                continue
            if not (b.counts and c.counts):
                out.dropped[bucket] += 1
                continue
            pairs.append(Pair(task_id, index, b.score, c.score, b.passed, c.passed))
    return out


# --- statistics -------------------------------------------------------------------------


def mcnemar_exact(fixed: int, broken: int) -> float:
    """Exact two-sided binomial test of fixed vs broken under p=0.5; 1.0 with no discordance."""
    n = fixed + broken
    if n == 0:
        return 1.0
    k = min(fixed, broken)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**n)


def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of already-sorted values."""
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def paired_bootstrap_ci(
    diffs: Sequence[float], *, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the mean paired difference, resampling pairs with a seeded RNG."""
    if not diffs:
        raise ValueError("bootstrap needs at least one pair")
    mean = sum(diffs) / len(diffs)
    if all(d == diffs[0] for d in diffs):
        return mean, mean
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(math.fsum(rng.choices(diffs, k=n)) / n for _ in range(n_boot))
    alpha = 1.0 - confidence
    return _quantile(means, alpha / 2), _quantile(means, 1.0 - alpha / 2)


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals)


def bucket_status(c: BucketComparison, policy: GatePolicy) -> BucketStatus:
    """Classify a comparison. Regression is checked first: on conflict, caution wins."""
    if c.n_pairs == 0 or c.delta is None or c.pass_delta is None:
        return "inconclusive"
    tol = policy.regression_tolerance
    pass_drop = c.broken > c.fixed and c.broken >= 1 and c.pass_delta <= -tol
    if c.delta <= -tol or pass_drop:
        return "regressed"
    significant = c.ci_low is not None and c.ci_low > 0
    if c.delta >= policy.min_improvement and (
        significant or not policy.require_significant_improvement
    ):
        return "improved"
    if abs(c.delta) < tol and c.broken == 0:
        return "unchanged"
    return "inconclusive"


def compare_bucket(
    bucket: str,
    pairs: Sequence[Pair],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    n_dropped: int = 0,
    policy: GatePolicy | None = None,
) -> BucketComparison:
    """Compare one bucket's pairs. `policy` supplies the status thresholds (default policy)."""
    thresholds = policy or GatePolicy(confidence=confidence, n_boot=n_boot, seed=seed)
    if not pairs:
        return BucketComparison(bucket=bucket, n_pairs=0, n_dropped=n_dropped,
                                confidence=confidence)
    diffs = [p.diff for p in pairs]
    ci_low, ci_high = paired_bootstrap_ci(diffs, confidence=confidence, n_boot=n_boot, seed=seed)
    fixed = sum(1 for p in pairs if p.cand_passed and not p.base_passed)
    broken = sum(1 for p in pairs if p.base_passed and not p.cand_passed)
    base_rate = _mean(float(p.base_passed) for p in pairs)
    cand_rate = _mean(float(p.cand_passed) for p in pairs)
    comparison = BucketComparison(
        bucket=bucket,
        n_pairs=len(pairs),
        n_dropped=n_dropped,
        confidence=confidence,
        base_mean=_mean(p.base_score for p in pairs),
        cand_mean=_mean(p.cand_score for p in pairs),
        delta=_mean(diffs),
        ci_low=ci_low,
        ci_high=ci_high,
        base_pass_rate=base_rate,
        cand_pass_rate=cand_rate,
        pass_delta=cand_rate - base_rate,
        fixed=fixed,
        broken=broken,
        p_value=mcnemar_exact(fixed, broken),
    )
    comparison.status = bucket_status(comparison, thresholds)
    return comparison


def compare_runs(
    base: RunResult, cand: RunResult, policy: GatePolicy | None = None
) -> list[BucketComparison]:
    """Compare every bucket present in both runs, sorted by bucket name."""
    pol = policy or GatePolicy()
    paired = pair_runs(base, cand)
    return [
        compare_bucket(bucket, paired[bucket], confidence=pol.confidence, n_boot=pol.n_boot,
                       seed=pol.seed, n_dropped=paired.dropped.get(bucket, 0), policy=pol)
        for bucket in sorted(paired)
    ]


# --- decision ---------------------------------------------------------------------------


def describe(c: BucketComparison) -> str:
    """A one-line summary of a comparison, used in verdict reasons."""
    if c.n_pairs == 0 or c.delta is None:
        return f"no usable pairs ({c.n_dropped} dropped)"
    pct = round(c.confidence * 100)
    return (f"delta {c.delta:+.3f} ({pct}% CI [{c.ci_low:+.3f}, {c.ci_high:+.3f}]), pass rate "
            f"{c.base_pass_rate:.0%} -> {c.cand_pass_rate:.0%}, {c.fixed} fixed / "
            f"{c.broken} broken (p={c.p_value:.3g}), n={c.n_pairs}")


def decide(
    comparisons: Sequence[BucketComparison], target_bucket: str, policy: GatePolicy | None = None
) -> Verdict:
    """Turn bucket comparisons into a verdict. Pure: the loop re-decides after confirmations."""
    pol = policy or GatePolicy()
    target = next((c for c in comparisons if c.bucket == target_bucket), None)
    regressed = [c for c in comparisons if c.bucket != target_bucket and c.status == "regressed"]
    suspects = [c.bucket for c in regressed]
    reasons: list[str] = []
    dropped = [c for c in comparisons if c.n_dropped]
    if dropped:
        parts = ", ".join(f"{c.bucket}: {c.n_dropped}" for c in dropped)
        reasons.append(f"pairs dropped as errored/skipped (infrastructure, not evidence): {parts}")

    def verdict(decision: Decision, *why: str) -> Verdict:
        return Verdict(decision=decision, target_bucket=target_bucket,
                       reasons=[*why, *reasons], suspected_regressions=suspects, target=target)

    if target is None:
        return verdict("inconclusive",
                       f"target bucket {target_bucket!r} has no trials on both sides")
    if target.n_pairs == 0:
        return verdict("inconclusive", f"target bucket {target_bucket!r}: {describe(target)}")
    if regressed:
        return verdict("reject", *(f"bucket {c.bucket!r} regressed: {describe(c)}"
                                   for c in regressed))
    if target.status == "regressed":
        return verdict("reject", f"target bucket {target_bucket!r} regressed: {describe(target)}")
    if target.status == "improved":
        return verdict("accept", f"target bucket {target_bucket!r} improved: {describe(target)}")
    assert target.delta is not None
    if target.status == "unchanged" or target.delta < pol.min_improvement:
        return verdict("reject", f"target bucket did not improve ({target_bucket!r}: "
                                 f"{describe(target)}; needs delta >= {pol.min_improvement:+.3f})")
    return verdict("inconclusive", f"target bucket {target_bucket!r} improved by the point "
                                   f"estimate but not significantly: {describe(target)}")


ReviewDecision = Literal["regresses", "improves", "neutral"]


class ReviewVerdict(BaseModel):
    """The gate's verdict on a change with no target bucket (a prompt PR under review)."""

    model_config = ConfigDict(extra="forbid")

    decision: ReviewDecision
    reasons: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    improved: list[str] = Field(default_factory=list)


def decide_review(comparisons: Sequence[BucketComparison]) -> ReviewVerdict:
    """`regresses` if any bucket regressed, `improves` if some improved and none regressed,
    else `neutral`. The bucket statuses already carry the policy's thresholds."""
    regressed = [c for c in comparisons if c.status == "regressed"]
    improved = [c for c in comparisons if c.status == "improved"]
    reasons = [f"bucket {c.bucket!r} regressed: {describe(c)}" for c in regressed]
    reasons += [f"bucket {c.bucket!r} improved: {describe(c)}" for c in improved]
    if not regressed and not improved:
        usable = [c for c in comparisons if c.n_pairs]
        reasons.append(f"no bucket changed beyond the thresholds ({len(usable)} bucket(s) "
                       "with paired trials)" if usable else "no bucket has paired trials")
    dropped = [c for c in comparisons if c.n_dropped]
    if dropped:
        parts = ", ".join(f"{c.bucket}: {c.n_dropped}" for c in dropped)
        reasons.append(f"pairs dropped as errored/skipped (infrastructure, not evidence): {parts}")
    decision: ReviewDecision = "regresses" if regressed else "improves" if improved else "neutral"
    return ReviewVerdict(decision=decision, reasons=reasons,
                         regressed=[c.bucket for c in regressed],
                         improved=[c.bucket for c in improved])


# --- pooling confirmation trials --------------------------------------------------------


def merge_runs(a: RunResult, extra: RunResult) -> RunResult:
    """`a` plus the trials of `extra` (new trial indices from a confirmation rerun).

    Nothing is replaced: a (task, trial index) present in both runs is a ValueError, as is
    merging runs of different suites or agents.
    """
    if (a.suite_name, a.agent_name) != (extra.suite_name, extra.agent_name):
        raise ValueError(f"cannot merge run of {extra.suite_name}/{extra.agent_name} into "
                         f"{a.suite_name}/{a.agent_name}")
    clash = sorted(_index(a).keys() & _index(extra).keys())
    if clash:
        shown = ", ".join(f"{tid}#{i}" for tid, i in clash[:5])
        raise ValueError(f"confirmation trials reuse existing trial indices: {shown}")
    for task_id, bucket in extra.task_buckets.items():
        if a.task_buckets.get(task_id, bucket) != bucket:
            raise ValueError(f"task {task_id} changed bucket between the runs")
    added: dict[str, int] = {}
    for t in extra.trials:
        added[t.task_id] = added.get(t.task_id, 0) + 1
    known = set(a.task_ids)
    task_ids = [*a.task_ids, *(t for t in extra.task_ids if t not in known)]
    per_task = dict(a.trials_per_task)
    for task_id, n in added.items():
        per_task[task_id] = per_task.get(task_id, 0) + n
    return a.model_copy(update={
        "task_ids": task_ids,
        "task_buckets": {**extra.task_buckets, **a.task_buckets},
        "trials_per_task": per_task,
        "started_at": min(a.started_at, extra.started_at),
        "ended_at": max(a.ended_at, extra.ended_at),
        "trials": [*a.trials, *extra.trials],
    })
