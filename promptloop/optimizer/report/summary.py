"""Aggregate a run into a `RunSummary`: task and trial pass rates, buckets, graders, pass@k.

Pure functions over `RunResult`. The summary's `task_pass_rate` / `trial_pass_rate` are the
original harness's (docs/compat.md; `original_rates`): every trial counts, an errored one is a
failed one, and with a threshold below 1.0 each trial (timed-out ones too: they are graded)
passes by its mean decided score. Ours stand beside them as `counted_task_pass_rate` /
`counted_trial_pass_rate` ("errored excluded"): errored and skipped trials (infrastructure, or a
bug in promptloop) leave the rate and are counted apart so a report can say so loudly, and a
trial passed only when it was graded passed (`graders.registry.trial_passed`; a timed-out trial
never). Per task and bucket the rates are ours. A failure caused by an exception that a tool or
outcome capture raised on what the agent did is a failed trial (`agent_error_trials` counts
them), never an errored one. The stored form lives in store.py; tables of it in table.py,
rendered by markdown.py, html/ and the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from pydantic import Field

from promptloop.graders.base import passes
from promptloop.optimizer.core.isolation import OUTSIDE, REFUSED_WRITE
from promptloop.optimizer.core.pricing import PriceOverrides
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.report.usage import (
    CamelModel as _Camel,
)
from promptloop.optimizer.report.usage import (
    CostSummary,
    UsageSummary,
    judge_usage_of,
    run_cost,
    spent_usage,
    usage_of,
)

SUMMARY_VERSION = 1
UNBUCKETED = "unbucketed"
__all__ = [
    "BucketSummary",
    "CostSummary",
    "GraderSummary",
    "OriginalRates",
    "PassAtK",
    "RunSummary",
    "TaskSummary",
    "UsageSummary",
    "bucket_of",
    "escaped",
    "failed_text",
    "original_rates",
    "original_task_passed",
    "original_trial_passed",
    "outside_text",
    "pass_at_k",
    "pass_hat_k",
    "spent_usage",
    "summarize",
    "task_order",
    "task_passed",
    "tried_outside",
    "wrote_outside",
]


class TaskSummary(_Camel):
    task_id: str
    bucket: str
    trials: int
    """Counted trials (passed, failed, timed out)."""
    passed_trials: int
    errored_trials: int
    passed: bool | None
    """None when no trial of the task counted (all errored or skipped)."""
    mean_score: float | None


class BucketSummary(_Camel):
    bucket: str
    tasks: int
    decided_tasks: int
    passed_tasks: int
    trials: int
    passed_trials: int
    errored_trials: int
    trial_pass_rate: float | None
    task_pass_rate: float | None
    mean_score: float | None


class GraderSummary(_Camel):
    grader: str
    scores: int
    decided: int
    passed: int
    mean: float | None
    """Mean of the non-null values."""
    pass_rate: float | None
    """Passed / decided."""


class PassAtK(_Camel):
    k: int
    pass_at_k: float
    pass_hat_k: float
    tasks: int


class OriginalRates(_Camel):
    """The original harness's aggregates (docs/compat.md), reported beside ours: every trial
    counts and an errored or skipped trial is simply not passed, so the rates are always
    numbers (0.0 for a run without tasks)."""

    passed_tasks: int
    task_pass_rate: float
    passed_trials: int
    trial_pass_rate: float
    pass_at_k: list[PassAtK] = Field(default_factory=list)
    """Per task over all its trials, averaged over tasks, for k up to the fewest trials."""
    grader_means: dict[str, float] = Field(default_factory=dict)
    """Grader name -> mean of its decided values over every trial (timed-out ones included)."""


class RunSummary(_Camel):
    version: int = SUMMARY_VERSION
    run_name: str
    suite_name: str
    suite_kind: str
    agent_name: str
    started_at: datetime
    ended_at: datetime
    task_pass_threshold: float
    num_tasks: int
    decided_tasks: int
    passed_tasks: int
    """Decided tasks that passed by our rule (errored trials excluded)."""
    task_pass_rate: float
    """The original's task pass rate (errored trials count as failed; docs/compat.md)."""
    counted_task_pass_rate: float | None
    """Ours, errored excluded: passed / decided tasks; None when no task was decided."""
    num_trials: int
    """Every trial of the run, errored ones included."""
    counted_trials: int
    passed_trials: int
    failed_trials: int
    """Failed trials, those failed by an exception the agent caused included."""
    agent_error_trials: int = 0
    """Failed trials whose tool or outcome capture raised on what the agent did."""
    outside_write_trials: int = 0
    """Errored trials that wrote outside their workspace (among `errored_trials`: the cause
    "wrote outside its workspace", optimizer/adapters/escape.py)."""
    timed_out_trials: int
    errored_trials: int
    """Infrastructure errors and bugs in promptloop: excluded from our rates."""
    skipped_trials: int
    cached_trials: int
    trial_pass_rate: float
    """The original's trial pass rate (every trial counts)."""
    counted_trial_pass_rate: float | None
    """Ours, errored excluded: passed / counted trials; None when no trial counted."""
    mean_score: float | None
    all_errored: bool
    infra_errors: dict[str, int] = Field(default_factory=dict)
    """Distinct infrastructure error messages -> number of trials."""
    tasks: list[TaskSummary] = Field(default_factory=list)
    buckets: list[BucketSummary] = Field(default_factory=list)
    graders: list[GraderSummary] = Field(default_factory=list)
    pass_at_k: list[PassAtK] = Field(default_factory=list)
    usage: UsageSummary = Field(default_factory=UsageSummary)
    judge_usage: UsageSummary = Field(default_factory=UsageSummary)
    cost: CostSummary
    original: OriginalRates
    """The same run aggregated as the original harness does (errored trials not excluded)."""


def failed_text(s: RunSummary) -> str:
    """`3 failed (1 by an agent error: the agent reported one, or a tool or outcome capture
    raised), 2 timed out`: a trial that ran out of time is counted as timed out, never as
    failed."""
    agent = (f" ({s.agent_error_trials} by an agent error: the agent reported one, or a tool or "
             "outcome capture raised)" if s.agent_error_trials else "")
    return f"{s.failed_trials} failed{agent}, {s.timed_out_trials} timed out"


def outside_text(s: RunSummary) -> str:
    """` (2 wrote outside its workspace)` after the errored count, when any did (else '')."""
    return (f" ({s.outside_write_trials} wrote outside its workspace)"
            if s.outside_write_trials else "")


def wrote_outside(t: TrialResult) -> bool:
    """Whether trial `t` is errored because it wrote outside its workspace (escape.py)."""
    return t.status == "errored" and OUTSIDE in (t.infra_error or "")


def tried_outside(t: TrialResult) -> bool:
    """Whether trial `t` is errored because its sandbox refused a write outside its workspace
    and the agent let that end the trial (adapters/runner.py): the gate treats it as a write
    (optimize rejects, review regresses), the summary does not count it as one."""
    return t.status == "errored" and REFUSED_WRITE in (t.infra_error or t.failure_reason or "")


def escaped(t: TrialResult) -> bool:
    """Whether trial `t` wrote outside its workspace or tried to and its sandbox refused it:
    what the gate holds against the prompt (optimize rejects, review regresses)."""
    return wrote_outside(t) or tried_outside(t)


# --- formulas --------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k); 0 when k > n."""
    if k < 1 or k > n or n <= 0:
        return 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k = (c/n)^k: the chance that k independent trials all pass; 0 when k > n."""
    if k < 1 or k > n or n <= 0:
        return 0.0
    return (c / n) ** k


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def task_passed(trials: Sequence[TrialResult], suite_kind: str) -> bool | None:
    """SPEC task pass over the counted trials; None when none counted.

    capability -> any trial passed; regression/mixed -> every trial passed. A threshold below
    1.0 is not applied here: it decides each trial's own pass when the trial is graded (SPEC
    section 8), and the kind's rule then combines the trials.
    """
    counted = [t for t in trials if t.counts]
    if not counted:
        return None
    if suite_kind == "capability":
        return any(t.passed for t in counted)
    return all(t.passed for t in counted)


def original_trial_passed(trial: TrialResult, threshold: float = 1.0) -> bool:
    """The original's trial pass (docs/compat.md): below a 1.0 threshold the mean of the
    trial's decided scores reaches it, whatever its status (a timed-out trial is graded, so it
    can pass); else the trial was graded passed. An errored trial is never passed."""
    if trial.status == "errored":
        return False
    if threshold < 1.0:
        decided = [s.value for s in trial.scores if s.value is not None]
        return bool(decided) and passes(sum(decided) / len(decided), threshold)
    return trial.passed


def original_task_passed(
    trials: Sequence[TrialResult], suite_kind: str, threshold: float = 1.0
) -> bool:
    """The original's task pass: the kind's rule over every trial (errored = not passed)."""
    if not trials:
        return False
    verdicts = [original_trial_passed(t, threshold) for t in trials]
    return any(verdicts) if suite_kind == "capability" else all(verdicts)


# --- aggregation -----------------------------------------------------------------------


def task_order(run: RunResult) -> list[str]:
    """The run's task ids in suite order, plus any trial task id the suite list misses."""
    order = list(run.task_ids)
    seen = set(order)
    for t in run.trials:
        if t.task_id not in seen:
            seen.add(t.task_id)
            order.append(t.task_id)
    return order


def bucket_of(run: RunResult, task_id: str) -> str:
    if task_id in run.task_buckets:
        return run.task_buckets[task_id]
    for t in run.trials:
        if t.task_id == task_id:
            return t.bucket
    return UNBUCKETED


def _task_summaries(run: RunResult) -> list[TaskSummary]:
    out = []
    for task_id in task_order(run):
        trials = run.trials_of(task_id)
        counted = [t for t in trials if t.counts]
        out.append(
            TaskSummary(
                task_id=task_id,
                bucket=bucket_of(run, task_id),
                trials=len(counted),
                passed_trials=sum(t.passed for t in counted),
                errored_trials=sum(t.status == "errored" for t in trials),
                passed=task_passed(trials, run.suite_kind),
                mean_score=_mean([t.score for t in counted]),
            )
        )
    return out


def _bucket_summaries(run: RunResult, tasks: Sequence[TaskSummary]) -> list[BucketSummary]:
    out = []
    for bucket in sorted({t.bucket for t in tasks}):
        mine = [t for t in tasks if t.bucket == bucket]
        ids = {t.task_id for t in mine}
        counted = [t for t in run.trials if t.task_id in ids and t.counts]
        decided = [t for t in mine if t.passed is not None]
        passed_tasks = sum(bool(t.passed) for t in decided)
        passed_trials = sum(t.passed for t in counted)
        out.append(
            BucketSummary(
                bucket=bucket,
                tasks=len(mine),
                decided_tasks=len(decided),
                passed_tasks=passed_tasks,
                trials=len(counted),
                passed_trials=passed_trials,
                errored_trials=sum(t.errored_trials for t in mine),
                trial_pass_rate=_rate(passed_trials, len(counted)),
                task_pass_rate=_rate(passed_tasks, len(decided)),
                mean_score=_mean([t.score for t in counted]),
            )
        )
    return out


def _grader_summaries(counted: Sequence[TrialResult]) -> list[GraderSummary]:
    by_name: dict[str, list[tuple[float | None, bool | None]]] = {}
    for trial in counted:
        for s in trial.scores:
            by_name.setdefault(s.grader, []).append((s.value, s.passed))
    out = []
    for name in sorted(by_name):
        entries = by_name[name]
        values = [v for v, _ in entries if v is not None]
        verdicts = [p for _, p in entries if p is not None]
        out.append(
            GraderSummary(
                grader=name,
                scores=len(entries),
                decided=len(values),
                passed=sum(verdicts),
                mean=_mean(values),
                pass_rate=_rate(sum(verdicts), len(verdicts)),
            )
        )
    return out


def _pass_at_k_table(per_task: Sequence[tuple[int, int]]) -> list[PassAtK]:
    """pass@k and pass^k averaged over tasks given (trials, passed) per task, only for k up to
    the fewest trials of a task (tasks without trials are left out)."""
    scored = [(n, c) for n, c in per_task if n > 0]
    if not scored:
        return []
    k_max = min(n for n, _ in scored)
    return [
        PassAtK(
            k=k,
            pass_at_k=sum(pass_at_k(n, c, k) for n, c in scored) / len(scored),
            pass_hat_k=sum(pass_hat_k(n, c, k) for n, c in scored) / len(scored),
            tasks=len(scored),
        )
        for k in range(1, k_max + 1)
    ]


def original_rates(run: RunResult) -> OriginalRates:
    """Aggregate `run` as the original harness does (docs/compat.md)."""
    order = task_order(run)
    th, kind = run.task_pass_threshold, run.suite_kind
    passed_tasks = sum(original_task_passed(run.trials_of(t), kind, th) for t in order)
    passed_trials = sum(original_trial_passed(t, th) for t in run.trials)
    values: dict[str, list[float]] = {}
    for trial in run.trials:
        for s in trial.scores:
            if s.value is not None:
                values.setdefault(s.grader, []).append(s.value)
    per_task = [(len(ts), sum(original_trial_passed(t, th) for t in ts))
                for ts in map(run.trials_of, order)]
    return OriginalRates(
        passed_tasks=passed_tasks,
        task_pass_rate=_rate(passed_tasks, len(order)) or 0.0,
        passed_trials=passed_trials,
        trial_pass_rate=_rate(passed_trials, len(run.trials)) or 0.0,
        pass_at_k=_pass_at_k_table(per_task),
        grader_means={name: sum(v) / len(v) for name, v in sorted(values.items())},
    )


def summarize(run: RunResult, *, prices: PriceOverrides | None = None) -> RunSummary:
    """Aggregate `run`; `prices` overrides or extends the built-in price table."""
    tasks = _task_summaries(run)
    counted = [t for t in run.trials if t.counts]
    decided = [t for t in tasks if t.passed is not None]
    passed_trials = sum(t.passed for t in counted)
    original = original_rates(run)
    infra: dict[str, int] = {}
    for t in run.trials:
        if t.status == "errored":
            msg = t.infra_error or t.failure_reason or "unknown error"
            infra[msg] = infra.get(msg, 0) + 1
    return RunSummary(
        run_name=run.run_name,
        suite_name=run.suite_name,
        suite_kind=run.suite_kind,
        agent_name=run.agent_name,
        started_at=run.started_at,
        ended_at=run.ended_at,
        task_pass_threshold=run.task_pass_threshold,
        num_tasks=len(tasks),
        decided_tasks=len(decided),
        passed_tasks=sum(bool(t.passed) for t in decided),
        task_pass_rate=original.task_pass_rate,
        counted_task_pass_rate=_rate(sum(bool(t.passed) for t in decided), len(decided)),
        num_trials=len(run.trials),
        counted_trials=len(counted),
        passed_trials=passed_trials,
        failed_trials=sum(t.status == "failed" for t in run.trials),
        agent_error_trials=sum(t.status == "failed" and bool(t.agent_error) for t in run.trials),
        outside_write_trials=sum(wrote_outside(t) for t in run.trials),
        timed_out_trials=sum(t.status == "timedOut" for t in run.trials),
        errored_trials=sum(t.status == "errored" for t in run.trials),
        skipped_trials=sum(t.status == "skipped" for t in run.trials),
        cached_trials=sum(t.cached for t in run.trials),
        trial_pass_rate=original.trial_pass_rate,
        counted_trial_pass_rate=_rate(passed_trials, len(counted)),
        mean_score=_mean([t.score for t in counted]),
        all_errored=run.all_errored,
        infra_errors=dict(sorted(infra.items(), key=lambda kv: (-kv[1], kv[0]))),
        tasks=tasks,
        buckets=_bucket_summaries(run, tasks),
        graders=_grader_summaries(counted),
        pass_at_k=_pass_at_k_table([(t.trials, t.passed_trials) for t in tasks]),
        usage=usage_of(run.trials)[0],
        judge_usage=judge_usage_of(run.trials)[0],
        cost=run_cost(run, prices),
        original=original,
    )
