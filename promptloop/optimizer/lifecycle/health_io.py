"""Suite health at the edges: build it from the run store, save and load it in the state
folder (`health/<suite>.json`, format `promptloop.health/1`) and render it as tables and
Markdown for the terminal and the nightly summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.lifecycle.calibration import load_calibrations
from promptloop.optimizer.lifecycle.errors import LifecycleError, NoLineageError
from promptloop.optimizer.lifecycle.files import safe_stem
from promptloop.optimizer.lifecycle.flaky import (
    AmbiguityPolicy,
    AmbiguousTask,
    flaky_tasks,
    grader_disagreements,
    human_disagreements,
)
from promptloop.optimizer.lifecycle.graduation import MANUAL, graduate_command
from promptloop.optimizer.lifecycle.health import (
    HEALTH_FORMAT,
    BucketHealth,
    HealthPolicy,
    SuiteHealth,
    Trend,
    compute_health,
)
from promptloop.optimizer.lifecycle.lineage import DEFAULT_WINDOW, load_lineage
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.markdown import cell, table_lines
from promptloop.optimizer.report.store import default_store_dir
from promptloop.optimizer.report.table import Cell, Column, Table

HEALTH_DIR = "health"


def health_path(state_dir: Path, suite_name: str) -> Path:
    return state_dir / HEALTH_DIR / f"{safe_stem(suite_name)}.json"


def build_health(state_dir: Path, suite_name: str, *, repo: Path | None = None,
                 ref: str = "HEAD", agent_model: str | None = None,
                 window: int = DEFAULT_WINDOW, any_prompt: bool = False,
                 policy: HealthPolicy | None = None,
                 ambiguity: AmbiguityPolicy | None = None) -> SuiteHealth:
    """Health of `suite_name` over its lineage in the store of `state_dir`, with the flaky
    and ambiguous tasks (human disagreements come from the saved calibrations)."""
    lineage = load_lineage(default_store_dir(state_dir), suite_name, repo=repo, ref=ref,
                           agent_model=agent_model, window=window, any_prompt=any_prompt)
    if not lineage.runs:
        excluded = ", ".join(f"{n} {why}" for why, n in lineage.excluded.items()) or "none"
        raise NoLineageError(f"no run of {suite_name} belongs to its lineage ({lineage.definition}"
                             f"); runs left out: {excluded}. Pass --any-prompt to drop the "
                             "prompt condition, or --model to pick another agent model")
    runs = list(lineage.runs)
    task_ids = {t for r in runs for t in r.task_ids}
    ambiguous: list[AmbiguousTask] = [*flaky_tasks(runs, ambiguity),
                                      *grader_disagreements(runs, ambiguity)]
    for report in load_calibrations(state_dir):
        items = [i for i in report.items if i.task_id in task_ids]
        ambiguous += human_disagreements(items, report.grader)
    return compute_health(lineage, policy, ambiguous)


def _apply(command: str) -> str:
    return f" ({command})." if command == MANUAL else f". Apply with `{command}`."


def save_health(state_dir: Path, health: SuiteHealth) -> Path:
    path = health_path(state_dir, health.suite_name)
    atomic_write_text(path, health.model_dump_json(indent=2) + "\n")
    return path


def refresh_health(state_dir: Path, suite_name: str, *, repo: Path | None = None,
                   window: int = DEFAULT_WINDOW) -> tuple[SuiteHealth, Path]:
    """Build and save the health of one suite (what nightly calls after its runs)."""
    health = build_health(state_dir, suite_name, repo=repo, window=window)
    return health, save_health(state_dir, health)


def load_health(state_dir: Path, suite_name: str) -> SuiteHealth | None:
    """The saved health of a suite, None when none was saved."""
    path = health_path(state_dir, suite_name)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SuiteHealth.model_validate(data)
    except (json.JSONDecodeError, ValidationError) as err:
        raise LifecycleError(f"{path}: not a valid {HEALTH_FORMAT} "
                             f"file: {err}") from err


# --- rendering -------------------------------------------------------------------------


def _trend_cell(t: Trend) -> Cell:
    if t.direction == "unknown":  # a line through two runs is no trend (lifecycle.md)
        return Cell(f"unknown ({t.runs} of 3 runs)", None)
    return Cell(fmt.slope(t.slope_per_run, t.low, t.high), t.slope_per_run,
                tone=fmt.tone(t.slope_per_run, t.low, t.high))


def bucket_table(buckets: Sequence[BucketHealth]) -> Table:
    columns = (Column("bucket", "Bucket"), Column("tasks", "Tasks", numeric=True),
               Column("trials", "Trials", numeric=True), Column("rate", "Pass rate", True),
               Column("trend", "Trend (95% CI)", True, nowrap=True),
               Column("mature", "Mature tasks", True),
               Column("streak", "Mature runs", True), Column("graduate", "Graduate?"))
    rows = tuple((
        Cell(b.bucket, b.bucket, code=True), Cell(str(len(b.task_ids)), len(b.task_ids)),
        Cell(str(b.trials), b.trials), Cell(fmt.pct(b.pass_rate), b.pass_rate, strong=b.mature),
        _trend_cell(b.trend), Cell(f"{b.mature_tasks}/{len(b.task_ids)}", b.mature_tasks),
        Cell(str(b.mature_streak), b.mature_streak),
        Cell("ready" if b.graduation_ready else "", b.graduation_ready,
             tone="up" if b.graduation_ready else ""),
    ) for b in buckets)
    return Table(columns, rows)


def ambiguous_table(items: Sequence[AmbiguousTask]) -> Table:
    return Table.of(["Task", "Bucket", "Signal", "Evidence"],
                    [[a.task_id, a.bucket, a.kind.replace("_", " "), a.summary] for a in items])


def headline(health: SuiteHealth) -> list[str]:
    s, lin = health.summary, health.lineage
    span = (f"{lin.runs[0].started_at:%Y-%m-%d} to {lin.runs[-1].started_at:%Y-%m-%d}"
            if lin.runs else "no runs")
    sat = "saturated" if s.saturated else "not saturated"
    return [
        f"Lineage: {len(lin.runs)} run(s), {span}: {lin.definition}.",
        f"{s.mature_tasks} of {s.tasks_with_trials} tasks with trials are mature "
        f"({fmt.pct(s.mature_share, 0)}); the suite is {sat} (at "
        f"{fmt.pct(health.policy.saturated, 0)}).",
    ]


def health_markdown(health: SuiteHealth, *, heading_level: int = 2,
                    max_evidence: int = 4) -> str:
    """The health of one suite as Markdown (a section for nightly summaries)."""
    h = "#" * heading_level
    s = health.summary
    lines = [f"{h} Suite health: `{health.suite_name}`", "", *headline(health), ""]
    lines += table_lines(bucket_table(health.buckets))
    if s.graduation_ready:
        lines += ["", f"Ready to graduate ({health.policy.graduation_runs} consecutive mature "
                  "runs): " + ", ".join(f"`{b}`" for b in s.graduation_ready)
                  + _apply(graduate_command(health.agent_name, "<bucket>"))]
    if s.stragglers:
        lines += ["", f"Stragglers (0% over >= {health.policy.straggler_trials} trials): "
                  + ", ".join(f"`{t}`" for t in s.stragglers)]
    if health.ambiguous:
        lines += ["", f"{h}# Ambiguous or flaky tasks ({len(health.ambiguous)})", ""]
        lines += table_lines(ambiguous_table(health.ambiguous))
        for a in health.ambiguous:
            lines += ["", f"`{a.task_id}` ({a.kind.replace('_', ' ')}):", ""]
            for row in a.evidence[:max_evidence]:
                cells = "; ".join(f"{k}: {cell(v)}" for k, v in row.cells.items())
                lines.append(f"- `{row.trial_id}` {row.status}: {cells}")
            if len(a.evidence) > max_evidence:
                lines.append(f"- ... {len(a.evidence) - max_evidence} more in the health JSON")
    return "\n".join(lines) + "\n"
