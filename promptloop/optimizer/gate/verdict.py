"""Verdicts from bucket comparisons: the verdict models and review's regression family. Pure.

`regression_family` is the fixed-sample family `decide_review` uses on a prompt change with no
target bucket: one-sided sign-flip tests, one per bucket plus one pooled over every pair (a
thin regression spread over many buckets), corrected with the weighted Holm procedure at
`regression_alpha` (family-wise). A bucket whose mean score drops by at least
`regression_tolerance` is a suspect even when not significant; review confirms suspects with
more trials. The sequential gate of optimize (`promptloop.optimizer.gate.sequential`) tests the same
hypotheses with their anytime-valid form (`optimizer.gate.harm`), since it picks its trials
as it goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from promptloop.optimizer.gate.compare import BucketComparison, compare_bucket, describe
from promptloop.optimizer.gate.exact import holm
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.policy import GatePolicy, review_method_text

Decision = Literal["accept", "reject", "inconclusive"]
POOLED = "(buckets pooled)"
"""The pooled test's row: every bucket together in review, every bucket but the target in
optimize."""


class RegressionFindings(BaseModel):
    """What the regression family found among the non-target buckets."""

    model_config = ConfigDict(extra="forbid")

    significant: list[str] = Field(default_factory=list)
    """Buckets (or POOLED) whose regression test is rejected by weighted Holm."""
    past_margin: list[str] = Field(default_factory=list)
    """Buckets whose mean score dropped by at least the practical margin."""
    suspects: list[str] = Field(default_factory=list)
    """Buckets worth confirming: past the margin, or uncorrected p below `suspect_p`."""
    pooled: BucketComparison | None = None
    tested: int = 0
    """Number of hypotheses in the family (buckets with pairs, + the pooled test)."""


def regression_family(
    comps: Sequence[BucketComparison],
    pooled_pairs: Sequence[Pair],
    policy: GatePolicy,
) -> RegressionFindings:
    """Apply the regression family to the non-target comparisons `comps`."""
    usable = [c for c in comps if c.n_pairs and c.delta is not None]
    out = RegressionFindings()
    if not usable:
        return out
    pooled = compare_bucket(POOLED, pooled_pairs, policy, interval=False)
    out.pooled = pooled
    share = (1.0 - policy.pooled_weight) / len(usable)
    pvals = [c.p_regress for c in usable] + [pooled.p_regress]
    weights = [share] * len(usable) + [policy.pooled_weight]
    rejected = holm(pvals, policy.regression_alpha, weights)
    out.tested = len(pvals)
    names = [c.bucket for c in usable] + [POOLED]
    out.significant = [n for n, r in zip(names, rejected, strict=True) if r]
    for c in usable:
        assert c.delta is not None
        if c.delta <= -policy.regression_tolerance + 1e-12:
            out.past_margin.append(c.bucket)
        if c.delta < 0 and (c.bucket in out.past_margin or c.p_regress <= policy.suspect_p):
            out.suspects.append(c.bucket)
    return out


HARM_ORDER = {"regressed": 0, "harm not ruled out": 1, "no harm": 2}
"""How bucket statements are listed: regressions first, then open ones, then no harm."""


class BucketVerdict(BaseModel):
    """One non-target bucket's harm statement (`promptloop.optimizer.gate.harm`)."""

    model_config = ConfigDict(extra="forbid")

    bucket: str
    state: Literal["no harm", "harm not ruled out", "regressed"]
    statement: str


class Verdict(BaseModel):
    """The gate's decision with its evidence; `reasons` are for humans (ledger, PR body)."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    target_bucket: str
    reasons: list[str] = Field(default_factory=list)
    suspected_regressions: list[str] = Field(default_factory=list)
    target: BucketComparison | None = None
    test: str = ""
    """The statistics behind the decision, named as in a methods section."""
    stopped: str = ""
    """Why the sequential gate stopped (screen, efficacy, futility, max trials, regression)."""
    looks: int = 0
    trials_per_task: int = 0
    """Trials per target task (each side) when the gate stopped."""
    model_trials: int = 0
    """Trials run for this decision (baseline extensions + candidate), cached ones excluded."""
    visible: BucketComparison | None = None
    heldout: BucketComparison | None = None
    heldout_tasks: list[str] = Field(default_factory=list)
    buckets: list[BucketVerdict] = Field(default_factory=list)
    """Every non-target bucket's statement: no harm, harm not ruled out, or regressed."""
    ruled_out: str = ""
    """What harm detection is built to rule out and what it is not, in one plain sentence
    (`policy.sensitivity_statement`; empty when harm detection did not run)."""


ReviewDecision = Literal["regresses", "improves", "neutral", "inconclusive"]


class ReviewVerdict(BaseModel):
    """The gate's verdict on a change with no target bucket (a prompt PR under review)."""

    model_config = ConfigDict(extra="forbid")

    decision: ReviewDecision
    reasons: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    improved: list[str] = Field(default_factory=list)
    suspects: list[str] = Field(default_factory=list)
    open: list[str] = Field(default_factory=list)
    """Buckets whose harm detection ended "harm not ruled out"."""
    buckets: list[BucketVerdict] = Field(default_factory=list)
    """Every bucket's harm statement (empty when harm detection did not run)."""


def decide_review(
    comparisons: Sequence[BucketComparison],
    policy: GatePolicy | None = None,
    pooled_pairs: Sequence[Pair] = (),
    harm: Sequence[BucketVerdict] | None = None,
    harm_pooled: bool = False,
    harm_reasons: Sequence[str] = (),
    improved_by: Sequence[str] | None = None,
) -> ReviewVerdict:
    """`regresses` if harm detection says a bucket regressed (`harm`, `harm_pooled`: all
    buckets pooled), or the fixed-sample family rejects a bucket (Holm), or a drop past the
    margin stands; else `inconclusive` when some bucket's harm was not ruled out; else
    `improves` if a bucket improved (Holm-corrected one-sided test), `neutral` otherwise.
    With `harm` given, `improves` and `neutral` therefore need every bucket to say "no harm".
    `suspects` lists buckets worth confirming with more trials. `improved_by`: the buckets
    the sequential efficacy test showed improved (`review_harm.HarmOnlyGate`, optimize's test
    and looks); when given it decides "improved" instead of the fixed-sample tests, and its
    sentences are among `harm_reasons`."""
    pol = policy or GatePolicy()
    fam = regression_family(comparisons, pooled_pairs, pol)
    harmed = [b.bucket for b in harm or () if b.state == "regressed"]
    regressed = sorted({*fam.significant, *fam.past_margin, *harmed} - {POOLED})
    if POOLED in fam.significant or harm_pooled:
        regressed.append(POOLED)
    open_ = [b.bucket for b in harm or () if b.state == "harm not ruled out"]
    usable = [c for c in comparisons if c.n_pairs and c.delta is not None]
    rej = holm([c.p_improve for c in usable], pol.alpha) if usable else []
    improved = [c.bucket for c, r in zip(usable, rej, strict=True)
                if r and c.delta is not None and c.delta >= pol.min_improvement]
    if improved_by is not None:
        improved = list(improved_by)
    by_name = {c.bucket: c for c in comparisons}
    family = {*fam.significant, *fam.past_margin}
    reasons = [f"bucket {b!r} regressed: {describe(by_name[b])}" for b in regressed
               if b in by_name and b in family]
    if POOLED in fam.significant and fam.pooled is not None:
        reasons.append(f"all buckets together regressed: {describe(fam.pooled)}")
    if improved_by is None:
        reasons += [f"bucket {b!r} improved: {describe(by_name[b])}" for b in improved]
    reasons += harm_reasons
    if not regressed and open_:
        reasons.append(f"inconclusive: harm not ruled out in bucket(s) {', '.join(open_)}")
    elif not regressed and not improved:
        reasons.append(f"no bucket changed beyond the thresholds ({len(usable)} bucket(s) with "
                       "paired trials)" if usable else "no bucket has paired trials")
    reasons.append(review_method_text(pol, fam.tested, sequential=improved_by is not None))
    _dropped_reason(comparisons, reasons)
    decision: ReviewDecision = ("regresses" if regressed else "inconclusive" if open_
                                else "improves" if improved else "neutral")
    return ReviewVerdict(decision=decision, reasons=reasons, regressed=regressed,
                         improved=improved, suspects=fam.suspects, open=open_,
                         buckets=list(harm or ()))


def _dropped_reason(comparisons: Sequence[BucketComparison], reasons: list[str]) -> None:
    dropped = [c for c in comparisons if c.n_dropped]
    if dropped:
        parts = ", ".join(f"{c.bucket}: {c.n_dropped}" for c in dropped)
        reasons.append(f"pairs dropped as errored/skipped (infrastructure, not evidence): {parts}")
