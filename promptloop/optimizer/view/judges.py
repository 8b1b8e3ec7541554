"""Judge graders in the viewer: calibration pages, calibration badges and the labeling page.

A judge grader's calibration (`promptloop calibrate`, saved as `calibration/<grader>.json`) is
shown per dimension (Cohen's kappa, Krippendorff's alpha, mean absolute error) with its
confusion matrix at the pass threshold and the grader's state. Runs and comparisons show the
same state as a badge next to a judge's scores.

The labeling page lists the trials of one run that a judge scored (input, the agent's reply
and tool calls, the judge's per-dimension scores) with a choice of human grade per dimension.
The viewer is read-only (GET only), so the page never sends the labels anywhere: view.js builds
the labels file in the browser, in the JSONL format `promptloop calibrate --labels FILE` reads
(optimizer/lifecycle/labels.py), and offers it as a download.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from promptloop.graders.registry import get_grader, judge_graders
from promptloop.optimizer.core.project import active_project
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.lifecycle.calibration import (
    DEFAULT_LEVELS,
    CalibrationReport,
    CalibrationStatus,
    DimensionAgreement,
    status_of,
)
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.table import Cell, Column, Table
from promptloop.optimizer.view.render import href
from promptloop.optimizer.view.saved import STATE_LABELS, judge_status, status_from
from promptloop.optimizer.view.state import StateFolder

INPUT_CHARS = 1500
OUTPUT_CHARS = 1500


def state_label(status: CalibrationStatus) -> str:
    return STATE_LABELS.get(status.state, status.state)


def registered_judges() -> list[str]:
    """The judge graders this project's agents can name: the general ones and those of its
    agents (a team's page listed the bundled PKM agent's four judges as "uncalibrated")."""
    agents = set(active_project().agents)
    return [g for g in judge_graders()
            if (owner := get_grader(g).agent) is None or owner in agents]


# --- calibration pages --------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationRow:
    grader: str
    status: CalibrationStatus
    report: CalibrationReport | None
    problem: str = ""

    @property
    def label(self) -> str:
        return state_label(self.status)


def calibration_rows(state: StateFolder,
                     saved: dict[str, CalibrationReport | str]) -> list[CalibrationRow]:
    out = []
    for g in sorted(set(registered_judges()) | set(saved)):
        got = saved.get(g)
        problem = got if isinstance(got, str) else ""
        report = got if isinstance(got, CalibrationReport) else None
        status = status_from(g, report) if not problem else judge_status_without(g)
        out.append(CalibrationRow(g, status, report, problem))
    return out


def judge_status_without(grader: str) -> CalibrationStatus:
    """The status of a grader whose calibration file cannot be read: uncalibrated."""
    return status_of(None, grader)


@dataclass(frozen=True)
class Confusion:
    """The 2x2 confusion matrix of one dimension at the pass threshold."""

    d: DimensionAgreement

    @property
    def cells(self) -> list[tuple[str, int, int]]:
        """(human row label, judge pass, judge fail)."""
        c = self.d.confusion
        return [("human pass", c.both_pass, c.human_only_pass),
                ("human fail", c.judge_only_pass, c.both_fail)]


@dataclass(frozen=True)
class CalibrationPage:
    grader: str
    status: CalibrationStatus
    report: CalibrationReport | None
    confusions: list[Confusion]
    items: list[tuple[Any, str]]
    """(labelled item, link to the trial's page)."""

    @property
    def label(self) -> str:
        return state_label(self.status)


def calibration_page(state: StateFolder, grader: str,
                     report: CalibrationReport | None) -> CalibrationPage:
    status = status_from(grader, report)
    if report is None:
        return CalibrationPage(grader, status, None, [], [])
    dims = [report.overall, *report.dimensions]
    items = [(i, href("/trial", run=i.run_name, task=i.task_id, index=i.trial_index))
             for i in report.items]
    return CalibrationPage(grader, status, report, [Confusion(d) for d in dims], items)


def run_judges(state: StateFolder, runs: Sequence[RunResult]) -> list[CalibrationStatus]:
    """The calibration state of every judge grader that scored trials of `runs` (the badges
    of the run and compare pages), with the runs' judge model."""
    names = sorted({s.grader for r in runs for t in r.trials for s in t.scores})
    model = next((r.provenance.judge_model for r in runs if r.provenance.judge_model), None)
    statuses = [judge_status(state, g, model) for g in names]
    return [s for s in statuses if s.state != "not_a_judge"]


# --- the labeling page ---------------------------------------------------------------------


def trial_id(run: RunResult, t: TrialResult) -> str:
    """The trial id labels files use: `<runName>/<taskId>#<trialIndex>`."""
    return f"{run.run_name}/{t.task_id}#{t.trial_index}"


def _input(t: TrialResult) -> str:
    first = next((m.content for m in t.transcript.messages if m.role == "user"), "")
    return fmt.truncate(first, INPUT_CHARS)


def _output(t: TrialResult) -> str:
    reply = next((m.content for m in reversed(t.transcript.messages)
                  if m.role == "assistant" and m.content), "")
    return fmt.truncate(reply, OUTPUT_CHARS)


def _calls(t: TrialResult) -> list[str]:
    out = []
    for c in t.transcript.tool_calls:
        args = json.dumps(c.arguments, ensure_ascii=False, default=str)
        out.append(f"{c.tool_name}({fmt.truncate(args, 400)})"
                   + (" -> error" if c.is_error else ""))
    return out


@dataclass(frozen=True)
class LabelTrial:
    id: str
    trial: TrialResult
    link: str
    input: str
    output: str
    calls: list[str]
    judge: dict[str, float | None]
    value: float | None
    passed: bool | None
    rationale: str


@dataclass(frozen=True)
class LabelPage:
    grader: str
    run: RunResult
    dimensions: list[str]
    trials: list[LabelTrial]
    status: CalibrationStatus
    levels: tuple[float, ...]

    @property
    def data(self) -> dict[str, Any]:
        """What view.js reads (embedded as JSON, never executed)."""
        return {"grader": self.grader, "run": self.run.run_name,
                "dimensions": self.dimensions, "trials": [t.id for t in self.trials]}

    @property
    def file_name(self) -> str:
        return f"labels-{self.grader}.jsonl"

    @property
    def command(self) -> str:
        return f"promptloop calibrate --grader {self.grader} --labels {self.file_name}"


def grades(levels: int = DEFAULT_LEVELS) -> tuple[float, ...]:
    """The grades offered per dimension: the ordinal levels calibration rounds to."""
    return tuple(round(i / (levels - 1), 4) for i in range(levels))


def label_page(state: StateFolder, grader: str, run: RunResult) -> LabelPage:
    trials, dims = [], []
    for t in run.trials:
        score = next((s for s in t.scores if s.grader == grader), None)
        if score is None:
            continue
        stored = score.metadata.get("dimensions")
        judge = {str(k): v for k, v in stored.items()} if isinstance(stored, dict) else {}
        dims += [d for d in judge if d not in dims]
        trials.append(LabelTrial(
            id=trial_id(run, t), trial=t,
            link=href("/trial", run=run.run_name, task=t.task_id, index=t.trial_index),
            input=_input(t), output=_output(t), calls=_calls(t), judge=judge,
            value=score.value, passed=score.passed,
            rationale=fmt.truncate(score.rationale, 1200)))
    status = judge_status(state, grader, run.provenance.judge_model)
    return LabelPage(grader, run, dims or ["score"], trials, status, grades())


def with_calibration(table: Table, statuses: Sequence[CalibrationStatus]) -> Table:
    """A run's graders table with a Calibration column (judge graders only)."""
    by = {s.grader: s for s in statuses}
    rows = []
    for row in table.rows:
        s = by.get(str(row[0].value))
        cell = Cell("") if s is None else Cell(
            state_label(s), s.state, tone="up" if s.calibrated else "alert")
        rows.append((*row, cell))
    return Table((*table.columns, Column("calibration", "Calibration")), tuple(rows))
