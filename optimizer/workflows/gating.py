"""Drive the sequential gate with real suite runs: the I/O half of `optimizer.gate.sequential`.

The gate says which trials to run (the candidate's trial indices per task, and the baseline's
past its cached trials); this module runs them through the caller's `run` function (the
runner, so the trial cache serves anything already paid for), pools them into the baseline and
candidate runs, pairs them per qualified bucket, and steps the gate until it returns a
verdict. `optimizer.gate.simulate.drive` answers the same requests in the calibration
benchmark; tests/optimizer/workflows/test_gating.py checks that both pay for the same trials.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optimizer.core.buckets import bucket_prefix
from optimizer.core.results import RunResult, pairing_label, pairing_text, seeded_pairing
from optimizer.core.suites import Suite
from optimizer.gate.compare import BucketComparison, GatePolicy
from optimizer.gate.pairing import Pair, merge_runs, pair_runs
from optimizer.gate.policy import Verdict
from optimizer.gate.sequential import SequentialGate, TaskKey, TrialRequest
from optimizer.workflows.paired import RunFn, compare_suite_runs

StageFn = Callable[[TrialRequest], None]


@dataclass(frozen=True)
class GateRun:
    """The verdict with the runs it was decided on (baseline pooled with its extensions)."""

    verdict: Verdict
    comparisons: list[BucketComparison]
    base_runs: list[RunResult]
    cand_runs: list[RunResult]
    trials_run: int
    """Trials actually run for the decision (served-from-cache trials excluded)."""
    seeded: bool = False
    """Every paired trial was sent the same seed on both sides (`results.seeded_pairing`)."""


def bucket_tasks(suites: Sequence[Suite]) -> tuple[dict[str, list[str]], dict[TaskKey, int]]:
    """Qualified bucket -> task ids, and each (bucket, task id) -> the index of its suite."""
    tasks: dict[str, list[str]] = {}
    where: dict[TaskKey, int] = {}
    for i, suite in enumerate(suites):
        prefix = bucket_prefix(suite.config.kind)
        for t in suite.tasks:
            tasks.setdefault(prefix + t.bucket, []).append(t.id)
            where[(prefix + t.bucket, t.id)] = i
    return tasks, where


def paired(base: Sequence[RunResult], cand: Sequence[RunResult | None]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for b, c in zip(base, cand, strict=True):
        if c is None:
            continue
        prefix = bucket_prefix(b.suite_kind)
        for bucket, pairs in pair_runs(b, c).items():
            out[prefix + bucket] = list(pairs)
    return out


def comparisons(base: Sequence[RunResult], cand: Sequence[RunResult | None],
                policy: GatePolicy) -> list[BucketComparison]:
    """Per-bucket comparisons (with the display interval) of every suite the candidate ran."""
    ran = [(b, c) for b, c in zip(base, cand, strict=True) if c is not None]
    return compare_suite_runs([b for b, _ in ran], [c for _, c in ran], policy)


async def run_gate(
    suites: Sequence[Suite],
    base_runs: Sequence[RunResult],
    prompts: tuple[str, str],
    target: str,
    policy: GatePolicy,
    run: RunFn,
    *,
    heldout: frozenset[str] = frozenset(),
    on_stage: StageFn | None = None,
) -> GateRun:
    """Evaluate the candidate prompt `prompts[1]` against the base `prompts[0]` sequentially."""
    tasks, where = bucket_tasks(suites)
    defaults = {key: base_runs[i].trials_per_task.get(key[1], 1) for key, i in where.items()}
    gate = SequentialGate(policy, target, tasks, defaults, heldout)
    base = list(base_runs)
    cand: list[RunResult | None] = [None] * len(suites)
    spent = 0
    step: TrialRequest | Verdict = gate.first()
    while isinstance(step, TrialRequest):
        if on_stage is not None:
            on_stage(step)
        for i, suite in enumerate(suites):
            extend = {t: ids for (b, t), ids in step.base.items() if where[(b, t)] == i}
            if extend:
                extra = await run(suite.select(task_ids=list(extend)), prompts[0],
                                  "gate base", extend)
                base[i] = merge_runs(base[i], extra)
                spent += sum(not t.cached for t in extra.trials)
            indices = {t: ids for (b, t), ids in step.indices.items() if where[(b, t)] == i}
            if indices:
                got = await run(suite.select(task_ids=list(indices)), prompts[1],
                                f"candidate ({step.stage})", indices)
                before = cand[i]
                cand[i] = got if before is None else merge_runs(before, got)
                spent += sum(not t.cached for t in got.trials)
        step = gate.step(paired(base, cand))
    ran = [i for i, c in enumerate(cand) if c is not None]
    base_ran, cand_ran = [base[i] for i in ran], [c for c in cand if c is not None]
    seeded = seeded_pairing(base_ran, cand_ran)
    verdict = step.model_copy(update={
        "model_trials": spent,
        "reasons": [*step.reasons, pairing_text(seeded)],
        "test": "; ".join(x for x in (step.test, pairing_label(seeded)) if x),
    })
    return GateRun(verdict, comparisons(base, cand, policy), base_ran, cand_ran, spent, seeded)
