"""Pairing of baseline and candidate trials: same task, same trial index. Pure, no I/O.

A task that is hard for both prompts cancels out of a paired difference, which is what makes
the exact paired tests of `optimizer.gate.exact` powerful at a handful of trials. Errored or
skipped trials are infrastructure, not evidence: their pairs are dropped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptloop.optimizer.core.results import RunResult, TrialResult


@dataclass(frozen=True)
class Pair:
    """One task trial run under both prompts (same task id, same trial index)."""

    task_id: str
    trial_index: int
    base_score: float
    cand_score: float
    base_passed: bool
    cand_passed: bool

    @property
    def diff(self) -> float:
        return self.cand_score - self.base_score


class PairedBuckets(dict[str, list[Pair]]):
    """Pairs per bucket; `dropped` counts per bucket the pairs lost to errored/skipped trials."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: dict[str, int] = {}





def _bucket_of(run: RunResult, trial: TrialResult) -> str:
    return run.task_buckets.get(trial.task_id, trial.bucket)


def _index(run: RunResult) -> dict[tuple[str, int], TrialResult]:
    out: dict[tuple[str, int], TrialResult] = {}
    for t in run.trials:
        key = (t.task_id, t.trial_index)
        if key in out:
            raise ValueError(f"run {run.run_name} has two trials for task {t.task_id} "
                             f"index {t.trial_index}")
        out[key] = t
    return out


def pair_runs(
    base: RunResult, cand: RunResult, buckets: set[str] | None = None
) -> PairedBuckets:
    """Pair trials present in both runs, grouped by bucket (optionally only `buckets`).

    A bucket appears when at least one of its tasks has trials on both sides, even if every
    pair was then dropped (so the gate can say "no evidence" instead of silently skipping it).
    A task filed under different buckets by the two runs means different suites: ValueError.
    """
    base_ix, cand_ix = _index(base), _index(cand)
    base_tasks = {t.task_id: _bucket_of(base, t) for t in base.trials}
    cand_tasks = {t.task_id: _bucket_of(cand, t) for t in cand.trials}
    base_indices: dict[str, list[int]] = {}
    for tid, index in base_ix:
        base_indices.setdefault(tid, []).append(index)
    out = PairedBuckets()
    for task_id in sorted(base_tasks.keys() & cand_tasks.keys()):
        bucket = base_tasks[task_id]
        if cand_tasks[task_id] != bucket:
            raise ValueError(f"task {task_id} is in bucket {bucket!r} in the base run but "
                             f"{cand_tasks[task_id]!r} in the candidate: not the same suite")
        if buckets is not None and bucket not in buckets:
            continue
        pairs = out.setdefault(bucket, [])
        out.dropped.setdefault(bucket, 0)
        for index in sorted(base_indices[task_id]):
            b, c = base_ix[(task_id, index)], cand_ix.get((task_id, index))
            if c is None:
                continue
            if not (b.counts and c.counts):
                out.dropped[bucket] += 1
                continue
            pairs.append(Pair(task_id, index, b.score, c.score, b.passed, c.passed))
    return out





def merge_runs(a: RunResult, extra: RunResult) -> RunResult:
    """`a` plus the trials of `extra` (new trial indices from a confirmation rerun).

    Nothing is replaced: a (task, trial index) present in both runs is a ValueError, as is
    merging runs of different suites or agents.
    """
    if (a.suite_name, a.agent_name) != (extra.suite_name, extra.agent_name):
        raise ValueError(f"cannot merge run of {extra.suite_name}/{extra.agent_name} into "
                         f"{a.suite_name}/{a.agent_name}")
    clash = sorted(_index(a).keys() & _index(extra).keys())
    if clash:
        shown = ", ".join(f"{tid}#{i}" for tid, i in clash[:5])
        raise ValueError(f"confirmation trials reuse existing trial indices: {shown}")
    for task_id, bucket in extra.task_buckets.items():
        if a.task_buckets.get(task_id, bucket) != bucket:
            raise ValueError(f"task {task_id} changed bucket between the runs")
    added: dict[str, int] = {}
    for t in extra.trials:
        added[t.task_id] = added.get(t.task_id, 0) + 1
    known = set(a.task_ids)
    task_ids = [*a.task_ids, *(t for t in extra.task_ids if t not in known)]
    per_task = dict(a.trials_per_task)
    for task_id, n in added.items():
        per_task[task_id] = per_task.get(task_id, 0) + n
    return a.model_copy(update={
        "task_ids": task_ids,
        "task_buckets": {**extra.task_buckets, **a.task_buckets},
        "trials_per_task": per_task,
        "started_at": min(a.started_at, extra.started_at),
        "ended_at": max(a.ended_at, extra.ended_at),
        "trials": [*a.trials, *extra.trials],
    })
