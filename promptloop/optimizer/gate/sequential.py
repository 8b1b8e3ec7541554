"""The sequential gate: which trials to run next, and when a verdict is reached. Pure, no I/O.

One optimize iteration walks these stages, asking the caller to run trials between steps:

1. screen: the candidate runs every target task at the default trials (paired with the cached
   baseline). No pair improved -> reject without running anything else.
2. target: the one-sided exact stratified Fisher test of the candidate's passes against
   each task's own record (lineage history + baseline), on the VISIBLE target tasks that fail
   on their record (held-out tasks never count here; passing ones go to harm detection), at
   looks after each round; look j is tested at the alpha spent since look j-1 by a Lan-DeMets
   spending function (union-bound increments), so peeking never inflates false accepts
   beyond `alpha`. Efficacy needs p <= the look's alpha AND a pass-rate gain >=
   `min_improvement`. Futility (no gain once each task has `FUTILE_AFTER` trials) rejects;
   looks come at 2, 4, 8, 16... trials per task (`_more`); `max_trials` per task
   ends reject/inconclusive. Rounds add candidate trials (baseline too where a record is thin).
3. held-out: held-out target tasks that fail on their record must improve: the same test at
   `heldout_alpha`, spent over their own looks; no gain rejects ("the held-out tasks did not
   improve"). Held-out tasks that pass go to 4.
4. harm: every other task (and each passing target task) is judged against its own record
   (`gate.tasks`): break, no harm, or undecided. Each round asks each undecided task for one
   more trial (one run per round), with fresh baseline trials for suspects. Each bucket ends
   "no harm", "harm not ruled out" or "regressed" (`gate.harm`). A break rejects at once; at
   the final look the bucket family (stratified Fisher per bucket and pooled, weighted Holm)
   may reject; every bucket "no harm" accepts; "harm not ruled out" at `harm_max_trials`
   ends inconclusive, naming the trials that would decide it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.gate.compare import BucketComparison, GatePolicy, compare_bucket
from promptloop.optimizer.gate.exact import look_alpha, stratified_pvalue
from promptloop.optimizer.gate.harm import BucketHarm, bucket_statement, summary
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.policy import gate_method_text, ruled_out_for
from promptloop.optimizer.gate.tasks import (
    HarmScale,
    TaskFinding,
    TaskKey,
    TaskRecord,
    ambiguous,
    estimate_scale,
    first_trials,
    judge_task,
    pooled_pvalue,
)
from promptloop.optimizer.gate.verdict import BucketVerdict, Decision, Verdict

Side = Literal["base", "cand"]
Stage = Literal["screen", "target", "heldout", "harm", "done"]
Observations = Mapping[TaskKey, TaskRecord]
__all__ = ["Observations", "SequentialGate", "TaskKey", "TrialAsk", "heldout_tasks"]


@dataclass(frozen=True)
class TrialAsk:
    """Run these trials, then call `step` again with every observation collected so far."""

    indices: dict[TaskKey, list[int]]
    """Trial indices the candidate runs."""
    stage: Stage
    reason: str
    base: dict[TaskKey, list[int]] = field(default_factory=dict)
    """Trial indices the baseline runs (past its cached trials)."""

    @property
    def sides(self) -> tuple[Side, ...]:
        return ("base", "cand") if self.base else ("cand",)


def heldout_tasks(task_ids: Sequence[str], policy: GatePolicy, salt: str = "",
                  rates: Mapping[str, float] | None = None) -> frozenset[str]:
    """The fixed, seeded share of a target bucket's tasks the proposer never sees (at least
    one task once the bucket has `heldout_min_tasks`). With `rates` (task id -> pass rate on
    its record: history and baseline) they are drawn among the tasks that fail more often
    than a passing task does (`FAILING`) first: a held-out task that already passes tests no
    generalisation."""
    if len(task_ids) < policy.heldout_min_tasks or policy.heldout_share <= 0:
        return frozenset()
    k = max(1, math.floor(len(task_ids) * policy.heldout_share))

    def rank(t: str) -> str:
        return hashlib.sha256(f"{policy.seed}:{salt}:{t}".encode()).hexdigest()

    failing = sorted((t for t in task_ids if rates is not None and rates.get(t, 1.0) < FAILING),
                     key=rank)
    # a share of the failing tasks (never all of them: the proposer must see failures),
    # then the others
    k_fail = min(k, max(1, math.floor(len(failing) * policy.heldout_share))) \
        if len(failing) >= 2 else 0
    others = sorted((t for t in task_ids if t not in failing), key=rank)
    picked = failing[:k_fail] + others[:k - k_fail]
    # more failing tasks only where the passing ones run out, and never the last visible one
    spare = failing[k_fail:max(k_fail, len(failing) - 1)]
    return frozenset(picked + spare[:k - len(picked)])


def record_rates(runs: Iterable[RunResult], ids: set[str]) -> dict[str, float]:
    """Task id -> pass rate over the counted trials of `runs` (history and baseline)."""
    tally: dict[str, list[int]] = {}
    for r in runs:
        for t in r.trials:
            if t.task_id in ids and t.counts:
                c = tally.setdefault(t.task_id, [0, 0])
                c[0] += t.passed
                c[1] += 1
    return {tid: c[0] / c[1] for tid, c in tally.items() if c[1]}


FAILING = 0.7
"""Held-out tasks are drawn first among the target tasks whose record rate is under this
(they do not pass as a passing task does; a passing task at noise 0.1 shows about 0.89, and
12 trials of it fall under 0.7 about 4% of the time). v3 drew among tasks under 0.5, so a
target with one such task held out a passing one, and a patch fixing only what the proposer
saw was kept (issue 31: overfit kept 15-17.5% on 3-task targets)."""
FUTILE_AFTER = 6
"""Trials per task before a look without any gain rejects for futility (the first looks'
two or four trials of a flaky-fixed task say little)."""
PASSING = 0.8
"""A target task passes on its record when its rate is at least this share of the suite's
passing rate (a noisy suite's reliable tasks pass less than 100%)."""


@dataclass
class SequentialGate:
    """State of one iteration's gate. `first()` then `step(obs)` until a Verdict comes back."""

    policy: GatePolicy
    target: str
    bucket_tasks: Mapping[str, Sequence[str]]
    """Every bucket (namespaced) -> its task ids, in suite order."""
    default_trials: Mapping[TaskKey, int]
    """Trials per task of the cached baseline (the candidate's first trials pair with them)."""
    heldout: frozenset[str] = frozenset()
    stage: Stage = "screen"
    looks: int = 0
    _t_before: float = 0.0
    _h_before: float = 0.0
    _cand_n: dict[TaskKey, int] = field(default_factory=dict)
    _base_n: dict[TaskKey, int] = field(default_factory=dict)
    _obs: Observations = field(default_factory=dict)
    _target_comp: BucketComparison | None = None
    _heldout_text: str = ""
    _target_text: str = ""
    _statements: list[BucketHarm] = field(default_factory=list)
    _scale: HarmScale = field(default_factory=HarmScale)
    """The suite's passing rate and common drifts at the last harm look."""
    _alias: dict[TaskKey, TaskKey] = field(default_factory=dict)
    """Held-out tasks' names in statements -> their real keys."""

    def __post_init__(self) -> None:
        if self.target not in self.bucket_tasks:
            raise ValueError(f"target bucket {self.target!r} is not in the suites")
        for key in self._keys(list(self.bucket_tasks)):
            self._cand_n[key] = 0
            self._base_n[key] = self.default_trials[key]

    # --- the task sets ---------------------------------------------------------------------
    def _keys(self, buckets: Sequence[str]) -> list[TaskKey]:
        return [(b, t) for b in buckets for t in self.bucket_tasks[b]]

    @property
    def visible(self) -> list[TaskKey]:
        return [k for k in self._keys([self.target]) if k[1] not in self.heldout]

    def _ceiling(self) -> float:
        """A passing task's pass rate in this suite (`tasks.HarmScale.ceiling`)."""
        return estimate_scale(list(self._obs.values()), self.policy).ceiling

    def _passes_record(self, k: TaskKey, ceiling: float) -> bool:
        """The task passes on its record as a passing task of this suite does (at least
        `PASSING` of the suite's passing rate): nothing there to improve."""
        rec = self._obs.get(k)
        if rec is None or not rec.ref_passes:
            return False
        return sum(rec.ref_passes) / len(rec.ref_passes) >= PASSING * ceiling

    @property
    def efficacy_keys(self) -> list[TaskKey]:
        """The visible target tasks the efficacy test is about: those that fail on their
        record; all visible tasks when none does. The others only must not get worse (harm
        detection): a passing task in the test would only dilute it."""
        ceiling = self._ceiling()
        failing = [k for k in self.visible if not self._passes_record(k, ceiling)]
        return failing or self.visible

    def _failing_heldout(self) -> list[TaskKey]:
        """Held-out tasks that do not pass on their record (under `PASSING` of the suite's
        passing rate, as the visible tasks the efficacy test is about): they must improve.
        The others must only not get worse (harm detection). v3 asked this only of tasks
        under half of their record, so a flaky held-out task at 60% was judged
        for harm only, and a patch that fixed the visible tasks alone was kept (issue 31)."""
        ceiling = self._ceiling()
        return [k for k in self._keys([self.target])
                if k[1] in self.heldout and k in self._obs and self._obs[k].reference
                and not self._passes_record(k, ceiling)]

    def harm_keys(self) -> list[TaskKey]:
        """Every other bucket's tasks, and the target's tasks that no efficacy test covers
        (those that pass on their record)."""
        tested = set(self._failing_heldout()) | set(self.efficacy_keys)
        held = [k for k in self._keys([self.target]) if k not in tested]
        return [*self._keys([b for b in self.bucket_tasks if b != self.target]), *held]

    def _pairs(self, keys: Sequence[TaskKey]) -> list[Pair]:
        return [p for k in keys if k in self._obs for p in self._obs[k].pairs()]

    def trials_per_task(self, keys: Sequence[TaskKey]) -> int:
        return min((self._cand_n[k] for k in keys), default=0)

    # --- requests ---------------------------------------------------------------------------
    def _request(self, wanted: Mapping[TaskKey, int], stage: Stage, reason: str,
                 paired: Sequence[TaskKey] | None = None) -> TrialAsk | None:
        """`wanted[k]` more candidate trials per task (capped at `max_trials`, or the cached
        trials when there are more); the baseline runs the same new indices past its cached
        trials for the tasks in `paired` (all of them when None)."""
        cand: dict[TaskKey, list[int]] = {}
        base: dict[TaskKey, list[int]] = {}
        pair_set = set(wanted) if paired is None else set(paired)
        for k, n in wanted.items():
            start = self._cand_n[k]
            cap = self.policy.harm_max_trials if stage == "harm" else self.policy.max_trials
            stop = min(start + n, max(cap, self.default_trials[k]))
            if stop <= start:
                continue
            cand[k] = list(range(start, stop))
            self._cand_n[k] = stop
            if k in pair_set:
                extra = [i for i in cand[k] if i >= self._base_n[k]]
                if extra:
                    base[k] = extra
                    self._base_n[k] = max(self._base_n[k], stop)
        return TrialAsk(cand, stage, reason, base) if cand else None

    def first(self) -> TrialAsk:
        keys = self._keys([self.target])
        n = max((self.default_trials[k] for k in keys), default=1)
        req = self._request(dict.fromkeys(keys, n), "screen",
                            f"candidate on the target bucket {self.target!r} first")
        assert req is not None
        return req

    # --- the steps --------------------------------------------------------------------------
    def step(self, obs: Observations) -> TrialAsk | Verdict:
        """Advance with every observation collected so far."""
        self._obs = obs
        if self.stage == "screen":
            if not any(p.diff > 0 for p in self._pairs(self._keys([self.target]))):
                return self._verdict("reject", "screen",
                                     f"target bucket {self.target!r}: no trial improved in the "
                                     "first round, so the rest of the suite was not run")
            self.stage = "target"
        if self.stage == "target":
            return self._target_look()
        if self.stage == "heldout":
            return self._heldout_look()
        return self._harm_look()

    def _strata(self, keys: Sequence[TaskKey]) -> tuple[list[tuple[int, int, int, int]], float]:
        """Each task's (record passes, record trials, candidate passes, candidate trials), and
        the mean over tasks of (candidate pass rate - record pass rate): the gain the test is
        about (a judge's score drift moves no pass)."""
        strata, gains = [], []
        for k in keys:
            rec = self._obs.get(k)
            if rec is None:
                continue
            ref = [ok for _, ok in (*rec.history, *rec.base.values())]
            cand = [ok for _, ok in rec.cand.values()]
            strata.append((sum(ref), len(ref), sum(cand), len(cand)))
            if ref and cand:
                gains.append(sum(cand) / len(cand) - sum(ref) / len(ref))
        return strata, (math.fsum(gains) / len(gains) if gains else 0.0)

    def _thin(self, keys: Sequence[TaskKey]) -> list[TaskKey]:
        """Tasks whose record is too thin to test against: fresh baseline trials too."""
        return [k for k in keys if k not in self._obs
                or len(self._obs[k].reference) < self.policy.history_min]

    def _more(self, n: int) -> int:
        """Trials per task the next target or held-out look adds: the trials so far again
        (looks at 2, 4, 8, 16, 24...), at least `round_trials`. Looks spaced so give each
        one a share of the spent alpha worth having (union-bound increments over many close
        looks leave the last one almost nothing)."""
        return max(self.policy.round_trials, n)

    def _target_look(self) -> TrialAsk | Verdict:
        """Efficacy on the visible tasks: the exact stratified Fisher test of the candidate's
        passes against each task's own record, at the look's spent alpha, and a mean gain of
        at least `min_improvement`."""
        p = self.policy
        keys = self.efficacy_keys
        self._target_comp = compare_bucket(self.target, self._pairs(keys), p, interval=False)
        strata, gain = self._strata(keys)
        p_value = stratified_pvalue(strata)
        self.looks += 1
        n = self.trials_per_task(keys)
        t = min(1.0, n / p.max_trials)
        a = look_alpha(t, self._t_before, p.alpha, p.spending)
        self._t_before = t
        moved = self._moved(strata, gain, p_value)
        self._target_text = moved
        significant = p_value <= a or not p.require_significant_improvement
        if gain >= p.min_improvement and significant:
            self.stage = "heldout"
            return self._heldout_look(f"target improved at look {self.looks} ({moved} <= "
                                      f"{a:.3g})")
        if gain <= 0 and n >= FUTILE_AFTER:
            return self._verdict("reject", "futility", f"target bucket {self.target!r} did "
                                 f"not improve on its visible tasks: {moved}")
        if n >= p.max_trials:
            decision: Decision = "reject" if gain < p.min_improvement else "inconclusive"
            return self._verdict(decision, "max trials",
                                 f"target bucket {self.target!r} undecided at {n} trials per "
                                 f"task ({moved} > look alpha {a:.3g}, needs gain >= "
                                 f"{p.min_improvement:g})")
        req = self._request(dict.fromkeys(keys, self._more(n)), "target",
                            f"target promising but undecided at look {self.looks} "
                            f"({moved} > {a:.3g}); adding trials", paired=self._thin(keys))
        assert req is not None  # n < max_trials
        return req

    @staticmethod
    def _moved(strata: Sequence[tuple[int, int, int, int]], gain: float, p_value: float) -> str:
        ref_n, cand_n = sum(s[1] for s in strata), sum(s[3] for s in strata)
        ref = sum(s[0] for s in strata) / max(1, ref_n)
        cand = sum(s[2] for s in strata) / max(1, cand_n)
        return (f"pass rate {ref:.0%} over {ref_n} recorded trial(s) -> {cand:.0%} over "
                f"{cand_n} candidate trial(s), mean score gain {gain:+.3f}, stratified Fisher "
                f"p={p_value:.3g}")

    def _heldout_look(self, why: str = "") -> TrialAsk | Verdict:
        """Held-out tasks that failed on the baseline must pass more often than their own
        record: the exact stratified Fisher test at `heldout_alpha`, spent over looks."""
        p = self.policy
        keys = self._failing_heldout()
        if not keys:
            return self._start_harm(why or "no held-out task failed on the baseline")
        strata, gain = self._strata(keys)
        p_value = stratified_pvalue(strata)
        n = self.trials_per_task(keys)
        t = min(1.0, n / p.max_trials)
        a = look_alpha(t, self._h_before, p.heldout_alpha, p.heldout_spending)
        self._h_before = t
        moved = (f"{len(keys)} held-out task(s) that failed on the baseline: "
                 + self._moved(strata, gain, p_value))
        self._heldout_text = moved
        if gain > 0 and p_value <= a:  # held-out improved
            return self._start_harm(f"{why}; held-out tasks improved too ({moved} <= {a:.3g})")
        if gain <= 0 and n >= FUTILE_AFTER:
            return self._verdict("reject", "held-out",
                                 f"the held-out task(s) of {self.target!r} did not improve "
                                 f"(overfit to the tasks the proposer saw): {moved}")
        req = self._request(dict.fromkeys(keys, self._more(n)), "heldout",
                            f"held-out tasks promising but undecided ({moved} > {a:.3g}); "
                            "adding trials", paired=self._thin(keys))
        if req is not None:
            return req
        return self._verdict("inconclusive", "held-out",
                             f"the held-out task(s) of {self.target!r} did not improve "
                             f"significantly at {n} trials per task: {moved}")

    def _harm_records(self) -> list[TaskRecord]:
        return [self._obs.get(k, TaskRecord(k)) for k in self.harm_keys()]

    def _start_harm(self, why: str) -> TrialAsk | Verdict:
        self.stage = "harm"
        records = self._harm_records()
        self._scale = estimate_scale(records, self.policy)
        wanted = {rec.key: min(self.policy.sweep_trials,
                               first_trials(rec, self.policy, self._scale))
                  for rec in records}
        req = self._request(wanted, "harm", f"{why}; harm detection on "
                            f"{sum(1 for n in wanted.values() if n)} other task(s), each at "
                            "the trials its clean path needs", paired=[])
        return req if req is not None else self._harm_look()

    def _findings(self) -> dict[str, list[TaskFinding]]:
        """Each harm task's finding by bucket; held-out tasks under "<target> (held-out)" and
        never by name (reasons reach the proposer through the ledger)."""
        out: dict[str, list[TaskFinding]] = {}
        hidden = 0
        records = self._harm_records()
        self._scale = estimate_scale(records, self.policy)
        for k, rec in zip(self.harm_keys(), records, strict=True):
            found = judge_task(replace(rec, shift=self._scale.drift_of(rec)), self.policy,
                               self._scale)
            if k[0] == self.target and k[1] in self.heldout:
                hidden += 1
                alias = (f"{self.target} (held-out)", f"held-out #{hidden}")
                self._alias[alias] = k
                found = replace(found, key=alias)
            out.setdefault(found.key[0], []).append(found)
        return out

    def _real(self, key: TaskKey) -> TaskKey:
        return self._alias.get(key, key)

    def _harm_look(self) -> TrialAsk | Verdict:
        p = self.policy
        by_bucket = self._findings()
        real = self._real
        self._statements = [bucket_statement(b, fs, None, p) for b, fs in by_bucket.items()]
        bad = [s for s in self._statements if s.state == "regressed"]
        if bad:
            return self._verdict("reject", "regression", *(s.statement for s in bad))
        open_ = [f for fs in by_bucket.values() for f in fs if f.state == "undecided"]
        if open_:
            # `sweep_trials` (1) per task and round: trials of one round share one run (and
            # its conditions), so a task's evidence is spread over runs; fresh baseline
            # trials only where the record is too short or too wide to decide against
            twins = [real(f.key) for f in open_ if f.suspect and f.n_cand >= 3
                     and ambiguous(self._obs.get(real(f.key), TaskRecord(real(f.key))), p,
                                   self._scale)]
            more = dict.fromkeys((real(f.key) for f in open_), p.sweep_trials)
            req = self._request(more, "harm", f"harm not yet ruled out on {len(open_)} task(s)"
                                ": " + ", ".join(f.key[1] for f in open_[:8])
                                + ("" if len(open_) <= 8 else ", ..."), paired=twins)
            if req is not None:
                return req
        # the final look: every harm task together, net of the common drift, once
        pooled = pooled_pvalue(self._harm_records(), self._scale)
        level = p.regression_alpha * p.pooled_weight
        if pooled <= level:
            return self._verdict("reject", "regression", f"all other tasks together pass less "
                                 f"often than their records (pooled test p={pooled:.3g} <= "
                                 f"{level:g}, common drift {self._scale.pass_drift:+.3f} "
                                 "removed)")
        if open_:
            return self._verdict("inconclusive", "max trials", *(
                s.statement for s in self._statements if s.state == "harm not ruled out"))
        return self._accept()

    def _accept(self) -> Verdict:
        assert self._target_comp is not None
        held = f"; held-out: {self._heldout_text}" if self._heldout_text else ""
        hidden = f"{self.target} (held-out)"
        others = [s for s in self._statements if s.bucket not in (self.target, hidden)]
        also = [what for name, what in ((self.target, "the target's passing tasks"),
                                        (hidden, "the held-out target tasks"))
                if any(s.bucket == name for s in self._statements)]
        return self._verdict("accept", "efficacy",
                             f"target bucket {self.target!r} improved on its visible tasks: "
                             f"{self._target_text}{held}",
                             f"no bucket regressed: every other bucket showed no harm "
                             f"({len(others)} bucket(s)"
                             + "".join(f"; so did {w}" for w in also) + ")")

    def _verdict(self, decision: Decision, stopped: str, *reasons: str) -> Verdict:
        self.stage = "done"
        p = self.policy
        keys = self._keys([self.target])
        target = self._pairs(keys)
        visible = self._pairs(self.visible)
        hidden = self._pairs([k for k in keys if k[1] in self.heldout])
        method = gate_method_text(p, harm=bool(self._statements))
        statements = [s.statement for s in self._statements
                      if s.statement not in reasons and s.state != "no harm"]
        ruled = ""
        if self._statements:
            statements.append("other buckets: " + summary(self._statements))
            ruled = ruled_out_for(p, [s.state for s in self._statements])
            if ruled:
                statements.append(ruled)
        return Verdict(
            decision=decision,
            target_bucket=self.target,
            reasons=[*reasons, *statements, method],
            test=method,
            suspected_regressions=sorted({s.bucket for s in self._statements
                                          if s.state != "no harm"}),
            target=compare_bucket(self.target, target, p) if target else None,
            stopped=stopped,
            looks=self.looks,
            trials_per_task=self.trials_per_task(self.visible),
            visible=compare_bucket(f"{self.target} (visible)", visible, p) if hidden else None,
            heldout=compare_bucket(f"{self.target} (held-out)", hidden, p) if hidden else None,
            heldout_tasks=sorted(self.heldout),
            buckets=[BucketVerdict(bucket=s.bucket, state=s.state, statement=s.statement)
                     for s in self._statements],
            ruled_out=ruled,
        )
