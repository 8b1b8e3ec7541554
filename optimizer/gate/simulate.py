"""Gate calibration simulation: how often the gate keeps good patches and refuses bad ones.

A scripted agent population drives the real sequential gate (`optimizer.gate.sequential`, the
state machine `optimizer.workflows.gating.run_gate` drives over real runs), answering its
trial requests the way the runner and its trial cache would. The suite has 25 buckets: the
target bucket (3 or 10 tasks) and 24 others of 3 tasks each. Each non-target task passes
under the base prompt with probability 0.8 (drawn once per iteration: some tasks are simply
hard); the target bucket's tasks fail (that is why it is the target). Every trial's outcome
is then flipped independently with probability `noise`, on each side and each run, as
sampled models do: the flipped outcome is the agent's real outcome, so a bucket's pass rate
is what its trials measure (0.8 at noise 0, 0.74 at 0.1, 0.68 at 0.2). Patches:

- good:  the rule fixes every task of the target bucket (held-out tasks included);
- broad: the rule fixes the target but hurts every other bucket: their measured pass rates
  drop by 30% of their value at every noise level (0.80 -> 0.56, 0.74 -> 0.52,
  0.68 -> 0.48), the tasks that passed losing what the bucket loses;
- broad-raw (reported, not a must-hold): the earlier definition, every passing task's
  noiseless pass probability 1 -> 0.7; after the noise that is a 30%, 26% and 21% drop of
  the measured pass rates at noise 0, 0.1 and 0.2;
- narrow-broad (reported, not a must-hold): as broad, but only 3 of the 24 other buckets;
- null:  the patch changes nothing.

Per cell (noise x target size x patch kind) it runs N seeded iterations and reports the
share accepted, the mean trials run per decision and that mean relative to "running both
suites twice at the default trials" (2 x tasks x 2 trials). Counted as the real loop pays:
every candidate trial and every baseline trial past the session's cached baseline, which the
optimize session evaluated once, before its first iteration (`Optimizer.run_baseline`) and
hands to every iteration's gate. Each iteration starts from that cache alone: nothing another
iteration ran is reused. The command-line front end is bench/gate_calibration.py; the tests
run a fast slice.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from optimizer.gate.compare import GatePolicy
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest, heldout_tasks

KINDS = ("good", "broad", "null", "broad-raw", "narrow-broad")
MUST_HOLD = ("good", "broad", "null")
DEFAULT_TRIALS = 2
OTHER_BUCKETS = 24
OTHER_TASKS = 3
PASS_SHARE = 0.8
"""Share of the non-target tasks that pass under the base prompt (before the noise)."""
HARM = 0.3
"""Relative drop of the measured pass rate of every bucket a broad patch hurts."""


def hurt_pass_probability(noise: float) -> float:
    """Noiseless pass probability of a passing task under a broad patch, such that its
    bucket's expected measured pass rate drops by HARM at this noise level."""
    before = PASS_SHARE * (1 - noise) + (1 - PASS_SHARE) * noise
    after_passing = ((1 - HARM) * before - (1 - PASS_SHARE) * noise) / PASS_SHARE
    return (after_passing - noise) / (1 - 2 * noise)


@dataclass
class World:
    """True pass probabilities of every task under base and candidate, plus the noise."""

    base_p: dict[TaskKey, float]
    cand_p: dict[TaskKey, float]
    noise: float
    rng: random.Random

    def outcome(self, key: TaskKey, index: int, side: str) -> bool:
        """A fresh draw (trials are independent; `index` only names the trial)."""
        p = self.base_p[key] if side == "base" else self.cand_p[key]
        passed = self.rng.random() < p
        return (not passed) if self.rng.random() < self.noise else passed


def build_world(kind: str, target_tasks: int, noise: float, rng: random.Random
                ) -> tuple[dict[str, list[str]], World]:
    if kind not in KINDS:
        raise ValueError(f"unknown patch kind {kind!r}; known: {', '.join(KINDS)}")
    buckets: dict[str, list[str]] = {"target": [f"t{i}" for i in range(target_tasks)]}
    for n in range(OTHER_BUCKETS):
        buckets[f"b{n:02d}"] = [f"b{n:02d}-{i}" for i in range(OTHER_TASKS)]
    base_p: dict[TaskKey, float] = {}
    for b, tasks in buckets.items():
        for t in tasks:
            passes = b != "target" and rng.random() < PASS_SHARE
            base_p[(b, t)] = 1.0 if passes else 0.0
    cand_p = dict(base_p)
    others = list(buckets)[1:]
    hurt = (set(others) if kind in ("broad", "broad-raw")
            else set(rng.sample(others, 3)) if kind == "narrow-broad" else set())
    hurt_p = 0.7 if kind == "broad-raw" else hurt_pass_probability(noise)
    for (b, t), p in base_p.items():
        if b == "target" and kind != "null":
            cand_p[(b, t)] = 1.0
        elif b in hurt and p == 1.0:
            cand_p[(b, t)] = hurt_p
    return buckets, World(base_p, cand_p, noise, rng)


Results = dict[tuple[TaskKey, int, str], bool]
Outcome = Callable[[TaskKey, int, str], bool]
"""(task, trial index, side "base" or "cand") -> whether that trial passes."""


def drive(gate: SequentialGate, outcome: Outcome) -> tuple[Verdict, int]:
    """Answer the gate's requests as `optimizer.workflows.gating.run_gate` does over real
    runs: the baseline's first `default_trials` trials exist before the gate starts (the
    session's cached baseline, not counted); every trial the gate asks for is run once and
    counted. Returns the verdict and the trials paid for."""
    results: Results = {(k, i, "base"): outcome(k, i, "base")
                        for k, n in gate.default_trials.items() for i in range(n)}
    spent = 0
    step: TrialRequest | Verdict = gate.first()
    while isinstance(step, TrialRequest):
        for side, wanted in (("base", step.base), ("cand", step.indices)):
            for key, indices in wanted.items():
                for i in indices:
                    if (key, i, side) in results:
                        raise AssertionError(f"the gate asked again for {key} #{i} ({side})")
                    results[(key, i, side)] = outcome(key, i, side)
                    spent += 1
        step = gate.step(pairs_of(results))
    return step, spent


def run_iteration(kind: str, target_tasks: int, noise: float, seed: int,
                  policy: GatePolicy) -> tuple[Verdict, int]:
    """One optimize iteration: the verdict and the trials it paid for."""
    rng = random.Random(seed)
    buckets, world = build_world(kind, target_tasks, noise, rng)
    gate = SequentialGate(
        policy, "target", buckets,
        {(b, t): DEFAULT_TRIALS for b, ts in buckets.items() for t in ts},
        heldout_tasks(buckets["target"], policy, salt=str(seed)),
    )
    return drive(gate, world.outcome)


def pairs_of(results: Results) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for (key, i, side), b_pass in results.items():
        if side != "base" or (key, i, "cand") not in results:
            continue
        c_pass = results[(key, i, "cand")]
        out.setdefault(key[0], []).append(
            Pair(key[1], i, float(b_pass), float(c_pass), b_pass, c_pass))
    return out


def reference_trials(target_tasks: int) -> int:
    """Running both suites twice (baseline and candidate) at the default trials."""
    return 2 * (target_tasks + OTHER_BUCKETS * OTHER_TASKS) * DEFAULT_TRIALS


def run_cell(kind: str, target_tasks: int, noise: float, n: int, policy: GatePolicy
             ) -> dict[str, float]:
    accepted = inconclusive = 0
    spent: list[int] = []
    for k in range(n):
        seed = zlib.crc32(f"{kind}:{target_tasks}:{noise}:{k}".encode())
        verdict, paid = run_iteration(kind, target_tasks, noise, seed, policy)
        accepted += verdict.decision == "accept"
        inconclusive += verdict.decision == "inconclusive"
        spent.append(paid)
    mean = sum(spent) / n
    return {"accepted": accepted / n, "inconclusive": inconclusive / n,
            "rejected": 1 - (accepted + inconclusive) / n,
            "mean_trials": mean, "max_trials": float(max(spent)),
            "cost_ratio": mean / reference_trials(target_tasks)}
