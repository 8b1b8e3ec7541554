"""Per-task harm detection: did the candidate break this one task? Pure, no I/O.

Every task outside the target has a baseline record: the trials of earlier runs of the same
prompt lineage (its measured flakiness) plus this session's baseline trials. The candidate's
trials on the task are judged against that record, never against a pooled bucket:

- **break**: the one-sided two-sample permutation test of the candidate's scores against the
  record (`exact.two_sample_pvalue`; Fisher's exact test for pass/fail scores) is at or below
  `harm_break_alpha`. A task that passed all of 10 or more recorded trials and fails twice on
  the candidate is a break (p = 1/66 at 10, 1/91 at 12).
- **no harm**: the evidence rules the drop out. Either the task cannot lose the drop at all
  (the upper end of its baseline pass rate, or mean score, is below the drop), or Wald's
  likelihood ratio of "no change" against "a drop of `harm_pass_drop` in pass rate" (pass/fail
  scores) or "a drop of `harm_score_drop` in mean score" (graded scores, normal model with the
  record's spread, each trial's contribution clipped) reaches 1/`harm_task_beta`. A broken
  task therefore reaches "no harm" with probability at most about `harm_task_beta`; a task
  that stays silent, or that was never run, never does.
- **undecided**: neither; `need` says how many more clean candidate trials would decide it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from optimizer.gate.compare import GatePolicy
from optimizer.gate.exact import two_sample_pvalue, wilson_lower, wilson_upper
from optimizer.gate.pairing import Pair

TaskKey = tuple[str, str]
"""(bucket, task id): task ids may repeat across suites, bucket names never do."""
TaskState = Literal["no harm", "break", "undecided"]
Obs = tuple[float, bool]
"""(score, passed) of one counted trial."""

_CLIP = 2.0
"""Largest log-likelihood contribution of one graded trial (a judge's outlier is one trial)."""


@dataclass
class TaskRecord:
    """Everything observed on one task: history, this session's baseline, the candidate."""

    key: TaskKey
    history: list[Obs] = field(default_factory=list)
    base: dict[int, Obs] = field(default_factory=dict)
    cand: dict[int, Obs] = field(default_factory=dict)
    since: int | None = None
    """The candidate trial index from which its trials are fresh: set when the task became a
    suspect. The break test uses only fresh trials (the failure that raised the suspicion was
    selected, so it is no evidence); None: all trials."""
    shift: float = 0.0
    """Suite-wide drift of graded scores since the record (subtracted from the candidate's
    graded scores before any comparison; 0 for pass/fail tasks)."""

    @property
    def reference(self) -> list[float]:
        return [s for s, _ in self.history] + [s for s, _ in self.base.values()]

    @property
    def candidate(self) -> list[float]:
        """The candidate's scores, net of the graded drift."""
        d = self.shift if self.graded else 0.0
        return [min(1.0, max(0.0, self.cand[i][0] - d)) for i in sorted(self.cand)]

    @property
    def graded(self) -> bool:
        return any(s not in (0.0, 1.0) for s, _ in (*self.history, *self.base.values(),
                                                    *self.cand.values()))

    def pairs(self) -> list[Pair]:
        out = []
        for i in sorted(self.base.keys() & self.cand.keys()):
            (bs, bp), (cs, cp) = self.base[i], self.cand[i]
            out.append(Pair(self.key[1], i, bs, cs, bp, cp))
        return out


@dataclass(frozen=True)
class TaskFinding:
    key: TaskKey
    state: TaskState
    why: str
    p_break: float
    log_ratio: float
    need: int
    """More clean candidate trials that would rule the drop out (0 once decided)."""
    ref_mean: float | None
    cand_mean: float | None
    n_ref: int
    n_cand: int
    cand_failed: list[int] = field(default_factory=list)
    """Candidate trial indices that failed."""
    basis: str = ""
    """What a "no harm" rests on: "wald", "cannot lose" or "flakiness"."""

    @property
    def suspect(self) -> bool:
        return (self.cand_mean is not None and self.ref_mean is not None
                and self.cand_mean < self.ref_mean - 1e-9)

    def describe(self) -> str:
        task = f"task {self.key[1]!r}"
        if self.ref_mean is None:
            return f"{task}: no baseline record"
        cand = "not run" if self.cand_mean is None else f"{self.cand_mean:.2f} over {self.n_cand}"
        failed = (f", failed trial(s) #{', #'.join(map(str, self.cand_failed))}"
                  if self.cand_failed else "")
        return (f"{task}: baseline {self.ref_mean:.2f} over {self.n_ref} recorded trial(s), "
                f"candidate {cand}{failed}; {self.why}")


def _drop_ratio(rec: TaskRecord, policy: GatePolicy) -> tuple[float, float, float, str] | None:
    """Wald's evidence of a steady task: (log-ratio so far, gain of one clean trial, bound,
    what is ruled out), or None when the task cannot lose the drop at all."""
    ref, cand = rec.reference, rec.candidate
    n = len(ref)
    bound = math.log(1.0 / task_beta(rec, policy))
    if not rec.graded:
        passes = sum(ref)
        h = policy.harm_pass_drop
        if wilson_upper(passes, n) < h:
            return None
        p0 = (passes + 0.5) / (n + 1)
        p1 = max(p0 - h, 0.01)
        win, loss = math.log(p0 / p1), math.log((1 - p0) / (1 - p1))
        ratio = math.fsum(win if x >= 0.5 else loss for x in cand)
        return ratio, win, bound, f"a drop of {h:g} in pass rate"
    h = policy.regression_tolerance
    mean = math.fsum(ref) / n
    sd = max(0.08, math.sqrt(math.fsum((x - mean) ** 2 for x in ref) / max(1, n - 1)))
    if mean + 1.2816 * sd / math.sqrt(n) < h:
        return None
    per = h / (sd * sd)
    ratio = math.fsum(max(-_CLIP, min(_CLIP, per * (x - mean + h / 2))) for x in cand)
    return ratio, min(_CLIP, per * h / 2), bound, f"a drop of {h:g} in mean score"


def _consistent(rec: TaskRecord, policy: GatePolicy) -> tuple[bool, str]:
    """A flaky task's evidence: after at least `flaky_trials` candidate trials, its
    candidate mean is within the band its own flakiness predicts (1.645 standard errors of
    the difference of two means of its recorded rate, at least half the drop margin) below
    its recorded mean, and its break test (run before) found nothing."""
    ref, cand = rec.reference, rec.candidate
    margin = (policy.regression_tolerance if rec.graded else policy.harm_pass_drop) / 2
    mean = math.fsum(ref) / len(ref)
    if len(cand) < policy.flaky_trials:
        return False, (f"flaky task (under {STEADY:.0%} of its recorded trials passed): needs "
                       f"{policy.flaky_trials} candidate trial(s)")
    drop = mean - math.fsum(cand) / len(cand)
    if rec.graded:
        var = math.fsum((x - mean) ** 2 for x in ref) / max(1, len(ref) - 1)
    else:
        var = mean * (1 - mean)
    band = max(margin, 1.645 * math.sqrt(var * (1 / len(ref) + 1 / len(cand))))
    if drop > band:
        return False, (f"flaky task: candidate {drop:.2f} below its record, outside the band "
                       f"{band:.2f} its flakiness predicts")
    return True, (f"no harm: a flaky task whose {len(cand)} candidate trial(s) are within the "
                  f"band {band:.2f} its own flakiness predicts (drop {drop:+.2f})")


STEADY = 0.75
"""A task is steady when at least this share of its recorded trials passed (or its recorded
mean score is at least this): a break there is visible, and Wald's test rules it out."""


def steady(rec: TaskRecord) -> bool:
    """Whether Wald's test rules the drop out (else: consistency with its flakiness). Graded
    tasks always take Wald's test: their scores carry the spread the normal model needs."""
    ref = rec.reference
    if not ref:
        return False
    return rec.graded or math.fsum(ref) / len(ref) >= STEADY


def reliable(rec: TaskRecord) -> bool:
    """The task passes reliably on its record: the lower end of the one-sided 90% Wilson
    interval of its recorded pass rate is at least 0.8 (12 of 12, 19 of 20; not 11 of 12). A
    flaky task's lucky record rarely clears it, so its failures need more evidence."""
    passed = [ok for _, ok in (*rec.history, *rec.base.values())]
    return bool(passed) and wilson_lower(sum(passed), len(passed)) >= 0.8


def passes_record(rec: TaskRecord) -> bool:
    """At least 90% of the task's recorded trials passed (point estimate)."""
    passed = [ok for _, ok in (*rec.history, *rec.base.values())]
    return bool(passed) and sum(passed) >= 0.9 * len(passed)


def task_beta(rec: TaskRecord, policy: GatePolicy) -> float:
    """Wald's bound of a steady task: `harm_task_beta` when it is reliable (90% of its record
    passed), `harm_steady_beta` when it passes 75-90% of the time (a break is harder to see
    there, and each ruled-out drop costs more trials)."""
    return policy.harm_task_beta if reliable(rec) else policy.harm_steady_beta


def break_alpha(rec: TaskRecord, policy: GatePolicy) -> float:
    """The level of a task's break test: `harm_break_alpha` for a reliable task, a tenth of
    it for a flaky one, whose failures need more evidence before they mean anything."""
    return policy.harm_break_alpha if reliable(rec) else policy.harm_break_alpha / 10


def _break(rec: TaskRecord, policy: GatePolicy) -> tuple[float, str] | None:
    """(p, why) when the candidate broke the task: its pass flags by Fisher's exact test; for
    graded scores also by the two-sample permutation test on scores, once it has 4 trials and
    its median score fell by at least `regression_tolerance` (a judge's swing on one trial, or
    its run-to-run drift, is not a break)."""
    if not rec.cand:
        return None
    alpha = break_alpha(rec, policy)
    fresh = [i for i in sorted(rec.cand) if rec.since is None or i >= rec.since]
    if not fresh:
        return None
    ref_ok = [float(ok) for _, ok in (*rec.history, *rec.base.values())]
    cand_ok = [float(rec.cand[i][1]) for i in fresh]
    drop_ok = sum(ref_ok) / max(1, len(ref_ok)) - sum(cand_ok) / len(cand_ok)
    # a flaky task's break must also be large: half its pass rate gone (run-to-run swings of
    # a flaky task are wider than its trial count suggests)
    big = reliable(rec) or drop_ok >= policy.harm_pass_drop
    if drop_ok > 0 and big:
        p = two_sample_pvalue(ref_ok, cand_ok)
        if p <= alpha:
            return p, f"broken: one-sided Fisher exact test on passes p={p:.3g} <= {alpha:g}"
    if rec.graded and len(fresh) >= 4:
        d = rec.shift
        ref = rec.reference
        cand = [min(1.0, max(0.0, rec.cand[i][0] - d)) for i in fresh]
        drop = statistics.median(ref) - statistics.median(cand)
        if drop >= policy.regression_tolerance - 1e-12:
            p = two_sample_pvalue(ref, cand, seed=policy.seed)
            if p <= alpha:
                return p, (f"broken: median score down {drop:.2f}, one-sided two-sample "
                           f"permutation test p={p:.3g} <= {alpha:g}")
    return None


def judge_task(rec: TaskRecord, policy: GatePolicy) -> TaskFinding:
    """Break, no harm or undecided, with the evidence in words."""
    ref, cand = rec.reference, rec.candidate
    failed = [i for i in sorted(rec.cand) if not rec.cand[i][1]]
    ref_mean = math.fsum(ref) / len(ref) if ref else None
    cand_mean = math.fsum(cand) / len(cand) if cand else None

    def finding(state: TaskState, why: str, p: float = 1.0, ratio: float = 0.0,
                need: int = 0, basis: str = "") -> TaskFinding:
        return TaskFinding(rec.key, state, why, p, ratio, need, ref_mean, cand_mean, len(ref),
                           len(cand), failed, basis)

    if not ref:
        return finding("undecided", "no baseline trial counted (all errored)", need=1)
    assert ref_mean is not None
    broken = _break(rec, policy)
    if broken is not None:
        return finding("break", broken[1], broken[0])
    p = 1.0
    ratio = _drop_ratio(rec, policy)
    if ratio is None:
        what = "pass rate" if not rec.graded else "mean score"
        return finding("no harm", f"no harm: its baseline {what} is below the drop the gate "
                       "rules out, so it cannot lose that much", p, basis="cannot lose")
    if not steady(rec):
        ok, why = _consistent(rec, policy)
        if ok:
            return finding("no harm", why, p, basis="flakiness")
        need = max(1, policy.flaky_trials - len(cand))
        return finding("undecided", why, p, need=need)
    llr, gain, bound, what = ratio
    if llr >= bound - 1e-12:
        return finding("no harm", f"no harm: Wald's ratio favours no change over {what} by "
                       f"{math.exp(llr):.3g} >= {math.exp(bound):.3g}", p, llr, basis="wald")
    need = max(1, math.ceil((bound - llr) / gain - 1e-9))
    return finding("undecided", f"{what} not ruled out yet (Wald ratio {math.exp(llr):.3g}, "
                   f"needs {math.exp(bound):.3g})", p, llr, need)


def first_trials(rec: TaskRecord, policy: GatePolicy) -> int:
    """Candidate trials a task needs on the clean path (0 when it cannot lose the drop)."""
    f = judge_task(rec, policy)
    return 0 if f.state == "no harm" else min(f.need, policy.harm_max_trials)


def graded_shift(records: Sequence[TaskRecord], limit: float = 0.1, least: int = 6) -> float:
    """The suite-wide drift of graded scores: the median over graded tasks with candidate
    trials of (candidate mean - record mean), clipped to +-`limit`; 0 with fewer than
    `least` such tasks. A harm confined to a few buckets leaves the median where it was."""
    moves = [math.fsum(s for s, _ in r.cand.values()) / len(r.cand)
             - math.fsum(r.reference) / len(r.reference)
             for r in records if r.graded and r.cand and r.reference]
    if len(moves) < least:
        return 0.0
    return max(-limit, min(limit, statistics.median(moves)))
