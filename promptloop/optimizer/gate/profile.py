"""Which tasks' records to grow with extra baseline trials, ranked by value. Pure, no I/O.

The record (lineage history + baseline trials) is the gate's binding constraint: a dozen trials
cannot tell "a flaky task, unchanged" from "a reliable task, half broken", so the gate pays
for it with fresh baseline trials or ends a task at its cap. `promptloop profile` spends a
budget of baseline trials ahead of time where they change future decisions most:

- the value of a task's record is the uncertainty of the one question harm detection asks of
  it: can the task lose the drop (`tasks.pass_drop`)? That is the binary entropy of the
  posterior mass of its pass rate above the drop (`exact.rate_above`), in bits: 0 for a
  task that surely passes reliably or surely fails, 1 for a coin flip;
- a record shorter than `history_min` is worth at least 1 (ambiguous by length alone);
- trials go in chunks of `chunk` to the task of highest value per trial, the value of the
  next chunk taken as the entropy times the share of the record the chunk would add
  (diminishing returns on a record that is already long), until the budget is spent; among
  tasks of equal value the one whose bucket got the fewest trials so far goes first (a small
  budget spread over buckets, not spent on the first bucket of the file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptloop.optimizer.gate.exact import rate_above
from promptloop.optimizer.gate.policy import GatePolicy
from promptloop.optimizer.gate.tasks import (
    HarmScale,
    TaskKey,
    TaskRecord,
    classify,
    estimate_scale,
    pass_drop,
)

MIN_BITS = 0.05
"""A record this decided (under 1% doubt whether the task can lose the drop) gets nothing."""


@dataclass(frozen=True)
class ProfilePick:
    key: TaskKey
    trials: int
    """Extra baseline trials to run."""
    value: float
    """Bits of uncertainty about "can this task lose the drop" before the extra trials."""
    record: int
    """Trials in its record now."""
    record_class: str
    """reliable, flaky, failing or ambiguous (`tasks.classify`)."""


def record_value(rec: TaskRecord, policy: GatePolicy, scale: HarmScale) -> float:
    """Bits of uncertainty about whether the task can lose the drop (see the module)."""
    ref = rec.ref_passes
    if not ref:
        return 1.0
    mass = rate_above(sum(ref), len(ref), pass_drop(policy, scale))
    bits = 0.0 if mass <= 0.0 or mass >= 1.0 else -(mass * math.log2(mass)
                                                      + (1 - mass) * math.log2(1 - mass))
    if len(ref) < policy.history_min:
        bits = max(bits, 1.0)
    return bits


def plan(records: Mapping[TaskKey, TaskRecord] | Sequence[TaskRecord], policy: GatePolicy,
         budget: int, chunk: int = 2) -> list[ProfilePick]:
    """Spend `budget` extra baseline trials over the tasks, most valuable first; the picks
    in order of value (tasks worth nothing get none)."""
    recs = list(records.values()) if isinstance(records, Mapping) else list(records)
    scale = estimate_scale(recs, policy)
    value = {r.key: record_value(r, policy, scale) for r in recs}
    size = {r.key: len(r.ref_passes) for r in recs}
    given = dict.fromkeys(value, 0)
    to_bucket: dict[str, int] = {}
    left = max(0, budget)
    while left > 0:
        def gain(k: TaskKey) -> tuple[float, int]:
            have = size[k] + given[k]
            return round(value[k] * chunk / (have + chunk), 9), -to_bucket.get(k[0], 0)

        best = max((k for k in value if value[k] > MIN_BITS), key=gain, default=None)
        if best is None:
            break
        step = min(chunk, left)
        given[best] += step
        to_bucket[best[0]] = to_bucket.get(best[0], 0) + step
        left -= step
    out = [ProfilePick(r.key, given[r.key], value[r.key], size[r.key],
                       classify(r, policy, scale)) for r in recs if given[r.key]]
    return sorted(out, key=lambda p: (-p.value, p.key))
