"""Harm to the buckets other than the target: one statement per bucket. Pure, no I/O.

Each bucket ends with exactly one of three statements:

- "regressed": one of its tasks is broken (`tasks.judge_task`), or a bucket family rejects
  it: optimize's pooled test at the final look (`gate.sequential`), review's
  anytime-valid betting family (`HarmEvidence`, `gate.review_harm`);
- "no harm": every one of its tasks ruled out its drop on evidence (`tasks.judge_task`: its
  Bayes factor, a record that cannot lose that much, or the terminal rule at the trial cap;
  the statement says how many of each);
- "harm not ruled out": anything else, with the trials that would decide it.

A test that found nothing is never read as "no harm": a task that was not run, or whose
trials do not yet favour no change, keeps its bucket at "harm not ruled out".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.exact import anytime_pvalue, betting_log_wealth, holm
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.tasks import TaskFinding
from promptloop.optimizer.gate.verdict import POOLED

HarmState = Literal["no harm", "harm not ruled out", "regressed"]


@dataclass(frozen=True)
class BucketHarm:
    bucket: str
    state: HarmState
    statement: str
    findings: tuple[TaskFinding, ...] = ()


@dataclass
class HarmEvidence:
    """The largest betting wealth seen at any look, per bucket and pooled."""

    policy: GatePolicy
    pooled_max: float = 0.0
    bucket_max: dict[str, float] = field(default_factory=dict)

    def look(self, pairs: Mapping[str, Sequence[Pair]]) -> None:
        bet = self.policy.bucket_bet
        ordered = {b: sorted(ps, key=lambda x: (x.task_id, x.trial_index))
                   for b, ps in pairs.items()}
        pooled = [x.diff for b in sorted(ordered) for x in ordered[b]]
        self.pooled_max = max(self.pooled_max, betting_log_wealth(pooled, bet))
        for b, ps in ordered.items():
            wealth = betting_log_wealth([x.diff for x in ps], bet)
            self.bucket_max[b] = max(self.bucket_max.get(b, 0.0), wealth)

    def p_bucket(self, bucket: str) -> float:
        return anytime_pvalue(self.bucket_max.get(bucket, 0.0))

    def p_pooled(self) -> float:
        return anytime_pvalue(self.pooled_max)

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


def _delta(findings: Sequence[TaskFinding]) -> tuple[float | None, int]:
    """Mean over run tasks of (candidate mean - baseline mean), and the candidate trials."""
    deltas = [f.cand_mean - f.ref_mean for f in findings
              if f.cand_mean is not None and f.ref_mean is not None]
    n = sum(f.n_cand for f in findings)
    return (math.fsum(deltas) / len(deltas) if deltas else None), n


def bucket_statement(bucket: str, findings: Sequence[TaskFinding], family_p: float | None,
                     policy: GatePolicy) -> BucketHarm:
    """The bucket's statement from its tasks' findings and its family test (p when rejected)."""
    delta, n = _delta(findings)
    moved = "not run" if delta is None else f"delta {delta:+.3f} over {n} candidate trial(s)"
    broken = [f for f in findings if f.state == "break"]
    if broken:
        return BucketHarm(bucket, "regressed", f"bucket {bucket!r} regressed: "
                          + "; ".join(f.describe() for f in broken), tuple(findings))
    if family_p is not None:
        return BucketHarm(bucket, "regressed", f"bucket {bucket!r} regressed: its tasks pass "
                          f"less often than their records (one-sided exact test p="
                          f"{family_p:.3g}, rejected by weighted Holm at "
                          f"alpha={policy.regression_alpha:g}; {moved})", tuple(findings))
    open_ = [f for f in findings if f.state == "undecided"]
    if open_:
        need = sum(f.need for f in open_)
        names = ", ".join(f.key[1] for f in open_)
        return BucketHarm(bucket, "harm not ruled out",
                          f"bucket {bucket!r}: harm not ruled out (would need {need} more "
                          f"trial(s) of tasks {names}); {moved}", tuple(findings))
    if not findings:  # review: every task was settled by the improvement test
        return BucketHarm(bucket, "no harm", f"bucket {bucket!r}: not harm-tested: its tasks "
                          "were decided by the improvement test (the bucket improved)", ())
    bases = {b: sum(f.basis == b for f in findings)
             for b in ("bayes", "cannot lose", "terminal")}
    how = ", ".join(f"{n} {label}" for b, label in (
        ("bayes", "ruled it out by its Bayes factor"),
        ("cannot lose", "cannot lose it (its record is below the drop)"),
        ("terminal", f"reached the {policy.harm_max_trials}-trial cap without the drop "
                     f"favoured {policy.harm_terminal_bf:g}:1 (the terminal rule: not shown "
                     "unlikely, only not shown)")) if (n := bases[b]))
    return BucketHarm(bucket, "no harm", f"bucket {bucket!r}: no harm (a drop of "
                      f"{policy.drop_share:g} x a passing task's pass rate or "
                      f"{policy.regression_tolerance:g} in mean score): of its "
                      f"{len(findings)} task(s), {how}; {moved}", tuple(findings))


def summary(statements: Sequence[BucketHarm]) -> str:
    counts: dict[str, int] = {}
    for s in statements:
        counts[s.state] = counts.get(s.state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
