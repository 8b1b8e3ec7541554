"""Per-task harm detection: did the candidate break this one task? Pure, no I/O.

Every task outside the target has a baseline record: the trials of earlier runs of the same
prompt lineage (its measured flakiness) plus this session's baseline trials. The candidate's
trials on the task are judged against that record, never against a pooled bucket, by one
sequential Bayes-factor test per task (an SPRT whose alternative is the drop the policy's
sensitivity names, `GatePolicy.harm_sensitivity`):

- **pass/fail tasks**: H0 "the candidate passes as often as the record", H1 "it passes `d`
  less often", where `d` is the sensitivity's share (half: 0.5, narrow: 0.8) of a passing
  task's rate seen through the suite's outcome noise (`pass_drop`: a noisy suite whose
  reliable tasks pass 89% of the time shows half of a passing task's rate as a drop of
  0.39, not 0.5; `HarmScale.ceiling` is estimated from every record at once). The
  record's rate is uncertain (a 12/12 record is not a rate of 1): both hypotheses integrate
  over its posterior (`exact.drop_log_bf`).
- **graded tasks** (judge scores): H0 "the candidate's scores follow the record's scores",
  H1 "they follow them lowered by `regression_tolerance`" (either sensitivity), each
  a kernel density of the record with a uniform share (`exact.shift_log_bf`): the record's
  own shape, bimodal where noise reflects scores, and no single outlier worth more than a
  bounded factor. The
  suite-wide drift of scores is estimated jointly (`HarmScale.score_drift`) and removed first.

Decisions, with error control over tasks and looks:

- **break**: the factor reaches `tasks / harm_break_alpha` (Bonferroni over the harm tasks;
  for pass rates the factor that calls a break mixes in a fall to the suite's noise floor
  (`break_log_bf`), so a task that stops passing is called in about five trials, where a
  halving's factor alone needs ten or more;
  by Ville's inequality a task that did not change reaches it at any look with probability
  at most `harm_break_alpha / tasks`, so a good patch loses at most `harm_break_alpha` of its
  iterations to false breaks, however often the gate looks; approximately, since the factor
  averages over the record's posterior and the drop is re-estimated at each look, where Ville's
  bound is exact for a fixed rate: a simulation test checks the rate);
- **no harm**: the factor falls to `GatePolicy.task_beta` (a task broken by the drop gets
  there with probability at most about that), or the task cannot lose the drop (its
  record's rate is below it with posterior probability over a half, or its scores cannot fall that
  far), or, at the cap of `harm_max_trials` candidate trials, the terminal rule: the factor
  is under `harm_terminal_bf`;
- **undecided**: neither; `need` says how many more clean candidate trials would decide it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptloop.optimizer.gate.exact import (
    drop_log_bf,
    floor_log_bf,
    pooled_drop_pvalue,
    shift_log_bf,
)
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.policy import GatePolicy

TaskKey = tuple[str, str]
"""(bucket, task id): task ids may repeat across suites, bucket names never do."""
TaskState = Literal["no harm", "break", "undecided"]
Obs = tuple[float, bool]
"""(score, passed) of one counted trial."""
RecordClass = Literal["reliable", "flaky", "failing", "ambiguous"]

CANNOT_LOSE = 0.5
"""A task cannot lose the drop when its record's rate exceeds it with at most this posterior
probability."""
STILL_LOSING = 10.0
"""The factor for the drop (given a rate above it) at which a task's candidate trials overrule
"cannot lose": a test under way is not ended by fresh baseline trials that pull the record
under the drop (bench v2, card 10-task, narrow-1, noise 0: a task broken to 10% that failed 8
of 11 trials was cleared so)."""


@dataclass
class TaskRecord:
    """Everything observed on one task: history, this session's baseline, the candidate."""

    key: TaskKey
    history: list[Obs] = field(default_factory=list)
    base: dict[int, Obs] = field(default_factory=dict)
    cand: dict[int, Obs] = field(default_factory=dict)
    shift: float = 0.0
    """Suite-wide drift of graded scores since the record (subtracted from the candidate's
    graded scores before any comparison; 0 for pass/fail tasks)."""
    scored: bool | None = None
    """Whether a grader of the task gives scores between 0 and 1 (a judge, partial credit):
    the task is then decided on its scores. None: inferred from the trials' scores, which
    are means over graders (a task whose two pass/fail graders split reads 0.5, and would
    pass for a graded one: `graded_trial` says it from each grader's own score)."""

    @property
    def reference(self) -> list[float]:
        return [s for s, _ in self.history] + [s for s, _ in self.base.values()]

    @property
    def ref_passes(self) -> list[bool]:
        return [ok for _, ok in (*self.history, *self.base.values())]

    @property
    def candidate(self) -> list[float]:
        """The candidate's scores, net of the graded drift."""
        d = self.shift if self.graded else 0.0
        return [min(1.0, max(0.0, self.cand[i][0] - d)) for i in sorted(self.cand)]

    @property
    def graded(self) -> bool:
        if self.scored is not None:
            return self.scored
        return any(s not in (0.0, 1.0) for s, _ in (*self.history, *self.base.values(),
                                                    *self.cand.values()))

    def pairs(self) -> list[Pair]:
        out = []
        for i in sorted(self.base.keys() & self.cand.keys()):
            (bs, bp), (cs, cp) = self.base[i], self.cand[i]
            out.append(Pair(self.key[1], i, bs, cs, bp, cp))
        return out

    def stratum(self, first: bool = False) -> tuple[int, int, int, int]:
        """(record passes, record trials, candidate passes, candidate trials); `first`: the
        candidate's first trial only (its later trials are chosen by what it showed)."""
        ref = self.ref_passes
        cand = [self.cand[min(self.cand)]] if first and self.cand else list(self.cand.values())
        return (sum(ref), len(ref), sum(ok for _, ok in cand), len(cand))


@dataclass(frozen=True)
class HarmScale:
    """What harm detection estimates from every task at once (never from one task alone)."""

    ceiling: float = 1.0
    """A passing task's pass rate in this suite (the median record rate of the tasks that
    pass more often than not): noise keeps it under 1, and the drop scales with it."""
    score_drift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The common move of graded scores since the record, by the level of the task's
    recorded mean score (under `LEVELS[0]`, between, over `LEVELS[1]`): the median over
    the graded tasks of that level. A drift of the model moves scores far from the pass
    threshold more than scores near it (a task at 0.99 moves by up to 0.097 in score when
    its pass rate moves by 0.02; one at 0.5 by 0.005)."""
    pass_drift: float = 0.0
    """The common move of pass rates since the record: the plain mean over the harm tasks
    of (first candidate trial - record rate), clipped to half of `drift_limit`."""
    tasks: int = 1
    """Harm tasks tested together (the Bonferroni divisor of the break level)."""

    def drift_of(self, rec: TaskRecord) -> float:
        """The score drift removed from this task's candidate scores (0 unless graded)."""
        ref = rec.reference
        if not rec.graded or not ref:
            return 0.0
        return self.score_drift[_level(math.fsum(ref) / len(ref))]


LEVELS = (0.5, 0.7)


def _level(mean: float) -> int:
    return 0 if mean < LEVELS[0] else 2 if mean > LEVELS[1] else 1


def estimate_scale(records: Sequence[TaskRecord], policy: GatePolicy,
                   tasks: int | None = None) -> HarmScale:
    """The suite's ceiling and drifts from every record at once. The score drift is a
    median by level, the pass drift a plain mean (a skewed binary residual needs it to stay
    unbiased); both are clipped to +-`policy.drift_limit` (scores) and half of it (pass
    rates), so a harm confined to a few tasks does not move them much and a broad harm
    is never explained away."""
    rates = [sum(r.ref_passes) / len(r.ref_passes) for r in records if len(r.ref_passes) >= 4]
    passing = [x for x in rates if x > 0.5]
    ceiling = min(1.0, max(0.6, statistics.median(passing))) if len(passing) >= 3 else 1.0
    lim = policy.drift_limit
    by_level: list[list[float]] = [[], [], []]
    for r in records:
        if r.graded and r.cand and r.reference:
            mean = math.fsum(r.reference) / len(r.reference)
            by_level[_level(mean)].append(math.fsum(s for s, _ in r.cand.values())
                                          / len(r.cand) - mean)
    moves = [x for xs in by_level for x in xs]
    overall = statistics.median(moves) if len(moves) >= 6 else 0.0
    score = tuple(max(-lim, min(lim, statistics.median(xs) if len(xs) >= 3 else overall))
                  for xs in by_level)
    # the plain mean: a residual of a pass/fail trial against its record's rate is skewed
    # (many +0.1, a few -0.9 at noise 0.1), and any trimming cuts the long side away, which
    # biased v3's estimate upward by up to the clip (issue 31); the mean is unbiased under
    # "no change", and the clip keeps a broad harm from being explained away
    pass_moves = [float(r.cand[min(r.cand)][1]) - sum(r.ref_passes) / len(r.ref_passes)
                  for r in records if r.cand and r.ref_passes]
    pdrift = (max(-lim / 2, min(lim / 2, math.fsum(pass_moves) / len(pass_moves)))
              if len(pass_moves) >= 6 else 0.0)
    count = len(records) if tasks is None else tasks
    return HarmScale(ceiling, (score[0], score[1], score[2]), pdrift, max(1, count))


def pass_drop(policy: GatePolicy, scale: HarmScale) -> float:
    """The drop in observed pass rate each task must rule out: the sensitivity's share of a
    passing task's rate, seen through the suite's outcome noise. A passing task that passes
    a share c of its trials (`HarmScale.ceiling`) has its outcomes flipped with probability
    about 1 - c, and symmetric flips shrink any drop by 2c - 1: half of a passing task's
    rate is a drop of 0.5 at c = 1, 0.39 at c = 0.89, 0.29 at c = 0.79."""
    # on a grid of 0.01: the ceiling moves a little between looks, the cached factors must not
    return round(policy.drop_share * max(0.2, 2.0 * scale.ceiling - 1.0), 2)


def classify(rec: TaskRecord, policy: GatePolicy, scale: HarmScale | None = None
             ) -> RecordClass:
    """What the record says about the task: "reliable" (its rate is at least 90% of a
    passing task's, with 90% posterior confidence), "failing" (it cannot lose the drop),
    "flaky" (a rate measured well enough, in between), or "ambiguous" (fewer than
    `history_min` trials, or a posterior too wide to tell flaky from reliable or failing)."""
    scale = scale or HarmScale()
    ref = rec.ref_passes
    n, r = len(ref), sum(ref)
    if n < policy.history_min:
        return "ambiguous"
    a, b = r + 1.0, n - r + 1.0
    mean = a / (a + b)
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    if mean - 1.2816 * sd >= 0.9 * scale.ceiling - 0.1:
        return "reliable"
    if drop_log_bf(r, n, 0, 0, pass_drop(policy, scale))[1] <= CANNOT_LOSE:
        return "failing"
    return "ambiguous" if sd > 0.12 else "flaky"


@dataclass(frozen=True)
class TaskFinding:
    key: TaskKey
    state: TaskState
    why: str
    log_bf: float
    """Log Bayes factor of the drop against no change (positive: evidence of harm)."""
    need: int
    """More clean candidate trials that would rule the drop out (0 once decided)."""
    ref_mean: float | None
    cand_mean: float | None
    n_ref: int
    n_cand: int
    cand_failed: list[int] = field(default_factory=list)
    """Candidate trial indices that failed."""
    basis: str = ""
    """What a "no harm" rests on: "bayes", "cannot lose" or "terminal"."""

    @property
    def suspect(self) -> bool:
        return self.log_bf > 0.0

    def describe(self) -> str:
        task = f"task {self.key[1]!r}"
        if self.ref_mean is None:
            return f"{task}: no baseline record"
        cand = "not run" if self.cand_mean is None else f"{self.cand_mean:.2f} over {self.n_cand}"
        failed = (f", failed trial(s) #{', #'.join(map(str, self.cand_failed))}"
                  if self.cand_failed else "")
        return (f"{task}: baseline {self.ref_mean:.2f} over {self.n_ref} recorded trial(s), "
                f"candidate {cand}{failed}; {self.why}")


def _fmt_bf(log_bf: float) -> str:
    if log_bf >= 0:
        return f"{math.exp(min(log_bf, 700)):.3g}:1 for"
    return f"{math.exp(min(-log_bf, 700)):.3g}:1 against"


def _evidence(rec: TaskRecord, policy: GatePolicy, scale: HarmScale,
              extra_passes: int = 0) -> tuple[float, bool, str, float]:
    """(log Bayes factor of the drop, whether the task can lose it, what is tested, the
    pass-rate test's factor), with `extra_passes` clean candidate trials added (to count the
    trials a clean path needs). A pass/fail task takes the pass-rate test; a graded task is
    decided by the score test (its pass flags are its scores against a threshold, and noise
    near the threshold makes them the weaker evidence), while its pass-rate test may still
    call a break, and keeps it from "no harm" while it favours the drop by
    `harm_terminal_bf` or more (a task that stops passing with scores that barely move)."""
    d = pass_drop(policy, scale)
    r, n, c, m = rec.stratum()
    pass_bf, mass = drop_log_bf(r, n, c + extra_passes, m + extra_passes, d)
    cannot = mass <= CANNOT_LOSE and pass_bf < math.log(STILL_LOSING)
    if cannot:
        # a record under the drop cannot lose it, unless the candidate's trials already favour
        # the drop (given a rate above it) by STILL_LOSING: fresh baseline twins beside a
        # failing candidate must not talk the record under the drop and end the test
        pass_bf = -math.inf
    if not rec.graded:
        return pass_bf, not cannot, f"a drop of {d:.2g} in pass rate", pass_bf
    ref = rec.reference
    h = policy.regression_tolerance
    mean = math.fsum(ref) / len(ref)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in ref) / max(1, len(ref) - 1))
    what = f"a drop of {h:g} in mean score"
    if mean + 1.2816 * max(sd, 0.05) / math.sqrt(len(ref)) < h:
        return 0.0, False, what, pass_bf
    cand = rec.candidate + [max(ref)] * extra_passes
    return shift_log_bf(ref, cand, h, slack=policy.score_slack), True, what, pass_bf


FALL_WEIGHT = 0.1
"""The fall's share of the break factor's mixture (`break_log_bf`): small, so that a task
whose rate halves needs a factor only 1/0.9 higher than the drop's alone (its break is as
likely as before), while a task that stops passing reaches the break level in about five
failed trials from a clean record of ten, where the halving's factor alone needs ten or more."""


def floor_rate(scale: HarmScale) -> float:
    """The pass rate of a task that stopped working, seen through the suite's outcome noise
    (a passing task that passes `ceiling` of its trials has its outcomes flipped about
    1 - `ceiling` of the time: so does a broken one), at least 0.01."""
    return max(0.01, round(1.0 - scale.ceiling, 2))


def break_log_bf(rec: TaskRecord, scale: HarmScale, pass_bf: float) -> float:
    """The pass-rate factor that calls a break: a mixture of `pass_bf` (the sensitivity's
    drop, `drop_log_bf`) and, with weight `FALL_WEIGHT`, the factor of a fall to `floor_rate`
    (`exact.floor_log_bf`). Under no change each is a nonnegative martingale, so their mean
    is one too and Ville's bound holds as for the drop alone; a task that cannot lose the drop
    (`pass_bf` is -inf) is never called broken by its pass rate."""
    if pass_bf == -math.inf:
        return -math.inf
    r, n, c, m = rec.stratum()
    fall = floor_log_bf(r, n, c, m, floor_rate(scale))
    top = max(pass_bf, fall)
    w = FALL_WEIGHT
    return top + math.log((1.0 - w) * math.exp(pass_bf - top) + w * math.exp(fall - top))


def break_bound(policy: GatePolicy, scale: HarmScale) -> float:
    """Log of the Bayes factor that calls a break (Bonferroni over the harm tasks)."""
    return math.log(scale.tasks / policy.harm_break_alpha)


def judge_task(rec: TaskRecord, policy: GatePolicy, scale: HarmScale | None = None
               ) -> TaskFinding:
    """Break, no harm or undecided, with the evidence in words."""
    scale = scale or HarmScale()
    ref, cand = rec.reference, rec.candidate
    failed = [i for i in sorted(rec.cand) if not rec.cand[i][1]]
    ref_mean = math.fsum(ref) / len(ref) if ref else None
    cand_mean = math.fsum(cand) / len(cand) if cand else None

    def finding(state: TaskState, why: str, log_bf: float = 0.0, need: int = 0,
                basis: str = "") -> TaskFinding:
        return TaskFinding(rec.key, state, why, log_bf, need, ref_mean, cand_mean, len(ref),
                           len(cand), failed, basis)

    if not ref:
        return finding("undecided", "no baseline trial counted (all errored)", need=1)
    log_bf, can_lose, what, pass_bf = _evidence(rec, policy, scale)
    high = break_bound(policy, scale)
    broke = break_log_bf(rec, scale, pass_bf)
    fell = (f"Bayes factor of a drop of {pass_drop(policy, scale):.2g} in pass rate or a fall "
            f"to {floor_rate(scale):.2g} ({1 - FALL_WEIGHT:g}:{FALL_WEIGHT:g} mixture) against "
            "no change")
    if rec.graded:
        high += math.log(2.0)  # two break tests (score, pass rate): Bonferroni
        if broke >= high:
            return finding("break", f"broken: {fell} {math.exp(min(broke, 700)):.3g} >= "
                           f"{math.exp(high):.3g} (the break level "
                           f"{policy.harm_break_alpha:g} over {scale.tasks} task(s), two "
                           "tests)", broke)
    elif broke >= high:
        return finding("break", f"broken: {fell} {math.exp(min(broke, 700)):.3g} >= "
                       f"{math.exp(high):.3g} (the break level {policy.harm_break_alpha:g} "
                       f"over {scale.tasks} task(s))", broke)
    terminal = math.log(policy.harm_terminal_bf)
    if rec.graded and pass_bf >= terminal:
        # the scores may not move much, but the task passes less often: not ruled out
        what = f"a drop of {pass_drop(policy, scale):.2g} in pass rate"
        log_bf, can_lose = max(log_bf, pass_bf), True
    if not can_lose:
        return finding("no harm", f"no harm: its record is below {what}, so it cannot lose "
                       "that much", basis="cannot lose")
    low = math.log(policy.task_beta)
    test = "Bayes factor of " + what + " against no change"
    if log_bf >= high:
        return finding("break", f"broken: {test} {math.exp(min(log_bf, 700)):.3g} >= "
                       f"{math.exp(high):.3g} (the break level {policy.harm_break_alpha:g} "
                       f"over {scale.tasks} task(s))", log_bf)
    if log_bf <= low:
        return finding("no harm", f"no harm: {test}, {_fmt_bf(log_bf)} the drop (<= "
                       f"{policy.task_beta:g})", log_bf, basis="bayes")
    ran = max(rec.cand) + 1 if rec.cand else 0  # trial indices spent, errored ones too
    if ran >= policy.harm_max_trials:
        if log_bf < terminal:
            return finding("no harm", f"no harm (terminal rule at {ran} trials): {test} "
                           f"{_fmt_bf(log_bf)} the drop", log_bf, basis="terminal")
        return finding("undecided", f"{what} not ruled out at the cap of {ran} trials "
                       f"({_fmt_bf(log_bf)} the drop)", log_bf, need=0)
    return finding("undecided", f"{what} not ruled out yet ({_fmt_bf(log_bf)} the drop, "
                   f"needs {policy.task_beta:g})", log_bf,
                   need=clean_need(rec, policy, scale))


def clean_need(rec: TaskRecord, policy: GatePolicy, scale: HarmScale) -> int:
    """More clean candidate trials that would bring the factor to `task_beta` (at most
    the trials left under the cap; the cap's terminal rule decides after that)."""
    low = math.log(policy.task_beta)
    left = max(1, policy.harm_max_trials - len(rec.cand))
    for k in range(1, left + 1):
        if _evidence(rec, policy, scale, k)[0] <= low:
            return k
    return left


def first_trials(rec: TaskRecord, policy: GatePolicy, scale: HarmScale | None = None) -> int:
    """Candidate trials a task needs on the clean path (0 when it cannot lose the drop)."""
    f = judge_task(rec, policy, scale)
    return 0 if f.state == "no harm" else min(f.need, policy.harm_max_trials)


def ambiguous(rec: TaskRecord, policy: GatePolicy, scale: HarmScale) -> bool:
    """The record is too short to decide a suspect against: fresh baseline trials pay. A
    record of a dozen trials spread over a few runs cannot tell a reliable task from a flaky
    one that was lucky (run-to-run swings of a flaky task are wider than its trial count
    says), and "a flaky task, unchanged" then reads as "a better task, broken"; under
    `policy.twin_record` trials (or when `classify` finds it ambiguous) the record grows with
    fresh baseline trials beside the candidate's."""
    return (len(rec.ref_passes) < policy.twin_record
            or classify(rec, policy, scale) == "ambiguous")


def pooled_pvalue(records: Sequence[TaskRecord], scale: HarmScale) -> float:
    """All harm tasks together pass less often than their records (drift removed), on each
    task's first candidate trial: the sequential tests chose how many more a task got from
    what it showed (a task that failed got more trials), so its later trials would bias a
    fixed-sample test toward harm."""
    return pooled_drop_pvalue([r.stratum(first=True) for r in records if r.ref_passes],
                              scale.pass_drift)
