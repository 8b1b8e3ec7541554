"""The table view-model: columns and rows of formatted cells, built once, rendered by every output.

`bucket_table` (a run's buckets, optionally against a base run) and `gate_table` (the paired
per-bucket comparison of the gate) own their columns, their number formats and what is
emphasised. The terminal (rich), Markdown (reports, PR bodies, review comments) and HTML
(templates) only lay the cells out, as pydantic-evals' `EvaluationReport.render(baseline=...)`
owns the comparison table for all its outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from promptloop.optimizer.gate.compare import BucketComparison
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.fmt import NA, Tone
from promptloop.optimizer.report.summary import BucketSummary, RunSummary


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    numeric: bool = False
    detail: bool = False
    """Supporting evidence an output short of room (a narrow terminal) may leave out."""
    short: str = ""
    """Abbreviated title for an output short of room ("" when `title` is short already)."""
    nowrap: bool = False
    """Cells that read as one value (a trend with its interval): a terminal never folds them."""

    @property
    def brief(self) -> str:
        return self.short or self.title


@dataclass(frozen=True)
class Cell:
    """One formatted value. `value` keeps the raw value (a bucket name for links)."""

    text: str
    value: Any = None
    tone: Tone = ""
    strong: bool = False
    """Emphasised (bold in Markdown and HTML, bright in the terminal)."""
    code: bool = False
    """An identifier: `code` in Markdown, monospace in HTML."""


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    quiet: frozenset[int] = frozenset()
    """Indices of rows that show no change (an unchanged bucket of a comparison): an output may
    list only the other rows and count these."""

    @classmethod
    def of(cls, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
        """A plain table: every value shown as `str(value)`."""
        return cls(
            tuple(Column(h.lower().replace(" ", "_"), h) for h in headers),
            tuple(tuple(Cell(str(v), v) for v in row) for row in rows),
        )

    @property
    def titles(self) -> list[str]:
        return [c.title for c in self.columns]

    def changed(self) -> Table:
        """The table without its quiet rows (`len(self.quiet)` says how many were left out)."""
        rows = tuple(r for i, r in enumerate(self.rows) if i not in self.quiet)
        return Table(self.columns, rows)


def _count(n: int, *, alert: bool = False) -> Cell:
    return Cell(str(n), n, tone="alert" if alert and n else "")


# --- a run's buckets --------------------------------------------------------------------


def _run_cells(b: BucketSummary | None) -> list[Cell]:
    if b is None:
        return [Cell("not in this run"), *(Cell(NA) for _ in range(5))]
    return [
        _count(b.tasks),
        _count(b.trials),
        Cell(fmt.pct(b.trial_pass_rate), b.trial_pass_rate),
        Cell(fmt.pct(b.task_pass_rate), b.task_pass_rate),
        Cell(fmt.num(b.mean_score), b.mean_score),
        _count(b.errored_trials, alert=True),
    ]


def _vs_cells(b: BucketSummary | None, o: BucketSummary | None) -> list[Cell]:
    new_rate, old_rate = (b.trial_pass_rate if b else None), (o.trial_pass_rate if o else None)
    new_mean, old_mean = (b.mean_score if b else None), (o.mean_score if o else None)
    return [
        Cell(fmt.pct(old_rate), old_rate),
        Cell(fmt.delta_pp(old_rate, new_rate), tone=fmt.trend(old_rate, new_rate)),
        Cell(fmt.num(old_mean), old_mean),
        Cell(fmt.delta(old_mean, new_mean), tone=fmt.trend(old_mean, new_mean)),
    ]


def bucket_table(summary: RunSummary, base: RunSummary | None = None) -> Table:
    """One row per bucket of the run (and of `base`): counts, pass rates, mean score, errors;
    with `base`, its trial pass rate and mean score and the change of each."""
    cols = [Column("bucket", "Bucket"), Column("tasks", "Tasks", True),
            Column("trials", "Trials", True),
            Column("trial_pass", "Trial pass", True, short="Trial%"),
            Column("task_pass", "Task pass", True, short="Task%"),
            Column("mean", "Mean score", True, short="Score"),
            Column("errored", "Errored", True, short="Err")]
    if base is not None:
        cols += [Column("base_pass", "Base pass", True, short="Base%"),
                 Column("pass_delta", "Δ pass", True, short="Δ%"),
                 Column("base_mean", "Base score", True, detail=True, short="Base"),
                 Column("mean_delta", "Δ score", True, short="Δ")]
    mine = {b.bucket: b for b in summary.buckets}
    theirs = {b.bucket: b for b in base.buckets} if base is not None else {}
    rows, quiet = [], set()
    for i, name in enumerate(sorted(mine.keys() | theirs.keys())):
        cells = [Cell(name, name, code=True), *_run_cells(mine.get(name))]
        if base is not None:
            cells += _vs_cells(mine.get(name), theirs.get(name))
            if _same(mine.get(name), theirs.get(name)):
                quiet.add(i)
        rows.append(tuple(cells))
    return Table(tuple(cols), tuple(rows), frozenset(quiet))


def _same(b: BucketSummary | None, o: BucketSummary | None) -> bool:
    """A bucket in both runs whose pass rate and mean score did not move."""
    if b is None or o is None:
        return False
    return (fmt.trend(o.trial_pass_rate, b.trial_pass_rate) == "same"
            and fmt.trend(o.mean_score, b.mean_score) == "same")


def grader_table(summary: RunSummary) -> Table:
    cols = (Column("grader", "Grader"), Column("decided", "Decided", True),
            Column("mean", "Mean", True), Column("pass_rate", "Pass rate", True),
            Column("null", "Null", True))
    rows = tuple(
        (Cell(g.grader, g.grader, code=True), _count(g.decided), Cell(fmt.num(g.mean), g.mean),
         Cell(fmt.pct(g.pass_rate), g.pass_rate), _count(g.scores - g.decided))
        for g in summary.graders
    )
    return Table(cols, rows)


def pass_k_table(summary: RunSummary) -> Table:
    cols = (Column("k", "k", True), Column("pass_at_k", "pass@k", True),
            Column("pass_hat_k", "pass^k", True))
    rows = tuple((_count(p.k), Cell(fmt.num(p.pass_at_k), p.pass_at_k),
                  Cell(fmt.num(p.pass_hat_k), p.pass_hat_k)) for p in summary.pass_at_k)
    return Table(cols, rows)


# --- the gate's paired comparison -------------------------------------------------------


class GateRow(BaseModel):
    """One bucket of the gate's comparison, raw values; the ledger stores these as dicts."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    bucket: str
    target: bool = False
    n: int = 0
    dropped: int = 0
    base_mean: float | None = None
    cand_mean: float | None = None
    delta: float | None = None
    confidence: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    base_pass_rate: float | None = None
    cand_pass_rate: float | None = None
    fixed: int = 0
    broken: int = 0
    p_value: float | None = None
    status: str = ""

    @classmethod
    def of(cls, c: BucketComparison, target: str | None = None) -> GateRow:
        return cls(
            bucket=c.bucket, target=c.bucket == target, n=c.n_pairs, dropped=c.n_dropped,
            base_mean=c.base_mean, cand_mean=c.cand_mean, delta=c.delta,
            confidence=c.confidence, ci_low=c.ci_low, ci_high=c.ci_high,
            base_pass_rate=c.base_pass_rate, cand_pass_rate=c.cand_pass_rate,
            fixed=c.fixed, broken=c.broken, p_value=c.p_value, status=c.status,
        )


def gate_rows(comparisons: Sequence[BucketComparison], target: str | None = None) -> list[GateRow]:
    """One row per bucket, plus a `missing` row for a target bucket with no comparison."""
    rows = [GateRow.of(c, target) for c in comparisons]
    if target is not None and all(c.bucket != target for c in comparisons):
        rows.append(GateRow(bucket=target, target=True, status="missing"))
    return rows


def verdict_table(
    comparisons: Sequence[BucketComparison], target: str | None
) -> list[dict[str, object]]:
    """`gate_rows` as plain dicts: the `verdict_table` of ledger entries and iterations."""
    return [r.model_dump() for r in gate_rows(comparisons, target)]


def _gate_cells(r: GateRow, with_target: bool, with_dropped: bool) -> tuple[Cell, ...]:
    tone: Tone = "down" if r.status == "regressed" else "up" if r.status == "improved" else ""
    cells = [Cell(r.bucket, r.bucket, code=True)]
    if with_target:
        cells.append(Cell("yes" if r.target else "", r.target))
    cells.append(_count(r.n))
    if with_dropped:
        cells.append(_count(r.dropped, alert=True))
    cells += [
        Cell(fmt.pct(r.base_pass_rate, 0), r.base_pass_rate),
        Cell(fmt.pct(r.cand_pass_rate, 0), r.cand_pass_rate),
        Cell(fmt.num(r.base_mean), r.base_mean),
        Cell(fmt.num(r.cand_mean), r.cand_mean),
        Cell(fmt.signed(r.delta), r.delta, tone=fmt.trend(0.0, r.delta)),
        Cell(fmt.interval(r.ci_low, r.ci_high)),
        Cell(f"{r.fixed}/{r.broken}"),
        Cell(fmt.p_value(r.p_value), r.p_value),
        Cell(r.status, r.status, tone=tone, strong=bool(tone)),
    ]
    return tuple(cells)


def gate_table(rows: Sequence[GateRow | Mapping[str, Any]], cand: str = "Cand") -> Table:
    """The gate's per-bucket table, candidate (`cand`, e.g. "Head" for a review) vs base on
    paired trials. Rows may be stored ledger dicts. A Target column appears when a row is
    the target, a Dropped one (pairs left out, e.g. errored trials) when a row dropped
    some; the CI column names its level when every row shares one. The interval is
    display-only (the gate decides on exact tests), so it is detail; unchanged buckets other
    than the target are quiet rows."""
    typed = [r if isinstance(r, GateRow) else GateRow.model_validate(r) for r in rows]
    with_target = any(r.target for r in typed)
    with_dropped = any(r.dropped for r in typed)
    levels = {r.confidence for r in typed if r.confidence is not None}
    ci = f"{round(levels.pop() * 100)}% CI" if len(levels) == 1 else "CI"
    cols = [Column("bucket", "Bucket")]
    if with_target:
        cols.append(Column("target", "Target", short="Tgt"))
    cols.append(Column("n", "n", True))
    if with_dropped:
        cols.append(Column("dropped", "Dropped", True, detail=True, short="Drop"))
    cols += [
        Column("base_pass", "Base pass", True, short="Base"),
        Column("cand_pass", f"{cand} pass", True, short=cand),
        Column("base_mean", "Base mean", True, detail=True, short="B.mean"),
        Column("cand_mean", f"{cand} mean", True, detail=True, short=f"{cand[0]}.mean"),
        Column("delta", "Delta", True, short="Δ"),
        Column("ci", ci, True, detail=True, short="CI"),
        Column("fixed_broken", "Fixed/Broken", True, short="F/B"),
        Column("p", "p", True), Column("status", "Status"),
    ]
    quiet = frozenset(i for i, r in enumerate(typed) if r.status == "unchanged" and not r.target)
    cells = tuple(_gate_cells(r, with_target, with_dropped) for r in typed)
    return Table(tuple(cols), cells, quiet)


def comparison_table(
    comparisons: Sequence[BucketComparison], target: str | None = None, cand: str = "Cand",
    harm: Mapping[str, str] | None = None,
) -> Table:
    """`gate_table` straight from the gate's comparisons. `harm` (review: bucket -> what the
    verdict decided for it) names a row the fixed-sample test left "inconclusive" by harm
    detection's finding ("no harm", "harm not ruled out"), and any row by a decision the
    verdict rests on ("regressed"; "improved" by review's sequential efficacy looks), so the
    table never says inconclusive, or no harm, where the verdict said otherwise."""
    said = dict(harm or {})

    def status(r: GateRow) -> str:
        s = said.get(r.bucket)
        if s in ("regressed", "improved"):
            return s
        if s in ("no harm", "harm not ruled out") and r.status == "inconclusive":
            return s
        return r.status

    rows = [r.model_copy(update={"status": status(r)}) for r in gate_rows(comparisons, target)]
    return gate_table(rows, cand)
