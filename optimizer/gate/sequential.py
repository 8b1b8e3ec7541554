"""The sequential gate: which trials to run next, and when a verdict is reached. Pure, no I/O.

One optimize iteration walks these stages, asking the caller to run trials between steps:

1. screen: the candidate runs the target bucket's tasks at the default trials (paired with the
   cached baseline). No pair improved -> reject without running anything else.
2. target: the one-sided sign-flip test on the target bucket's paired differences, at looks
   after each round; look j is tested at the alpha spent since look j-1 (Lan-DeMets spending,
   union bound), so peeking never inflates false accepts beyond `alpha`. Efficacy needs
   p <= the look's alpha AND mean gain >= `min_improvement`. Futility (mean gain <= 0) or
   `max_trials` per task stops with reject/inconclusive. Rounds add trials to the target's tasks
   only, on both sides (new trial indices, so pairs stay aligned).
3. rest (the sweep): the candidate runs every other task at `sweep_trials` trial(s), paired
   with the cached baseline. After each look the pooled differences of all other buckets are
   tested for harm with the anytime-valid sign-flip betting test (a rejection at the pooled
   test's share of the regression alpha rejects the patch), and sampling stops for lack of
   harm once Wald's likelihood ratio favours "no drop" over "a pooled drop of `harm_drop`" by
   1/`harm_beta`. Undecided -> one more trial for the least-sampled share (`sweep_share`) of
   the other buckets' tasks (baseline too, past its cached trials), up to `max_trials`.
4. confirm: every bucket's anytime-valid betting test and the pooled one form a weighted Holm
   family at `regression_alpha`; a rejection rejects the patch. A bucket whose mean dropped by
   `regression_tolerance` or more is a suspect: rounds of fresh trials on its tasks only, until
   its fresh trials stop falling or `max_trials`; a drop still past the margin on the fresh
   trials rejects.
5. held-out: the target's held-out tasks (never shown to the proposer) must not get worse.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from optimizer.gate.compare import BucketComparison, GatePolicy, compare_bucket, describe
from optimizer.gate.exact import look_alpha
from optimizer.gate.harm import POOLED, HarmEvidence, PooledLook, cleared, stands
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import Decision, Verdict

Side = Literal["base", "cand"]
Stage = Literal["screen", "target", "rest", "confirm", "done"]
TaskKey = tuple[str, str]
"""(bucket, task id): task ids may repeat across suites, bucket names never do."""
Pairs = Mapping[str, Sequence[Pair]]


@dataclass(frozen=True)
class TrialRequest:
    """Run these trials, then call `step` again with every pair collected so far."""

    indices: dict[TaskKey, list[int]]
    """Trial indices the candidate runs."""
    stage: Stage
    reason: str
    base: dict[TaskKey, list[int]] = field(default_factory=dict)
    """Trial indices the baseline runs: those of `indices` past its cached trials."""

    @property
    def sides(self) -> tuple[Side, ...]:
        return ("base", "cand") if self.base else ("cand",)


def heldout_tasks(task_ids: Sequence[str], policy: GatePolicy, salt: str = "") -> frozenset[str]:
    """The fixed, seeded share of a target bucket's tasks the proposer never sees."""
    if len(task_ids) < policy.heldout_min_tasks or policy.heldout_share <= 0:
        return frozenset()
    k = max(1, math.floor(len(task_ids) * policy.heldout_share))

    def rank(t: str) -> str:
        return hashlib.sha256(f"{policy.seed}:{salt}:{t}".encode()).hexdigest()

    return frozenset(sorted(task_ids, key=rank)[:k])


def method_text(policy: GatePolicy, tested: int) -> str:
    """The statistics of a gate verdict, named as in a methods section (the regression part
    only when the gate got that far: `tested` hypotheses)."""
    p = policy
    target = (f"tests: target improvement by a one-sided paired sign-flip permutation test "
              f"(exact) at alpha={p.alpha:g} spent over sequential looks ({p.spending})")
    if not tested:
        return target
    return (f"{target}; regression family of {tested} hypotheses (each other bucket + all of them "
            f"pooled) by anytime-valid sign-flip betting tests with weighted Holm at "
            f"alpha={p.regression_alpha:g} (pooled weight {p.pooled_weight:g}); the sweep "
            f"over the other buckets stops for lack of harm when Wald's ratio favours no "
            f"drop over a pooled drop of {p.harm_drop:g} by 1/{p.harm_beta:g}; a bucket drop "
            f"past {p.regression_tolerance:g} must survive confirmation on fresh trials")


@dataclass
class SequentialGate:
    """State of one iteration's gate. `first()` then `step(pairs)` until a Verdict comes back."""

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
    _cand_n: dict[TaskKey, int] = field(default_factory=dict)
    _base_n: dict[TaskKey, int] = field(default_factory=dict)
    _target_comp: BucketComparison | None = None
    _pairs: Pairs = field(default_factory=dict)
    _harm: HarmEvidence | None = None
    _pooled: PooledLook | None = None
    _suspects: dict[str, int] = field(default_factory=dict)
    """Suspect bucket -> trials per task when it became one (later trials are fresh)."""
    _cleared: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.target not in self.bucket_tasks:
            raise ValueError(f"target bucket {self.target!r} is not in the suites")
        for key in self._keys(list(self.bucket_tasks)):
            self._cand_n[key] = 0
            self._base_n[key] = self.default_trials[key]
        self._harm = HarmEvidence(self.policy)

    @property
    def others(self) -> list[str]:
        return [b for b in self.bucket_tasks if b != self.target]

    # --- requests -------------------------------------------------------------------------
    def _keys(self, buckets: Sequence[str]) -> list[TaskKey]:
        return [(b, t) for b in buckets for t in self.bucket_tasks[b]]

    def _request(self, keys: Sequence[TaskKey], trials: int, stage: Stage, reason: str
                 ) -> TrialRequest | None:
        """The next `trials` indices of each task (capped at `max_trials`); the baseline runs
        those past its cached trials. None when every task is at the cap (`max_trials`, or
        the cached trials when there are more)."""
        cand: dict[TaskKey, list[int]] = {}
        base: dict[TaskKey, list[int]] = {}
        for k in keys:
            start = self._cand_n[k]
            cap = max(self.policy.max_trials, self.default_trials[k])
            stop = min(start + trials, cap)
            if stop <= start:
                continue
            cand[k] = list(range(start, stop))
            extra = [i for i in cand[k] if i >= self._base_n[k]]
            if extra:
                base[k] = extra
                self._base_n[k] = stop
            self._cand_n[k] = stop
        return TrialRequest(cand, stage, reason, base) if cand else None

    def first(self) -> TrialRequest:
        keys = self._keys([self.target])
        n = max((self.default_trials[k] for k in keys), default=1)
        req = self._request(keys, n, "screen",
                            f"candidate on the target bucket {self.target!r} first")
        assert req is not None
        return req

    def _room(self, bucket: str) -> bool:
        return any(self._cand_n[k] < max(self.policy.max_trials, self.default_trials[k])
                   for k in self._keys([bucket]))

    def trials_per_task(self, bucket: str) -> int:
        return min((self._cand_n[k] for k in self._keys([bucket])), default=0)

    # --- the steps ------------------------------------------------------------------------
    def step(self, pairs: Pairs) -> TrialRequest | Verdict:
        """Advance with every pair collected so far (bucket -> pairs)."""
        self._pairs = pairs
        if self.stage == "screen":
            target = list(pairs.get(self.target, ()))
            if not any(p.diff > 0 for p in target):
                return self._verdict("reject", "screen",
                                     f"target bucket {self.target!r}: no trial improved in the "
                                     "first round, so the rest of the suite was not run")
            self.stage = "target"
        if self.stage == "target":
            return self._target_look(pairs)
        if self.stage == "rest":
            return self._sweep_look(pairs)
        return self._confirm_look(pairs)

    def _target_look(self, pairs: Pairs) -> TrialRequest | Verdict:
        p = self.policy
        comp = compare_bucket(self.target, pairs.get(self.target, ()), p, interval=False)
        self._target_comp = comp
        self.looks += 1
        n = self.trials_per_task(self.target)
        t = min(1.0, n / p.max_trials)
        a = look_alpha(t, self._t_before, p.alpha, p.spending)
        self._t_before = t
        delta = comp.delta if comp.delta is not None else 0.0
        significant = comp.p_improve <= a or not p.require_significant_improvement
        if delta >= p.min_improvement and significant:
            return self._start_sweep(f"target improved at look {self.looks} "
                                     f"(p={comp.p_improve:.3g} <= {a:.3g})")
        if delta <= 0:
            return self._verdict("reject", "futility",
                                 f"target bucket {self.target!r} did not improve: "
                                 f"{describe(comp)}")
        if n >= p.max_trials:
            decision: Decision = "reject" if delta < p.min_improvement else "inconclusive"
            return self._verdict(decision, "max trials",
                                 f"target bucket {self.target!r} undecided at {n} trials per "
                                 f"task (p={comp.p_improve:.3g} > look alpha {a:.3g}, needs "
                                 f"gain >= {p.min_improvement:g}): {describe(comp)}")
        req = self._request(self._keys([self.target]), p.round_trials, "target",
                            f"target promising but undecided at look {self.looks} "
                            f"(p={comp.p_improve:.3g} > {a:.3g}); adding trials")
        assert req is not None  # n < max_trials
        return req

    def _start_sweep(self, why: str) -> TrialRequest | Verdict:
        self.stage = "rest"
        keys = self._keys(self.others)
        n = min([self.policy.sweep_trials, *(self.default_trials[k] for k in keys)])
        req = self._request(keys, n, "rest",
                            f"{why}; every other bucket at {n} trial(s) per task first")
        if req is None:  # the target is the only bucket
            return self._heldout_check()
        return req

    def _sweep_look(self, pairs: Pairs) -> TrialRequest | Verdict:
        """Pooled harm (reject), no drop favoured (go on to the buckets), else sweep on."""
        assert self._harm is not None
        look = self._harm.look({b: pairs.get(b, ()) for b in self.others})
        self._pooled = look
        if self._harm.pooled_harm():
            return self._reject_regression([POOLED], "during the sweep")
        if look.log_ratio <= math.log(self.policy.harm_beta):
            self.stage = "confirm"
            return self._confirm_look(pairs)
        req = self._sweep_round(look)
        if req is not None:
            return req
        self.stage = "confirm"  # every other task at max_trials: the buckets decide
        return self._confirm_look(pairs, undecided=True)

    def _sweep_round(self, look: PooledLook) -> TrialRequest | None:
        """One more trial for the least-sampled buckets, `sweep_share` of the tasks."""
        p = self.policy
        open_ = [b for b in self.others if self._room(b)]
        open_.sort(key=self.trials_per_task)  # stable: suite order within equal counts
        want = math.ceil(p.sweep_share * len(self._keys(self.others)))
        chosen: list[str] = []
        for b in open_:
            if len(self._keys(chosen)) >= want:
                break
            chosen.append(b)
        return self._request(self._keys(chosen), 1, "rest",
                             f"harm to the other buckets undecided ({look.describe(p)}); "
                             "one more trial "
                             f"on {len(chosen)} bucket(s)")

    def _confirm_look(self, pairs: Pairs, undecided: bool = False) -> TrialRequest | Verdict:
        """The per-bucket family, suspects past the margin and their confirmation rounds."""
        assert self._harm is not None
        p = self.policy
        self._pooled = self._harm.look({b: pairs.get(b, ()) for b in self.others})
        significant = self._harm.family(self.others)
        if significant:
            return self._reject_regression(significant, "after the sweep")
        for b in self.others:
            diffs = [x.diff for x in pairs.get(b, ())]
            if (b not in self._suspects and diffs
                    and math.fsum(diffs) / len(diffs) <= -p.regression_tolerance + 1e-12):
                self._suspects[b] = self.trials_per_task(b)
        for b, since in self._suspects.items():
            if cleared(pairs.get(b, ()), since):
                self._cleared.add(b)
        open_ = [b for b in self._suspects if b not in self._cleared]
        req = self._request(self._keys(open_), p.round_trials, "confirm",
                            "confirming suspected regressions on fresh trials: "
                            + ", ".join(open_)) if open_ else None
        if req is not None:
            return req
        stood = [b for b in open_
                 if stands(pairs.get(b, ()), self._suspects[b], p.regression_tolerance)]
        if stood:
            return self._verdict("reject", "regression", *(
                f"bucket {b!r} dropped past the margin {p.regression_tolerance:g} and the drop "
                "survived confirmation: "
                f"{describe(compare_bucket(b, pairs.get(b, ()), p, interval=False))}"
                for b in stood))
        if undecided:
            assert self._pooled is not None
            return self._verdict("inconclusive", "max trials",
                                 "harm to the other buckets neither shown nor ruled out at "
                                 f"{p.max_trials} trials per task: all other buckets "
                                 f"together: {self._pooled.describe(p)}")
        return self._heldout_check()

    def _reject_regression(self, significant: Sequence[str], where: str) -> Verdict:
        p = self.policy
        assert self._harm is not None
        why = []
        for b in significant:
            if b == POOLED:
                assert self._pooled is not None
                why.append(f"all other buckets together regressed {where} (p <= alpha "
                           f"{p.regression_alpha:g} x weight {p.pooled_weight:g} of the pooled "
                           f"test): {self._pooled.describe(p)}")
            else:
                comp = compare_bucket(b, self._pairs.get(b, ()), p, interval=False)
                why.append(f"bucket {b!r} regressed {where} (betting test p="
                           f"{self._harm.p_bucket(b):.3g}, weighted Holm over "
                           f"{len(self.bucket_tasks)} tests at alpha={p.regression_alpha:g}): "
                           f"{describe(comp)}")
        if POOLED in significant:
            falling = [f"{b!r} ({c.delta:+.3f})" for b in self.others
                       for c in [compare_bucket(b, self._pairs.get(b, ()), p, interval=False)]
                       if c.delta is not None and c.delta < 0]
            if falling:
                why.append("buckets that fell: " + ", ".join(falling))
        return self._verdict("reject", "regression", *why)

    def _heldout_check(self) -> Verdict:
        target = self._pairs.get(self.target, ())
        hidden = [x for x in target if x.task_id in self.heldout]
        if hidden:
            comp = compare_bucket(f"{self.target} (held-out)", hidden, self.policy,
                                  interval=False)
            if comp.delta is not None and comp.delta < 0:
                return self._verdict("reject", "held-out",
                                     f"held-out tasks of {self.target!r} got worse (overfit to "
                                     f"the tasks the proposer saw): {describe(comp)}")
        assert self._target_comp is not None
        rest = (f"; all other buckets together: {self._pooled.describe(self.policy)}; no "
                "bucket regressed"
                if self._pooled is not None else "")
        return self._verdict("accept", "efficacy",
                             f"target bucket {self.target!r} improved: "
                             f"{describe(self._target_comp)}{rest}")

    def _verdict(self, decision: Decision, stopped: str, *reasons: str) -> Verdict:
        self.stage = "done"
        target = list(self._pairs.get(self.target, ()))
        p = self.policy
        visible = [x for x in target if x.task_id not in self.heldout]
        hidden = [x for x in target if x.task_id in self.heldout]
        tested = len(self.bucket_tasks) if self._pooled is not None else 0
        method = method_text(p, tested)
        return Verdict(
            decision=decision,
            target_bucket=self.target,
            reasons=[*reasons, method],
            test=method,
            suspected_regressions=list(self._suspects),
            target=compare_bucket(self.target, target, p) if target else None,
            stopped=stopped,
            looks=self.looks,
            trials_per_task=self.trials_per_task(self.target),
            visible=compare_bucket(f"{self.target} (visible)", visible, p) if hidden else None,
            heldout=compare_bucket(f"{self.target} (held-out)", hidden, p) if hidden else None,
            heldout_tasks=sorted(self.heldout),
        )
