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
3. rest: the candidate runs every other task at the default trials; the regression family
   (per-bucket + pooled tests, weighted Holm) runs. A significant regression rejects.
4. confirm: suspects (a drop past the practical margin, or an uncorrected p below
   `suspect_p`) get rounds of trials on both sides until cleared, significant, or at
   `max_trials`, where a drop still past the margin rejects.
5. held-out: the target's held-out tasks (never shown to the proposer) must not get worse.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from optimizer.gate.compare import BucketComparison, GatePolicy, compare_bucket, describe
from optimizer.gate.exact import holm, inverse_normal_combination, look_alpha
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import (
    POOLED,
    Decision,
    RegressionFindings,
    Verdict,
    method_text,
    regression_family,
)

Side = Literal["base", "cand"]
Stage = Literal["screen", "target", "rest", "confirm", "done"]
TaskKey = tuple[str, str]
"""(bucket, task id): task ids may repeat across suites, bucket names never do."""


@dataclass(frozen=True)
class TrialRequest:
    """Run these trial indices of these tasks on these sides, then call `step` again."""

    indices: dict[TaskKey, list[int]]
    sides: tuple[Side, ...]
    stage: Stage
    reason: str


def heldout_tasks(task_ids: Sequence[str], policy: GatePolicy, salt: str = "") -> frozenset[str]:
    """The fixed, seeded share of a target bucket's tasks the proposer never sees."""
    if len(task_ids) < policy.heldout_min_tasks or policy.heldout_share <= 0:
        return frozenset()
    k = max(1, math.floor(len(task_ids) * policy.heldout_share))

    def rank(t: str) -> str:
        return hashlib.sha256(f"{policy.seed}:{salt}:{t}".encode()).hexdigest()

    return frozenset(sorted(task_ids, key=rank)[:k])


@dataclass
class SequentialGate:
    """State of one iteration's gate. `first()` then `step(pairs)` until a Verdict comes back."""

    policy: GatePolicy
    target: str
    bucket_tasks: Mapping[str, Sequence[str]]
    """Every bucket (namespaced) -> its task ids, in suite order."""
    default_trials: Mapping[TaskKey, int]
    heldout: frozenset[str] = frozenset()
    stage: Stage = "screen"
    looks: int = 0
    _t_before: float = 0.0
    _next_index: dict[TaskKey, int] = field(default_factory=dict)
    _target_comp: BucketComparison | None = None
    _open: list[str] = field(default_factory=list)
    _stage1: dict[str, float] = field(default_factory=dict)
    _stage1_pooled: float = 1.0
    _past_margin: list[str] = field(default_factory=list)
    _suspects: list[str] = field(default_factory=list)
    _pairs: Mapping[str, Sequence[Pair]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target not in self.bucket_tasks:
            raise ValueError(f"target bucket {self.target!r} is not in the suites")
        for key, n in self.default_trials.items():
            self._next_index[key] = n

    # --- requests -------------------------------------------------------------------------
    def _keys(self, buckets: Sequence[str]) -> list[TaskKey]:
        return [(b, t) for b in buckets for t in self.bucket_tasks[b]]

    def _defaults(self, buckets: Sequence[str]) -> dict[TaskKey, list[int]]:
        return {k: list(range(self.default_trials[k])) for k in self._keys(buckets)}

    def _round(self, buckets: Sequence[str]) -> dict[TaskKey, list[int]]:
        out: dict[TaskKey, list[int]] = {}
        for k in self._keys(buckets):
            start = self._next_index[k]
            stop = min(start + self.policy.round_trials, self.policy.max_trials)
            if stop > start:
                out[k] = list(range(start, stop))
                self._next_index[k] = stop
        return out

    def first(self) -> TrialRequest:
        return TrialRequest(self._defaults([self.target]), ("cand",), "screen",
                            f"candidate on the target bucket {self.target!r} first")

    def trials_per_task(self, bucket: str) -> int:
        return min((self._next_index[k] for k in self._keys([bucket])), default=0)

    # --- the steps ------------------------------------------------------------------------
    def step(self, pairs: Mapping[str, Sequence[Pair]]) -> TrialRequest | Verdict:
        """Advance with every pair collected so far (bucket -> pairs)."""
        self._pairs = pairs
        if self.stage == "screen":
            target = list(pairs.get(self.target, ()))
            if not any(p.diff > 0 for p in target):
                return self._verdict("reject", "screen", pairs,
                                     f"target bucket {self.target!r}: no trial improved in the "
                                     "first round, so the rest of the suite was not run")
            self.stage = "target"
        if self.stage == "target":
            return self._target_look(pairs)
        return self._regressions(pairs)

    def _target_look(self, pairs: Mapping[str, Sequence[Pair]]) -> TrialRequest | Verdict:
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
            self.stage = "rest"
            rest = [b for b in self.bucket_tasks if b != self.target]
            return TrialRequest(self._defaults(rest), ("cand",), "rest",
                                f"target improved at look {self.looks} (p={comp.p_improve:.3g} "
                                f"<= {a:.3g}); checking every other bucket")
        if delta <= 0:
            return self._verdict("reject", "futility", pairs,
                                 f"target bucket {self.target!r} did not improve: "
                                 f"{describe(comp)}")
        if n >= p.max_trials:
            decision: Decision = "reject" if delta < p.min_improvement else "inconclusive"
            return self._verdict(decision, "max trials", pairs,
                                 f"target bucket {self.target!r} undecided at {n} trials per "
                                 f"task (p={comp.p_improve:.3g} > look alpha {a:.3g}, needs "
                                 f"gain >= {p.min_improvement:g}): {describe(comp)}")
        return TrialRequest(self._round([self.target]), ("base", "cand"), "target",
                            f"target promising but undecided at look {self.looks} "
                            f"(p={comp.p_improve:.3g} > {a:.3g}); adding trials")

    def _initial(self, pairs: Sequence[Pair], key_bucket: str) -> list[Pair]:
        return [x for x in pairs if x.trial_index < self.default_trials[(key_bucket, x.task_id)]]

    def _fresh(self, pairs: Sequence[Pair], key_bucket: str) -> list[Pair]:
        return [x for x in pairs if x.trial_index >= self.default_trials[(key_bucket, x.task_id)]]

    def _family(self, buckets: Sequence[str], pairs: Mapping[str, Sequence[Pair]],
                fresh: bool, policy: GatePolicy) -> tuple[list[BucketComparison],
                                                          RegressionFindings]:
        pick = self._fresh if fresh else self._initial
        data = {b: pick(pairs.get(b, ()), b) for b in buckets}
        comps = [compare_bucket(b, data[b], policy, interval=False) for b in buckets]
        pooled = [x for b in buckets for x in data[b]]
        return comps, regression_family(comps, pooled, policy)

    def _regressions(self, pairs: Mapping[str, Sequence[Pair]]) -> TrialRequest | Verdict:
        """A two-stage adaptive design. Stage 1: the regression family on the default trials,
        at half the regression alpha. Suspects (and, when the pooled test is suspicious, every
        falling bucket) get fresh trials in rounds; a bucket whose fresh trials do not fall
        stops early. Stage 2: each stage's one-sided p-values are combined by the inverse-
        normal method with equal, fixed weights (valid whatever was selected in stage 1) and
        the family is tested again at the other half."""
        p = self.policy
        others = [b for b in self.bucket_tasks if b != self.target]
        half = p.model_copy(update={"regression_alpha": p.regression_alpha / 2})
        if self.stage == "rest":
            comps, fam = self._family(others, pairs, fresh=False, policy=half)
            if fam.significant:
                return self._reject_regression(comps, fam, "on the default trials")
            falling = [c.bucket for c in comps if c.delta is not None and c.delta < 0]
            pooled_suspect = fam.pooled is not None and fam.pooled.p_regress <= p.pooled_suspect_p
            self._suspects = sorted(set(fam.suspects) | (set(falling) if pooled_suspect
                                                          else set()))
            self._open = list(self._suspects)
            self._past_margin = list(fam.past_margin)
            self._stage1 = {c.bucket: c.p_regress for c in comps}
            if fam.pooled is not None:
                self._stage1_pooled = fam.pooled.p_regress
        else:
            fresh = {b: self._fresh(pairs.get(b, ()), b) for b in self._open}
            self._open = [b for b in self._open if _falling(fresh[b])]
        open_ = [b for b in self._open if self.trials_per_task(b) < p.max_trials]
        if open_:
            self.stage = "confirm"
            return TrialRequest(self._round(open_), ("base", "cand"), "confirm",
                                "confirming suspected regressions on fresh trials: "
                                + ", ".join(open_))
        if self._suspects:
            verdict = self._stage2(pairs, half)
            if verdict is not None:
                return verdict
        return self._heldout_check(pairs)

    def _stage2(self, pairs: Mapping[str, Sequence[Pair]], half: GatePolicy) -> Verdict | None:
        comps, _ = self._family(self._suspects, pairs, fresh=True, policy=half)
        combined = [c.model_copy(update={"p_regress": inverse_normal_combination(
            self._stage1[c.bucket], c.p_regress)}) for c in comps]
        pooled_fresh = [x for b in self._suspects for x in self._fresh(pairs.get(b, ()), b)]
        pooled = compare_bucket(POOLED, pooled_fresh, half, interval=False)
        p_pool = inverse_normal_combination(self._stage1_pooled, pooled.p_regress)
        names = [c.bucket for c in combined] + [POOLED]
        share = (1.0 - half.pooled_weight) / max(1, len(self.bucket_tasks) - 1)
        weights = [share] * len(combined) + [half.pooled_weight]
        rejected = holm([c.p_regress for c in combined] + [p_pool], half.regression_alpha,
                        weights)
        stood = self._margin_stands(pairs)
        if not any(rejected):
            if not stood:
                return None
            return self._verdict("reject", "regression", {}, *(
                f"bucket {b!r} dropped past the margin {half.regression_tolerance:g} and the "
                "drop survived confirmation: "
                f"{describe(compare_bucket(b, pairs.get(b, ()), half, interval=False))}"
                for b in stood),
                suspects=self._suspects)
        fam2 = RegressionFindings(significant=[n for n, r in zip(names, rejected, strict=True)
                                               if r],
                                  pooled=pooled.model_copy(update={"p_regress": p_pool}),
                                  tested=len(names))
        return self._reject_regression(combined, fam2, "after confirmation (inverse-normal "
                                       "combination of both stages)")

    def _margin_stands(self, pairs: Mapping[str, Sequence[Pair]]) -> list[str]:
        """Suspects past the margin whose drop is still past it on the fresh trials (or, when
        no fresh trial could be added, on all of them)."""
        margin = self.policy.regression_tolerance
        out = []
        for b in self._past_margin:
            data = self._fresh(pairs.get(b, ()), b) or list(pairs.get(b, ()))
            if data and sum(x.diff for x in data) / len(data) <= -margin + 1e-12:
                out.append(b)
        return out

    def _reject_regression(self, comps: Sequence[BucketComparison], fam: RegressionFindings,
                           where: str) -> Verdict:
        by_name = {c.bucket: c for c in comps}
        why = []
        for b in fam.significant:
            comp = by_name.get(b, fam.pooled)
            what = "all other buckets together" if b == POOLED else f"bucket {b!r}"
            why.append(f"{what} regressed {where} (weighted Holm over {fam.tested} tests at "
                       f"alpha={self.policy.regression_alpha:g}): "
                       f"{describe(comp) if comp else ''}")
        falling = [f"{c.bucket} ({c.delta:+.3f})" for c in comps
                   if c.delta is not None and c.delta < 0]
        if POOLED in fam.significant and falling:
            why.append("buckets that fell: " + ", ".join(falling))
        return self._verdict("reject", "regression", {}, *why, suspects=self._suspects)

    def _heldout_check(self, pairs: Mapping[str, Sequence[Pair]]) -> Verdict:
        target = pairs.get(self.target, ())
        hidden = [x for x in target if x.task_id in self.heldout]
        if hidden:
            comp = compare_bucket(f"{self.target} (held-out)", hidden, self.policy,
                                  interval=False)
            if comp.delta is not None and comp.delta < 0:
                return self._verdict("reject", "held-out", pairs,
                                     f"held-out tasks of {self.target!r} got worse (overfit to "
                                     f"the tasks the proposer saw): {describe(comp)}")
        assert self._target_comp is not None
        return self._verdict("accept", "efficacy", pairs,
                             f"target bucket {self.target!r} improved: "
                             f"{describe(self._target_comp)}; no bucket regressed")

    def _verdict(self, decision: Decision, stopped: str,
                 pairs: Mapping[str, Sequence[Pair]], *reasons: str,
                 suspects: Sequence[str] = ()) -> Verdict:
        self.stage = "done"
        target = list(self._pairs.get(self.target, ()))
        p = self.policy
        visible = [x for x in target if x.task_id not in self.heldout]
        hidden = [x for x in target if x.task_id in self.heldout]
        tested = len(self.bucket_tasks) if stopped in ("regression", "efficacy", "held-out") else 0
        method = method_text(p, tested)
        return Verdict(
            decision=decision,
            target_bucket=self.target,
            reasons=[*reasons, method],
            test=method,
            suspected_regressions=[s for s in suspects if s != POOLED],
            target=compare_bucket(self.target, target, p) if target else None,
            stopped=stopped,
            looks=self.looks,
            trials_per_task=self.trials_per_task(self.target),
            visible=compare_bucket(f"{self.target} (visible)", visible, p) if hidden else None,
            heldout=compare_bucket(f"{self.target} (held-out)", hidden, p) if hidden else None,
            heldout_tasks=sorted(self.heldout),
        )


def _falling(pairs: Sequence[Pair]) -> bool:
    """A suspect stays open until its fresh trials stop falling on average (cost only: the
    stage-2 test uses every fresh trial collected, whenever sampling stopped)."""
    return not pairs or sum(x.diff for x in pairs) < 0
