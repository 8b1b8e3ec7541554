"""Gate calibration simulation: how often the gate keeps good patches and refuses noise.

A scripted agent population drives the real sequential gate (`optimizer.gate.sequential`).
The suite has 25 buckets: the target bucket (3 or 10 tasks) and 24 others of 3 tasks each.
Each non-target task passes under the base prompt with probability 0.8 (drawn once per
iteration: some tasks are simply hard); the target bucket's tasks fail (that is why it is the
target). Every trial's outcome is then flipped independently with probability `noise`, on each
side and each run, as sampled models do. Patches:

- good:  the rule fixes every task of the target bucket (held-out tasks included);
- broad: the rule fixes the target but hurts the others: every passing non-target task passes
  with probability 0.7 instead of 1 (a 30-point drop);
- narrow-broad (reported, not a must-hold): as broad, but only 3 of the 24 other buckets;
- null:  the patch changes nothing.

Per cell (noise x target size x patch kind) it runs N seeded iterations and reports the share
accepted, the mean trials run per decision (baseline extensions + candidate; the session's
cached baseline is not counted, as in the real loop) and that mean relative to "running both
suites twice at the default trials" (2 x tasks x 2 trials). The command-line front end is
bench/gate_calibration.py; the tests run a fast slice.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from optimizer.gate.compare import GatePolicy
from optimizer.gate.pairing import Pair
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest, heldout_tasks

KINDS = ("good", "broad", "narrow-broad", "null")
DEFAULT_TRIALS = 2
OTHER_BUCKETS = 24
OTHER_TASKS = 3


@dataclass
class World:
    """True pass probabilities of every task under base and candidate, plus the noise."""

    base_p: dict[TaskKey, float]
    cand_p: dict[TaskKey, float]
    noise: float
    rng: random.Random

    def outcome(self, key: TaskKey, side: str) -> bool:
        p = self.base_p[key] if side == "base" else self.cand_p[key]
        passed = self.rng.random() < p
        return (not passed) if self.rng.random() < self.noise else passed


def build_world(kind: str, target_tasks: int, noise: float, rng: random.Random
                ) -> tuple[dict[str, list[str]], World]:
    buckets: dict[str, list[str]] = {"target": [f"t{i}" for i in range(target_tasks)]}
    for n in range(OTHER_BUCKETS):
        buckets[f"b{n:02d}"] = [f"b{n:02d}-{i}" for i in range(OTHER_TASKS)]
    base_p: dict[TaskKey, float] = {}
    for b, tasks in buckets.items():
        for t in tasks:
            base_p[(b, t)] = 0.0 if b == "target" else (1.0 if rng.random() < 0.8 else 0.0)
    cand_p = dict(base_p)
    hurt = set(list(buckets)[1:]) if kind == "broad" else set(
        rng.sample(list(buckets)[1:], 3)) if kind == "narrow-broad" else set()
    for (b, t), p in base_p.items():
        if b == "target" and kind != "null":
            cand_p[(b, t)] = 1.0
        elif b in hurt and p == 1.0:
            cand_p[(b, t)] = 0.7
    return buckets, World(base_p, cand_p, noise, rng)


def run_iteration(kind: str, target_tasks: int, noise: float, seed: int,
                  policy: GatePolicy) -> tuple[Verdict, int]:
    rng = random.Random(seed)
    buckets, world = build_world(kind, target_tasks, noise, rng)
    results: dict[tuple[TaskKey, int, str], bool] = {}
    for b, tasks in buckets.items():  # the session baseline (cached, not counted)
        for t in tasks:
            for i in range(DEFAULT_TRIALS):
                results[((b, t), i, "base")] = world.outcome((b, t), "base")
    gate = SequentialGate(
        policy, "target", buckets,
        {(b, t): DEFAULT_TRIALS for b, ts in buckets.items() for t in ts},
        heldout_tasks(buckets["target"], policy, salt=str(seed)),
    )
    spent = 0
    step: TrialRequest | Verdict = gate.first()
    while isinstance(step, TrialRequest):
        for key, indices in step.indices.items():
            for i in indices:
                for side in step.sides:
                    if (key, i, side) not in results:
                        results[(key, i, side)] = world.outcome(key, side)
                        spent += 1
        step = gate.step(pairs_of(results))
    return step, spent


def pairs_of(results: dict[tuple[TaskKey, int, str], bool]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for (key, i, side), b_pass in results.items():
        if side != "base" or (key, i, "cand") not in results:
            continue
        c_pass = results[(key, i, "cand")]
        out.setdefault(key[0], []).append(
            Pair(key[1], i, float(b_pass), float(c_pass), b_pass, c_pass))
    return out


def run_cell(kind: str, target_tasks: int, noise: float, n: int, policy: GatePolicy
             ) -> dict[str, float]:
    accepted = inconclusive = 0
    spent_total = 0
    for k in range(n):
        seed = zlib.crc32(f"{kind}:{target_tasks}:{noise}:{k}".encode())
        verdict, spent = run_iteration(kind, target_tasks, noise, seed, policy)
        accepted += verdict.decision == "accept"
        inconclusive += verdict.decision == "inconclusive"
        spent_total += spent
    tasks = target_tasks + OTHER_BUCKETS * OTHER_TASKS
    reference = 2 * tasks * DEFAULT_TRIALS
    return {"accepted": accepted / n, "inconclusive": inconclusive / n,
            "mean_trials": spent_total / n, "cost_ratio": spent_total / n / reference}
