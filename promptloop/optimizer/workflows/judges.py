"""Judge calibration where decisions are read: the report and the gate's verdict.

A judge grader (an LLM rubric) is only as trustworthy as its agreement with human labels
(`promptloop calibrate`). When a judge's scores are shown or drive a verdict while it is
uncalibrated, under the agreement threshold, or calibrated for another judge model, the
output says so next to the figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.lifecycle.calibration import CalibrationStatus, calibration_status


def judge_statuses(state: Path, runs: Iterable[RunResult],
                   buckets: set[str] | None = None) -> list[CalibrationStatus]:
    """The calibration of every judge grader that scored trials of `runs` (of `buckets` only,
    when given), sorted by grader name; code graders are left out."""
    names: set[str] = set()
    model: str | None = None
    for run in runs:
        model = model or run.provenance.judge_model
        for t in run.trials:
            if buckets is None or t.bucket in buckets:
                names.update(s.grader for s in t.scores)
    out = [calibration_status(state, g, judge_model=model) for g in sorted(names)]
    return [s for s in out if s.state != "not_a_judge"]


def judge_notes(statuses: Iterable[CalibrationStatus]) -> list[str]:
    """One warning line per judge that is not calibrated for this use."""
    return [f"judge {s.message}" for s in statuses if not s.calibrated]


__all__ = ["judge_notes", "judge_statuses"]
