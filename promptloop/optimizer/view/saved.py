"""The lifecycle's saved files, read for the viewer through the state folder's confinement.

Suite health (`health/<suite>.json`), judge calibrations (`calibration/<grader>.json`) and
graduation records (`graduations/<id>/graduation.json` with its `PR.md`) are written by
`promptloop health`, `calibrate` and `graduate` (optimizer/lifecycle). The viewer only reads
them: every path goes through `StateFolder.read_text` (resolved, symlinks followed, refused
outside the state folder), and a suite or grader named in a URL is first looked up among the
names the folder lists, never joined onto a path as typed. A file that does not parse is an
`UnreadableError` naming it (the page says so), never a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from promptloop.graders.registry import is_judge
from promptloop.optimizer.lifecycle.calibration import (
    CALIBRATION_DIR,
    CalibrationReport,
    CalibrationStatus,
    calibration_path,
    status_of,
)
from promptloop.optimizer.lifecycle.graduate_git import GRADUATIONS_DIR, GraduationRecord
from promptloop.optimizer.lifecycle.health import SuiteHealth
from promptloop.optimizer.lifecycle.health_io import HEALTH_DIR, health_path
from promptloop.optimizer.report.store import ReportError
from promptloop.optimizer.view.state import ID_RE, NotFoundError, StateFolder

M = TypeVar("M", bound=BaseModel)
STATE_LABELS = {
    "calibrated": "calibrated", "uncalibrated": "uncalibrated",
    "insufficient": "too few labels", "below_threshold": "below threshold",
    "other_judge_model": "other judge model", "not_a_judge": "code grader",
}
"""How each calibration state (lifecycle/calibration.py) is named on a badge."""
MAX_FILES = 500
"""At most this many health, calibration or graduation files are listed."""


class UnreadableError(ReportError):
    """A lifecycle file in the state folder that is not valid JSON of its format (HTTP 500)."""


def _parse(state: StateFolder, path: Path, model: type[M]) -> M:
    text = state.read_text(path)
    try:
        return model.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as err:
        first = str(err).splitlines()[0]
        raise UnreadableError(f"{path.name}: not a valid {model.__name__} file ({first})") \
            from None


def _json_files(state: StateFolder, folder: str) -> list[Path]:
    """The JSON files directly in `<state>/<folder>` that stay inside the state folder."""
    try:
        real = state.confine(state.root / folder)
    except NotFoundError:
        return []
    if not real.is_dir():
        return []
    out = []
    for p in sorted(real.glob("*.json"))[:MAX_FILES]:
        try:
            state.confine(p)
        except NotFoundError:
            continue  # a link out of the state folder
        out.append(p)
    return out


# --- suite health -----------------------------------------------------------------------


def saved_health(state: StateFolder) -> dict[str, SuiteHealth | str]:
    """Suite name -> its saved health, or the reason the file cannot be read."""
    out: dict[str, SuiteHealth | str] = {}
    for path in _json_files(state, HEALTH_DIR):
        try:
            health = _parse(state, path, SuiteHealth)
        except (UnreadableError, NotFoundError) as err:
            out[path.stem] = str(err)
            continue
        if path.name == health_path(state.root, health.suite_name).name:
            out[health.suite_name] = health
    return out


def health_of(state: StateFolder, suite: str) -> SuiteHealth | None:
    """The saved health of a suite the folder knows (a run or a health file), else None;
    NotFoundError for a suite the folder does not know."""
    known = {e.suite_name for e in state.runs()} | set(saved_health(state))
    if suite not in known:
        raise NotFoundError(f"no suite {suite!r} in this state folder (no run, no health file)")
    try:
        return _parse(state, health_path(state.root, suite), SuiteHealth)
    except NotFoundError:
        return None


# --- judge calibration --------------------------------------------------------------------




def calibrations(state: StateFolder) -> dict[str, CalibrationReport | str]:
    """Grader -> its newest saved calibration, or the reason the file cannot be read."""
    out: dict[str, CalibrationReport | str] = {}
    for path in _json_files(state, CALIBRATION_DIR):
        try:
            report = _parse(state, path, CalibrationReport)
        except (UnreadableError, NotFoundError) as err:
            out[path.stem] = str(err)
            continue
        if path.name == calibration_path(state.root, report.grader).name:
            out[report.grader] = report
    return out


def calibration_of(state: StateFolder, grader: str) -> CalibrationReport | None:
    try:
        return _parse(state, calibration_path(state.root, grader), CalibrationReport)
    except NotFoundError:
        return None


def judge_status(state: StateFolder, grader: str,
                 judge_model: str | None = None) -> CalibrationStatus:
    """`calibration_status` of the lifecycle, with the report read through the confinement."""
    judge = is_judge(grader)
    return status_from(grader, calibration_of(state, grader) if judge else None, judge_model)


def status_from(grader: str, report: CalibrationReport | None,
                judge_model: str | None = None) -> CalibrationStatus:
    """`judge_status` from a report already read (None: the grader has none)."""
    judge = is_judge(grader)
    return status_of(report if judge else None, grader, is_judge=judge, judge_model=judge_model)


# --- graduations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Graduation:
    id: str
    record: GraduationRecord | None
    pr_body: str | None
    problem: str = ""


def graduations(state: StateFolder) -> list[Graduation]:
    """Every graduation record, newest first (folders whose record cannot be read say why)."""
    try:
        root = state.confine(state.root / GRADUATIONS_DIR)
    except NotFoundError:
        return []
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir())[:MAX_FILES]:
        if not ID_RE.fullmatch(p.name) or not p.is_dir():
            continue
        try:
            folder = state.confine(p)
        except NotFoundError:
            continue  # a link out of the state folder
        try:
            record = _parse(state, folder / "graduation.json", GraduationRecord)
        except (UnreadableError, NotFoundError) as err:
            out.append(Graduation(p.name, None, None, str(err)))
            continue
        try:
            pr = state.read_text(folder / "PR.md")
        except NotFoundError:
            pr = None
        out.append(Graduation(p.name, record, pr))
    return sorted(out, key=lambda g: (g.record.created_at.isoformat() if g.record else "",
                                      g.id), reverse=True)
