"""Aggregate a run into a `RunSummary`: task and trial pass rates, buckets, graders, pass@k.

Pure functions over `RunResult`. Errored and skipped trials never count toward a rate (an
infrastructure error is not an agent failure); they are counted separately so a report can
say so loudly. The stored form lives in store.py; tables of it in table.py, rendered by
markdown.py, html/ and the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agents.llm.types import Usage
from optimizer.core.pricing import CostEstimate, PriceOverrides, estimate_cost
from optimizer.core.results import RunResult, TrialResult

SUMMARY_VERSION = 1
UNBUCKETED = "unbucketed"


class _Camel(BaseModel):
    """Snake-case in Python, camelCase on disk (the SPEC report shape)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


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


class UsageSummary(_Camel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    retries: int = 0
    tool_calls: int = 0
    turns: int = 0


class CostSummary(_Camel):
    agent: CostEstimate
    judge: CostEstimate | None = None
    total_usd: float | None
    """All trials, including ones served from the cache (None if a price is unknown)."""
    spent_usd: float | None
    """Only trials actually run now (cached trials were paid for by an earlier run)."""
    notes: list[str] = Field(default_factory=list)


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
    task_pass_rate: float | None
    num_trials: int
    """Every trial of the run, errored ones included."""
    counted_trials: int
    passed_trials: int
    failed_trials: int
    timed_out_trials: int
    errored_trials: int
    skipped_trials: int
    cached_trials: int
    trial_pass_rate: float | None
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


def task_passed(trials: Sequence[TrialResult], suite_kind: str, threshold: float) -> bool | None:
    """SPEC task pass over the counted trials; None when none counted.

    capability -> any trial passed; regression/mixed -> every trial passed. A threshold below
    1.0 replaces that rule: the mean trial score (timed-out trials score 0) must reach it.
    """
    counted = [t for t in trials if t.counts]
    if not counted:
        return None
    if threshold < 1.0:
        mean = sum(t.score for t in counted) / len(counted)
        return mean + 1e-9 >= threshold
    if suite_kind == "capability":
        return any(t.passed for t in counted)
    return all(t.passed for t in counted)


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
                passed=task_passed(trials, run.suite_kind, run.task_pass_threshold),
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


def _pass_at_k_table(tasks: Sequence[TaskSummary]) -> list[PassAtK]:
    """pass@k and pass^k averaged over tasks, only for k up to the fewest counted trials."""
    scored = [t for t in tasks if t.trials > 0]
    if not scored:
        return []
    k_max = min(t.trials for t in scored)
    return [
        PassAtK(
            k=k,
            pass_at_k=sum(pass_at_k(t.trials, t.passed_trials, k) for t in scored) / len(scored),
            pass_hat_k=sum(pass_hat_k(t.trials, t.passed_trials, k) for t in scored) / len(scored),
            tasks=len(scored),
        )
        for k in range(1, k_max + 1)
    ]


def _usage_summary(total: Usage, **counts: int) -> UsageSummary:
    return UsageSummary(
        input_tokens=total.input_tokens,
        output_tokens=total.output_tokens,
        cache_read_tokens=total.cache_read_tokens,
        cache_write_tokens=total.cache_write_tokens,
        total_tokens=total.total_tokens,
        **counts,
    )


def _usage(trials: Sequence[TrialResult]) -> tuple[UsageSummary, Usage]:
    total = Usage()
    calls = retries = tools = turns = 0
    for t in trials:
        m = t.transcript.metrics
        total = total + m.usage
        calls += m.n_model_calls
        retries += m.n_retries
        tools += m.n_tool_calls
        turns += m.n_turns
    return _usage_summary(
        total, model_calls=calls, retries=retries, tool_calls=tools, turns=turns
    ), total


def _judge_usage(trials: Sequence[TrialResult]) -> tuple[UsageSummary, Usage]:
    """Judge tokens, from `Score.metadata["usage"]` (a Usage-shaped dict) when graders set it."""
    total = Usage()
    calls = 0
    for t in trials:
        for s in t.scores:
            raw = s.metadata.get("usage")
            if isinstance(raw, dict):
                known = {k: int(v) for k, v in raw.items() if k in Usage.model_fields}
                total = total + Usage(**known)
                calls += 1
    return _usage_summary(total, model_calls=calls), total


def spent_usage(trials: Sequence[TrialResult]) -> Usage:
    """Agent plus judge tokens of the trials actually run now (cached ones cost nothing)."""
    fresh = [t for t in trials if not t.cached]
    return _usage(fresh)[1] + _judge_usage(fresh)[1]


def _sum_usd(parts: Sequence[float | None]) -> float | None:
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _cost(run: RunResult, prices: PriceOverrides | None) -> CostSummary:
    prov = run.provenance
    fresh = [t for t in run.trials if not t.cached]
    agent_all = estimate_cost(prov.agent_model, _usage(run.trials)[1], prices)
    agent_new = estimate_cost(prov.agent_model, _usage(fresh)[1], prices)
    totals, spent = [agent_all.usd], [agent_new.usd]
    notes = [agent_all.note] if agent_all.note else []
    judge: CostEstimate | None = None
    judge_tokens = _judge_usage(run.trials)[1]
    if judge_tokens.total_tokens or judge_tokens.cache_read_tokens:
        judge = estimate_cost(prov.judge_model or "", judge_tokens, prices)
        totals.append(judge.usd)
        spent.append(estimate_cost(prov.judge_model or "", _judge_usage(fresh)[1], prices).usd)
        if judge.note:
            notes.append(judge.note)
    elif prov.judge_model:
        notes.append("judge tokens were not recorded by the graders; judge cost not included")
    return CostSummary(
        agent=agent_all,
        judge=judge,
        total_usd=_sum_usd(totals),
        spent_usd=_sum_usd(spent),
        notes=notes,
    )


def summarize(run: RunResult, *, prices: PriceOverrides | None = None) -> RunSummary:
    """Aggregate `run`; `prices` overrides or extends the built-in price table."""
    tasks = _task_summaries(run)
    counted = [t for t in run.trials if t.counts]
    decided = [t for t in tasks if t.passed is not None]
    passed_trials = sum(t.passed for t in counted)
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
        task_pass_rate=_rate(sum(bool(t.passed) for t in decided), len(decided)),
        num_trials=len(run.trials),
        counted_trials=len(counted),
        passed_trials=passed_trials,
        failed_trials=sum(t.status == "failed" for t in run.trials),
        timed_out_trials=sum(t.status == "timedOut" for t in run.trials),
        errored_trials=sum(t.status == "errored" for t in run.trials),
        skipped_trials=sum(t.status == "skipped" for t in run.trials),
        cached_trials=sum(t.cached for t in run.trials),
        trial_pass_rate=_rate(passed_trials, len(counted)),
        mean_score=_mean([t.score for t in counted]),
        all_errored=run.all_errored,
        infra_errors=dict(sorted(infra.items(), key=lambda kv: (-kv[1], kv[0]))),
        tasks=tasks,
        buckets=_bucket_summaries(run, tasks),
        graders=_grader_summaries(counted),
        pass_at_k=_pass_at_k_table(tasks),
        usage=_usage(run.trials)[0],
        judge_usage=_judge_usage(run.trials)[0],
        cost=_cost(run, prices),
    )
