"""Suite health pages: the saved `health/<suite>.json` of each suite, read, never written.

`promptloop health --suite S` (and nightly after its runs) computes and saves a suite's health
(optimizer/lifecycle/health_io.py). The list shows every suite the state folder knows (from the
run index and the health folder) with its saved figures, or the command that saves them. A
suite's page shows per bucket the pass rate, the trend with its interval and a sparkline of the
per-run rates, the mature / straggler / saturated flags, graduation readiness (with the
`promptloop graduate` command for a ready capability bucket), and the flaky or ambiguous tasks
with their evidence, each trial linked to its transcript page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from promptloop.optimizer.lifecycle.flaky import AmbiguousTask, EvidenceRow
from promptloop.optimizer.lifecycle.graduation import Readiness, graduate_command, readiness
from promptloop.optimizer.lifecycle.health import BucketHealth, SuiteHealth, TaskHealth, Trend
from promptloop.optimizer.lifecycle.labels import parse_trial_id
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.store import RunIndexEntry
from promptloop.optimizer.view.render import href
from promptloop.optimizer.view.trend import Spark


def health_command(suite: str) -> str:
    return f"promptloop health --suite {suite}"


def trend_text(t: Trend) -> str:
    """`+2.5 pp/run [-1.0, +6.0]`, or why there is no slope."""
    if t.slope_per_run is None or t.direction == "unknown":
        return f"unknown ({t.runs} run(s); a trend needs 3)"
    return fmt.slope(t.slope_per_run, t.low, t.high)


def trend_tone(t: Trend) -> str:
    return fmt.tone(t.slope_per_run, t.low, t.high)


@dataclass(frozen=True)
class HealthRow:
    """One suite of the list."""

    suite: str
    runs: int
    newest: datetime | None
    health: SuiteHealth | None
    problem: str = ""
    stale: int = 0
    """Runs of the suite started after the newest run the saved health used."""

    @property
    def command(self) -> str:
        return health_command(self.suite)


def newer_runs(health: SuiteHealth, entries: Sequence[RunIndexEntry]) -> int:
    used = health.lineage.runs
    if not used:
        return 0
    last = max(r.started_at for r in used)
    # a run without a fresh counted trial (nightly's cached baseline, a server down) is never
    # in a health's window (lifecycle.lineage): refreshing could not take it in
    return sum(e.suite_name == health.suite_name and e.started_at > last
               and e.fresh_trials != 0 for e in entries)


def health_rows(entries: Sequence[RunIndexEntry],
                saved: dict[str, SuiteHealth | str]) -> list[HealthRow]:
    suites = sorted({e.suite_name for e in entries} | set(saved))
    out = []
    for s in suites:
        mine = [e for e in entries if e.suite_name == s]
        got = saved.get(s)
        health = got if isinstance(got, SuiteHealth) else None
        out.append(HealthRow(
            suite=s, runs=len(mine), newest=max((e.started_at for e in mine), default=None),
            health=health, problem=got if isinstance(got, str) else "",
            stale=newer_runs(health, entries) if health else 0))
    return out


@dataclass(frozen=True)
class Evidence:
    row: EvidenceRow
    link: str | None
    """The trial's page, when the trial id parses as `<run>/<task>#<index>`."""


def evidence(rows: Sequence[EvidenceRow]) -> list[Evidence]:
    out = []
    for r in rows:
        try:
            run, task, index = parse_trial_id(r.trial_id)
        except ValueError:
            out.append(Evidence(r, None))
            continue
        out.append(Evidence(r, href("/trial", run=run, task=task, index=index)))
    return out


@dataclass(frozen=True)
class AmbiguousView:
    a: AmbiguousTask
    rows: list[Evidence]

    @property
    def keys(self) -> list[str]:
        """The evidence columns, in the order the rows first name them."""
        return list(dict.fromkeys(k for e in self.rows for k in e.row.cells))


@dataclass(frozen=True)
class BucketView:
    b: BucketHealth
    spark: Spark
    ready: Readiness
    tasks: list[TaskHealth]
    stragglers: list[str]
    command: str | None
    """`promptloop graduate ...` when the bucket of a capability suite is ready."""

    @property
    def trend(self) -> str:
        return trend_text(self.b.trend)

    @property
    def tone(self) -> str:
        return trend_tone(self.b.trend)


def bucket_spark(b: BucketHealth) -> Spark:
    return Spark(b.bucket, tuple(p.pass_rate for p in b.series),
                 tuple(p.run_name for p in b.series),
                 tuple(f"{p.passed}/{p.trials} trials" + (", mature" if p.mature else "")
                       for p in b.series), W=240, H=72)


@dataclass(frozen=True)
class HealthPage:
    suite: str
    runs: int
    health: SuiteHealth | None
    stale: int = 0
    buckets: list[BucketView] = field(default_factory=list)
    ambiguous: list[AmbiguousView] = field(default_factory=list)

    @property
    def command(self) -> str:
        return health_command(self.suite)


def health_page(suite: str, health: SuiteHealth | None,
                entries: Sequence[RunIndexEntry]) -> HealthPage:
    runs = sum(e.suite_name == suite for e in entries)
    if health is None:
        return HealthPage(suite, runs, None)
    capability = health.suite_kind == "capability"
    views = []
    for b in health.buckets:
        tasks = [t for t in health.tasks if t.bucket == b.bucket]
        ready = readiness(health, b.bucket, b.task_ids)
        command = (graduate_command(health.agent_name, b.bucket)
                   if capability and ready.ready else None)
        views.append(BucketView(b, bucket_spark(b), ready, tasks,
                                [t.task_id for t in tasks if t.straggler], command))
    ambiguous = [AmbiguousView(a, evidence(a.evidence)) for a in health.ambiguous]
    return HealthPage(suite, runs, health, newer_runs(health, entries), views, ambiguous)
