"""Suite health over a lineage (docs/compat.md): pass rates, trends, mature tasks and
buckets, stragglers, saturation, and buckets ready to graduate.

Rates are trial pass rates over the distinct counted trials of the window (errored and skipped
trials never count; a cached trial counts once, see lineage.py):
- a task or bucket is mature at a pass rate >= 0.95;
- a task is a straggler at 0.0 with >= 10 counted trials;
- a suite is saturated when >= 90% of its tasks with trials are mature;
- a bucket is ready to graduate after 5 consecutive mature runs: counted back from the
  newest, each is one command's runs (an optimize session's gate runs of a suspect task are
  part of its one run) covering every task of the bucket with fresh trials (commands that
  tried only some of them pool until they cover it) at a bucket pass rate >= 0.95.
The trend of a task or bucket is the OLS slope of its per-run pass rate over the runs that
hold fresh trials of it, with a 95% t-interval (needs 3 runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.lifecycle.flaky import AmbiguousTask
from promptloop.optimizer.lifecycle.lineage import (
    Lineage,
    distinct_trials,
    prompt_hash,
    session_groups,
)
from promptloop.optimizer.lifecycle.stats import ols_slope

HEALTH_FORMAT = "promptloop.health/1"


class HealthPolicy(BaseModel):
    mature: float = 0.95
    straggler_trials: int = 10
    saturated: float = 0.90
    graduation_runs: int = 5
    confidence: float = 0.95


class Trend(BaseModel):
    runs: int
    slope_per_run: float | None
    low: float | None
    high: float | None
    direction: str
    """improving | declining | flat | unknown (fewer than 3 runs)."""


class RunPoint(BaseModel):
    run_name: str
    started_at: datetime
    trials: int
    passed: int
    pass_rate: float
    mature: bool


RecordClass = Literal["reliable", "flaky", "failing", "ambiguous"]


def record_class(passed: int, trials: int, least: int = 10) -> RecordClass:
    """What a task's record tells the gate (as `gate.tasks.classify` does, at a passing rate
    of 1): "ambiguous" under `least` trials or with a posterior of its rate wider than 0.12
    (sd, Jeffreys' prior), "reliable" when its rate is at least 0.8 at 90% confidence,
    "failing" when it passes under half the time (it cannot lose half of a passing task's
    rate), else "flaky"."""
    if trials < least:
        return "ambiguous"
    a, b = passed + 0.5, trials - passed + 0.5
    mean = a / (a + b)
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    if mean - 1.2816 * sd >= 0.8:
        return "reliable"
    if mean < 0.5:
        return "failing"
    return "ambiguous" if sd > 0.12 else "flaky"


class TaskHealth(BaseModel):
    task_id: str
    bucket: str
    trials: int
    """The task's record length over the window (counted trials)."""
    passed: int
    pass_rate: float | None
    trend: Trend
    mature: bool
    straggler: bool
    record_class: RecordClass = "ambiguous"
    """reliable, flaky, failing or ambiguous (`record_class`)."""


class BucketHealth(BaseModel):
    bucket: str
    task_ids: list[str]
    trials: int
    passed: int
    pass_rate: float | None
    trend: Trend
    mature: bool
    mature_tasks: int
    series: list[RunPoint]
    """Per run of the window holding fresh trials of the bucket, oldest first."""
    mature_streak: int
    """Consecutive mature runs over the bucket, counted back from the newest: each is one
    command's runs covering every task of the bucket with fresh trials (`_streak`)."""
    graduation_ready: bool
    streak_runs: int | None = None
    """Points of `series` (one per command) the streak spans, the newest; None in files
    written before a command's runs were pooled (a saved run each)."""


class LineageRun(BaseModel):
    run_name: str
    started_at: datetime
    prompt_hash: str | None
    git_commit: str | None
    trials: int
    fresh_trials: int
    """Trials counted for this run (the others are cached copies of earlier runs' trials)."""


class LineageInfo(BaseModel):
    definition: str
    suite_name: str
    agent_model: str
    ref: str | None
    ref_commit: str | None
    any_prompt: bool
    prompt_versions: int | None
    window: int
    runs: list[LineageRun]
    excluded: dict[str, int]


class HealthSummary(BaseModel):
    tasks: int
    tasks_with_trials: int
    mature_tasks: int
    mature_share: float | None
    saturated: bool
    stragglers: list[str]
    graduation_ready: list[str]
    ambiguous_tasks: list[str]


class SuiteHealth(BaseModel):
    format: str = HEALTH_FORMAT
    generated_at: datetime
    suite_name: str
    suite_kind: str
    agent_name: str
    policy: HealthPolicy
    lineage: LineageInfo
    summary: HealthSummary
    tasks: list[TaskHealth]
    buckets: list[BucketHealth]
    ambiguous: list[AmbiguousTask] = Field(default_factory=list)


@dataclass(frozen=True)
class _Cell:
    trials: int = 0
    passed: int = 0

    def add(self, t: TrialResult) -> _Cell:
        return _Cell(self.trials + 1, self.passed + int(t.passed))

    @property
    def rate(self) -> float | None:
        return self.passed / self.trials if self.trials else None


def _trend(points: Sequence[float], confidence: float) -> Trend:
    s = ols_slope(points, confidence)
    return Trend(runs=s.n, slope_per_run=s.slope, low=s.low, high=s.high, direction=s.direction)


def _series(runs: Sequence[RunResult], owned: dict[str, list[TrialResult]],
            keep: set[str]) -> list[tuple[RunResult, _Cell]]:
    """One point per command that tried `keep` (its runs pooled: the gate's rounds on a
    suspect task are one evaluation, not a run each, and a trend over them is biased toward
    the suspects), named by its newest run."""
    out = []
    for group in session_groups(runs):
        cell = _Cell()
        for run in group:
            for t in owned.get(run.run_name, []):
                if t.task_id in keep:
                    cell = cell.add(t)
        if cell.trials:
            out.append((group[-1], cell))
    return out


def _streak(runs: Sequence[RunResult], owned: dict[str, list[TrialResult]], tasks: set[str],
            mature: float) -> tuple[int, int]:
    """(mature runs over the bucket, points of `_series` they span), counted back from the
    newest.

    One command's runs are one run here (`Provenance.session`: an optimize session's gate
    asks for fresh baseline trials of a suspect task in runs of their own, a profile or a
    review runs in rounds): five rounds of one session are one evaluation, not five. A run
    counted must cover every task of the bucket (`tasks`) with fresh trials; sessions that
    each tried only some of them (profile runs of a few tasks) pool, newest first, until
    they cover it. It is mature when its pooled pass rate is >= `mature`; the count stops at
    the first that is not, or when the newest stretch that has not covered the bucket yet
    already falls below it (a failure seen is not hidden by waiting for coverage)."""
    groups: list[list[TrialResult]] = []  # newest first: the trials of one command
    for group in reversed(session_groups(runs)):
        mine = [t for run in group for t in owned.get(run.run_name, []) if t.task_id in tasks]
        if mine:
            groups.append(mine)
    streak = spanned = pending = 0
    cell, covered = _Cell(), set[str]()
    for trials in groups:
        for t in trials:
            cell = cell.add(t)
        covered.update(t.task_id for t in trials)
        pending += 1
        if not tasks <= covered:
            continue
        if (cell.rate or 0.0) < mature:
            return streak, spanned
        streak, spanned, pending = streak + 1, spanned + pending, 0
        cell, covered = _Cell(), set()
    if streak == 0 and cell.trials and (cell.rate or 0.0) < mature:
        return 0, 0
    return streak, spanned


def _lineage_info(lineage: Lineage, owned: dict[str, list[TrialResult]]) -> LineageInfo:
    spec = lineage.spec
    return LineageInfo(
        definition=lineage.definition, suite_name=spec.suite_name,
        agent_model=lineage.agent_model, ref=spec.ref, ref_commit=spec.ref_commit,
        any_prompt=spec.prompt_hashes is None,
        prompt_versions=None if spec.prompt_hashes is None else len(spec.prompt_hashes),
        window=spec.window, excluded=dict(lineage.excluded),
        runs=[LineageRun(run_name=r.run_name, started_at=r.started_at,
                         prompt_hash=prompt_hash(r), git_commit=r.provenance.git_commit,
                         trials=len(r.trials), fresh_trials=len(owned.get(r.run_name, [])))
              for r in lineage.runs])


def _tasks(runs: Sequence[RunResult], owned: dict[str, list[TrialResult]],
           policy: HealthPolicy) -> list[TaskHealth]:
    latest = runs[-1]
    ids = list(dict.fromkeys([*latest.task_ids, *(t for r in runs for t in r.task_ids)]))
    buckets = {t: b for r in runs for t, b in r.task_buckets.items()}
    out = []
    for task in ids:
        series = _series(runs, owned, {task})
        total = _Cell(sum(c.trials for _, c in series), sum(c.passed for _, c in series))
        rate = total.rate
        out.append(TaskHealth(
            task_id=task, bucket=buckets.get(task, "unbucketed"), trials=total.trials,
            passed=total.passed, pass_rate=rate,
            trend=_trend([c.rate or 0.0 for _, c in series], policy.confidence),
            mature=rate is not None and rate >= policy.mature,
            straggler=rate == 0.0 and total.trials >= policy.straggler_trials,
            record_class=record_class(total.passed, total.trials)))
    return out


def _buckets(runs: Sequence[RunResult], owned: dict[str, list[TrialResult]],
             tasks: Sequence[TaskHealth], policy: HealthPolicy) -> list[BucketHealth]:
    names = list(dict.fromkeys(t.bucket for t in tasks))
    out = []
    for name in names:
        mine = [t for t in tasks if t.bucket == name]
        series = _series(runs, owned, {t.task_id for t in mine})
        points = [RunPoint(run_name=r.run_name, started_at=r.started_at, trials=c.trials,
                           passed=c.passed, pass_rate=c.rate or 0.0,
                           mature=(c.rate or 0.0) >= policy.mature) for r, c in series]
        trials, passed = sum(p.trials for p in points), sum(p.passed for p in points)
        rate = passed / trials if trials else None
        streak, spanned = _streak(runs, owned, {t.task_id for t in mine}, policy.mature)
        out.append(BucketHealth(
            bucket=name, task_ids=[t.task_id for t in mine], trials=trials, passed=passed,
            pass_rate=rate, trend=_trend([p.pass_rate for p in points], policy.confidence),
            mature=rate is not None and rate >= policy.mature,
            mature_tasks=sum(t.mature for t in mine), series=points, mature_streak=streak,
            streak_runs=spanned, graduation_ready=streak >= policy.graduation_runs))
    return out


def compute_health(lineage: Lineage, policy: HealthPolicy | None = None,
                   ambiguous: Sequence[AmbiguousTask] = (),
                   now: datetime | None = None) -> SuiteHealth:
    """The health of the lineage's suite (a pure function of its runs)."""
    policy = policy or HealthPolicy()
    runs = list(lineage.runs)
    if not runs:
        raise ValueError(f"the lineage of {lineage.spec.suite_name} holds no runs")
    owned: dict[str, list[TrialResult]] = {}
    for run, t in distinct_trials(runs):
        if t.counts:
            owned.setdefault(run.run_name, []).append(t)
    tasks = _tasks(runs, owned, policy)
    buckets = _buckets(runs, owned, tasks, policy)
    with_trials = [t for t in tasks if t.trials]
    mature = sum(t.mature for t in with_trials)
    share = mature / len(with_trials) if with_trials else None
    latest = runs[-1]
    return SuiteHealth(
        generated_at=now or datetime.now(UTC), suite_name=latest.suite_name,
        suite_kind=latest.suite_kind, agent_name=latest.agent_name, policy=policy,
        lineage=_lineage_info(lineage, owned),
        summary=HealthSummary(
            tasks=len(tasks), tasks_with_trials=len(with_trials), mature_tasks=mature,
            mature_share=share, saturated=share is not None and share >= policy.saturated,
            stragglers=[t.task_id for t in tasks if t.straggler],
            graduation_ready=[b.bucket for b in buckets if b.graduation_ready],
            ambiguous_tasks=sorted({a.task_id for a in ambiguous})),
        tasks=tasks, buckets=buckets, ambiguous=list(ambiguous))
