"""Per-bucket trend across the runs of one suite: one small inline-SVG chart per bucket.

A capability suite exists to show a slope: the trial pass rate of each bucket as prompts and
models change. Only the lineage's prompts are plotted: eval runs, optimize baselines, review
bases and accepted candidates, never a rejected candidate or a review's head. Each chart plots
the bucket's trial pass rate in every run (oldest left; a gap where a run did not have the
bucket), a dashed least-squares line, and states the slope in percentage points per run.
Only the newest `limit` runs are read (each means opening a report; parsed summaries are
cached by the state folder).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from promptloop.optimizer.lifecycle.stats import slope
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.store import RunIndexEntry
from promptloop.optimizer.report.summary import RunSummary

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
ALL = "all trials"


@dataclass(frozen=True)
class Spark:
    """One bucket's chart: geometry for templates/view_trend.html.j2."""

    label: str
    values: tuple[float | None, ...]
    runs: tuple[str, ...]
    notes: tuple[str, ...]
    W: int = 320
    H: int = 96

    LEFT: ClassVar[int] = 34
    RIGHT: ClassVar[int] = 10
    TOP: ClassVar[int] = 8
    BOTTOM: ClassVar[int] = 16

    def x(self, i: float) -> float:
        span = self.W - self.LEFT - self.RIGHT
        n = len(self.values)
        return self.LEFT + (span * i / (n - 1) if n > 1 else span / 2)

    def y(self, v: float) -> float:
        return self.TOP + (1.0 - max(0.0, min(1.0, v))) * (self.H - self.TOP - self.BOTTOM)

    @property
    def points(self) -> list[tuple[float, float, str]]:
        """(x, y, tooltip) of every defined value."""
        return [(self.x(i), self.y(v), f"{self.runs[i]}: {fmt.pct(v)} ({self.notes[i]})")
                for i, v in enumerate(self.values) if v is not None]

    @property
    def lines(self) -> list[str]:
        """SVG polyline `points` attributes: one per unbroken stretch of values."""
        out: list[str] = []
        cur: list[str] = []
        for i, v in enumerate(self.values):
            if v is None:
                if len(cur) > 1:
                    out.append(" ".join(cur))
                cur = []
                continue
            cur.append(f"{self.x(i):.1f},{self.y(v):.1f}")
        if len(cur) > 1:
            out.append(" ".join(cur))
        return out

    @property
    def slope(self) -> float | None:
        return slope(self.values)

    @property
    def fit(self) -> tuple[float, float, float, float] | None:
        """The least-squares line from the first to the last run (clipped to 0..1)."""
        s = self.slope
        pts = [(i, v) for i, v in enumerate(self.values) if v is not None]
        if s is None:
            return None
        mx = sum(i for i, _ in pts) / len(pts)
        my = sum(v for _, v in pts) / len(pts)
        last = len(self.values) - 1
        return (self.x(0), self.y(my - s * mx), self.x(last), self.y(my + s * (last - mx)))

    @property
    def first(self) -> float | None:
        return next((v for v in self.values if v is not None), None)

    @property
    def last(self) -> float | None:
        return next((v for v in reversed(self.values) if v is not None), None)

    @property
    def slope_text(self) -> str:
        return fmt.slope(self.slope)

    @property
    def tone(self) -> str:
        return fmt.tone(self.slope)


@dataclass(frozen=True)
class TrendPage:
    suite: str
    runs: list[RunIndexEntry]
    total: int
    overall: Spark
    buckets: list[Spark]
    unreadable: int = 0
    """Runs of the window whose report is missing or unreadable (left out)."""


def suite_runs(entries: Sequence[RunIndexEntry], suite: str, limit: int) -> list[RunIndexEntry]:
    """The newest `limit` runs of `suite` on its lineage, oldest first: the runs of candidates
    (accepted ones too: not merged yet) and of review heads are left out
    (`RunIndexEntry.on_lineage`), and so are runs with no evidence of their own (replays,
    runs served wholly from the cache, runs whose every trial errored), as `health` leaves
    them out (`RunIndexEntry.new_evidence`)."""
    runs = sorted((e for e in entries if trended(e, suite)), key=lambda e: e.started_at)
    return runs[-limit:]


def trended(e: RunIndexEntry, suite: str) -> bool:
    """A run of `suite` the trend plots (`suite_runs`)."""
    return e.suite_name == suite and e.on_lineage and e.new_evidence


def trend_page(suite: str, runs: list[RunIndexEntry], summaries: Sequence[RunSummary],
               total: int, unreadable: int = 0) -> TrendPage:
    names = tuple(e.run_name for e in runs)
    overall = Spark(ALL, tuple(s.counted_trial_pass_rate for s in summaries), names,
                    tuple(f"{s.passed_trials}/{s.counted_trials} trials" for s in summaries),
                    W=760, H=150)
    buckets = sorted({b.bucket for s in summaries for b in s.buckets})
    sparks = []
    for name in buckets:
        values: list[float | None] = []
        notes: list[str] = []
        for s in summaries:
            b = next((x for x in s.buckets if x.bucket == name), None)
            values.append(b.trial_pass_rate if b else None)
            notes.append(f"{b.passed_trials}/{b.trials} trials" if b else "not in this run")
        sparks.append(Spark(name, tuple(values), names, tuple(notes)))
    return TrendPage(suite, runs, total, overall, sparks, unreadable)
