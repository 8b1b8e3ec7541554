"""Harm detection over every bucket, with no target: the gate `review` decides with. Pure.

A prompt PR under review has no target bucket: every task is a harm task. Both refs have
already run every task at the suite's trials when this starts, so the first look judges each
task on those trials against its own record (lineage history + the base ref's trials), with
exactly the rules of optimize's harm stage (`gate.tasks.judge_task`, `gate.harm`):

- each task: break, no harm or undecided (`tasks.judge_task`, the suite-wide drift
  estimated over all tasks and subtracted first, as optimize does);
- each bucket: "regressed", "no harm" or "harm not ruled out" (`harm.bucket_statement`), with
  the adaptive (aGRAPA) sign-flip betting tests of each bucket and of all buckets pooled in
  one weighted Holm family (`harm.HarmEvidence`, anytime-valid at every look);
- while a task is undecided and under `harm_max_trials`, a round adds up to `round_trials`
  head trials to it (at least `sweep_trials`, else the trials its clean path needs), and fresh
  base trials to a suspect (a task whose Bayes factor leans to harm) whose record is
  ambiguous (`tasks.classify`: shorter than `history_min` or too wide to decide against).

Efficacy, with optimize's test and looks (issue 31): every bucket with tasks that do not pass
on their record (under `PASSING` of the suite's passing rate, optimize's efficacy keys) is
tested for improvement by the one-sided exact stratified Fisher test of the head's passes
against each such task's own record, at `alpha` split over those buckets (Bonferroni) and
spent over looks (Lan-DeMets, `spending`), with a mean gain of at least `min_improvement`.
A bucket that gains but is not yet shown improved gets more head trials on those tasks (looks
at 2, 4, 8, 16, 24 trials per task, fresh base trials only where the record is thinner than
`history_min`); no gain once each task has `FUTILE_AFTER` trials stops it. The failing tasks of
an improved bucket leave harm detection, as the target's do in optimize.

`HarmOnlyGate.step(obs)` until a `HarmResult` comes back; the I/O loop is
`promptloop.optimizer.workflows.gating.run_harm`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from promptloop.optimizer.gate.compare import GatePolicy
from promptloop.optimizer.gate.exact import look_alpha, stratified_pvalue
from promptloop.optimizer.gate.harm import BucketHarm, HarmEvidence, bucket_statement, summary
from promptloop.optimizer.gate.pairing import Pair
from promptloop.optimizer.gate.policy import ruled_out_for
from promptloop.optimizer.gate.sequential import FUTILE_AFTER, PASSING, Observations, TrialAsk
from promptloop.optimizer.gate.tasks import (
    HarmScale,
    TaskFinding,
    TaskKey,
    TaskRecord,
    ambiguous,
    estimate_scale,
    judge_task,
)
from promptloop.optimizer.gate.verdict import HARM_ORDER, POOLED, BucketVerdict


@dataclass(frozen=True)
class HarmResult:
    """Every bucket's statement, and the pooled test's rejection."""

    statements: list[BucketHarm]
    pooled_rejected: bool
    pooled_p: float
    rounds: int
    stopped: str
    """"decided" (every bucket regressed or said no harm), "regressed" (a bucket regressed
    while others were still open: no more trials were spent) or "max trials"."""
    ruled_out: str = ""
    """What harm detection is built to rule out and what not (`policy.ruled_out_for`: only
    for the buckets that showed no harm)."""
    improved: list[str] = field(default_factory=list)
    """Buckets shown improved by the sequential efficacy test."""
    efficacy: list[str] = field(default_factory=list)
    """One sentence per improved bucket: its test, p-value, look and trials."""
    head_trials: int = 0
    """Head trials the decision read (the suite's trials and every trial the gate added)."""
    added_trials: int = 0
    """Head trials the gate added past the suite's trials."""

    @property
    def regressed(self) -> list[str]:
        out = [s.bucket for s in self.statements if s.state == "regressed"]
        return [*out, POOLED] if self.pooled_rejected else out

    @property
    def open(self) -> list[str]:
        return [s.bucket for s in self.statements if s.state == "harm not ruled out"]

    @property
    def buckets(self) -> list[BucketVerdict]:
        return [BucketVerdict(bucket=s.bucket, state=s.state, statement=s.statement)
                for s in self.statements]

    def reasons(self) -> list[str]:
        """Each bucket's statement (regressed and open ones first), then the pooled test."""
        out = [*self.efficacy]
        out += [s.statement for s in sorted(self.statements, key=lambda s: HARM_ORDER[s.state])]
        if self.pooled_rejected:
            out.append(f"all buckets together regressed (adaptive betting sign-flip test "
                       f"p={self.pooled_p:.3g}, weighted Holm)")
        if self.statements:
            out.append("harm detection: " + summary(self.statements))
        if self.ruled_out:
            out.append(self.ruled_out)
        out.append(f"decided on {self.head_trials} head trial(s) ({self.added_trials} added by "
                   f"the sequential gate over {self.rounds} look(s))")
        return out


@dataclass
class HarmOnlyGate:
    """Harm detection on every task of `bucket_tasks`; `ran[k]` = (base, head) trials of the
    task that already ran (indices 0..n-1 on each side)."""

    policy: GatePolicy
    bucket_tasks: Mapping[str, Sequence[str]]
    ran: Mapping[TaskKey, tuple[int, int]]
    rounds: int = 0
    _cand_n: dict[TaskKey, int] = field(default_factory=dict)
    _base_n: dict[TaskKey, int] = field(default_factory=dict)
    _evidence: HarmEvidence | None = None

    _scale: HarmScale = field(default_factory=HarmScale)
    _t_before: dict[str, float] = field(default_factory=dict)
    _improved: dict[str, str] = field(default_factory=dict)
    """Improved bucket -> the sentence that showed it."""
    _done: set[str] = field(default_factory=set)
    """Buckets whose efficacy test stopped (improved, futile or at the cap)."""
    _eff_keys: dict[str, list[TaskKey]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for k in self.keys:
            self._base_n[k], self._cand_n[k] = self.ran.get(k, (0, 0))
        self._evidence = HarmEvidence(self.policy)

    @property
    def keys(self) -> list[TaskKey]:
        return [(b, t) for b, ts in self.bucket_tasks.items() for t in ts]

    def _efficacy_keys(self, obs: Observations) -> dict[str, list[TaskKey]]:
        """Per bucket, its tasks that do not pass on their record (optimize's efficacy keys):
        the tasks an improvement is about."""
        ceiling = estimate_scale([obs.get(k, TaskRecord(k)) for k in self.keys],
                                 self.policy).ceiling
        out: dict[str, list[TaskKey]] = {}
        for b, ts in self.bucket_tasks.items():
            keys = []
            for t in ts:
                rec = obs.get((b, t))
                ref = rec.ref_passes if rec is not None else []
                if ref and sum(ref) / len(ref) < PASSING * ceiling:
                    keys.append((b, t))
            if keys:
                out[b] = keys
        return out

    def _efficacy(self, obs: Observations) -> dict[TaskKey, int]:
        """Look at every bucket under test; the head trials per task the next look needs."""
        p = self.policy
        if not self._eff_keys:
            self._eff_keys = self._efficacy_keys(obs)
        share = p.alpha / max(1, len(self._eff_keys))
        more: dict[TaskKey, int] = {}
        for b, keys in self._eff_keys.items():
            if b in self._done:
                continue
            strata, gains = [], []
            for k in keys:
                rec = obs.get(k)
                if rec is None:
                    continue
                r, n, c, m = rec.stratum()
                strata.append((r, n, c, m))
                if n and m:
                    gains.append(c / m - r / n)
            gain = math.fsum(gains) / len(gains) if gains else 0.0
            pval = stratified_pvalue(strata)
            trials = min((self._cand_n[k] for k in keys), default=0)
            t = min(1.0, trials / p.max_trials)
            a = look_alpha(t, self._t_before.get(b, 0.0), share, p.spending)
            self._t_before[b] = t
            ref_n, cand_n = sum(x[1] for x in strata), sum(x[3] for x in strata)
            moved = (f"pass rate {sum(x[0] for x in strata) / max(1, ref_n):.0%} over {ref_n} "
                     f"recorded trial(s) -> {sum(x[2] for x in strata) / max(1, cand_n):.0%} "
                     f"over {cand_n} head trial(s) of its {len(strata)} task(s) that did not "
                     f"pass on their record, mean gain {gain:+.3f}, stratified Fisher "
                     f"p={pval:.3g}")
            if gain >= p.min_improvement and pval <= a:
                self._improved[b] = (f"bucket {b!r} improved at look {self.rounds} ({moved} <= "
                                     f"{a:.3g}, alpha {p.alpha:g} over "
                                     f"{len(self._eff_keys)} bucket(s) under test)")
                self._done.add(b)
            elif (gain <= 0 and trials >= FUTILE_AFTER) or trials >= p.max_trials:
                self._done.add(b)
            elif gain > 0:
                for k in keys:
                    more[k] = max(p.round_trials, trials)
        return more

    def _findings(self, obs: Observations) -> dict[str, list[TaskFinding]]:
        records = [obs.get(k, TaskRecord(k)) for k in self.keys]
        self._scale = estimate_scale(records, self.policy)
        out: dict[str, list[TaskFinding]] = {b: [] for b in self.bucket_tasks}
        settled = {k for b in self._improved for k in self._eff_keys.get(b, ())}
        for k, rec in zip(self.keys, records, strict=True):
            if k in settled:
                continue
            out[k[0]].append(judge_task(replace(rec, shift=self._scale.drift_of(rec)),
                                        self.policy, self._scale))
        return out

    @staticmethod
    def _pairs(obs: Observations, keys: Sequence[TaskKey]) -> list[Pair]:
        return [p for k in keys if k in obs for p in obs[k].pairs()]

    def step(self, obs: Observations) -> TrialAsk | HarmResult:
        """Judge every task on the observations so far; more trials or the result."""
        assert self._evidence is not None
        p = self.policy
        self.rounds += 1
        more = self._efficacy(obs)
        by_bucket = self._findings(obs)
        self._evidence.look({b: self._pairs(obs, [f.key for f in fs])
                             for b, fs in by_bucket.items()})
        rejected = set(self._evidence.family(sorted(by_bucket)))
        statements = [bucket_statement(b, fs, self._evidence.p_bucket(b)
                                       if b in rejected else None, p)
                      for b, fs in by_bucket.items()]
        open_ = [f for s in statements if s.state == "harm not ruled out" for f in s.findings
                 if f.state == "undecided"]
        head = sum(self._cand_n.values())
        result = HarmResult(statements, POOLED in rejected, self._evidence.p_pooled(),
                            self.rounds, "regressed" if open_ else "decided",
                            ruled_out_for(p, [s.state for s in statements]),
                            sorted(self._improved),
                            [self._improved[b] for b in sorted(self._improved)], head,
                            head - sum(n for _, n in self.ran.values()))
        if result.regressed or (not open_ and not more):
            return result
        req = self._request(open_, obs, more)
        if req is not None:
            return req
        return replace(result, stopped="max trials" if open_ else "decided")

    def _request(self, open_: Sequence[TaskFinding], obs: Observations,
                 more: Mapping[TaskKey, int]) -> TrialAsk | None:
        p = self.policy
        cand: dict[TaskKey, list[int]] = {}
        base: dict[TaskKey, list[int]] = {}
        for k, n in more.items():  # efficacy: the bucket's failing tasks, looks doubling
            start = self._cand_n[k]
            stop = min(start + n, max(p.max_trials, self.ran.get(k, (0, 0))[1]))
            if stop <= start:
                continue
            cand[k] = list(range(start, stop))
            self._cand_n[k] = stop
            rec = obs.get(k)
            if rec is None or len(rec.ref_passes) < p.history_min:
                extra = [i for i in cand[k] if i >= self._base_n[k]]
                if extra:
                    base[k] = extra
                    self._base_n[k] = max(self._base_n[k], stop)
        for f in open_:
            if f.key in cand:
                continue
            k = f.key
            start = self._cand_n[k]
            n = min(p.round_trials, max(p.sweep_trials, f.need))
            stop = min(start + n, max(p.harm_max_trials, self.ran.get(k, (0, 0))[1]))
            if stop <= start:
                continue
            cand[k] = list(range(start, stop))
            self._cand_n[k] = stop
            rec = obs.get(k)
            thin = rec is None or ambiguous(rec, p, self._scale)
            if f.suspect and thin:
                extra = [i for i in cand[k] if i >= self._base_n[k]]
                if extra:
                    base[k] = extra
                    self._base_n[k] = max(self._base_n[k], stop)
        if not cand:
            return None
        names = ", ".join(k[1] for k in list(cand)[:8]) + (", ..." if len(cand) > 8 else "")
        what = "improvement or harm not yet decided" if more else "harm not yet ruled out"
        return TrialAsk(cand, "harm", f"{what} on {len(cand)} task(s): {names}", base)
