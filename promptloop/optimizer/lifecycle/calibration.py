"""Calibration of a judge grader against human labels, and the grader's calibration status.

Per dimension, and overall (the grader's value against the mean of the human's known
dimensions), over the labelled trials where both sides decided:
- Cohen's kappa with quadratic weights on `levels` ordinal grades (values rounded to the
  nearest of 0, 1/(levels-1), ..., 1; default 5 grades: 0, .25, .5, .75, 1);
- Krippendorff's alpha, interval metric, on the raw values (human and judge as two raters);
- the mean absolute error;
- the confusion matrix at the grader's pass threshold, with its unweighted kappa.
Saved as `calibration/<grader>.json` (format `promptloop.calibration/1`) in the state folder.
A grader is calibrated when its newest calibration has >= `min_items` overall pairs, an overall
alpha >= `min_alpha` (default 0.667, Krippendorff's lowest acceptable level) and, when the
judge model in use is given, was made with that judge model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from promptloop.graders.registry import UnknownGraderError, get_grader, is_judge, judge_graders
from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.lifecycle.agreement import (
    cohen_kappa,
    confusion_at,
    krippendorff_alpha,
    mean_absolute_error,
    to_level,
)
from promptloop.optimizer.lifecycle.errors import LifecycleError, UnknownNameError
from promptloop.optimizer.lifecycle.files import safe_stem
from promptloop.optimizer.lifecycle.labels import LabelledItem, join_labels, read_labels
from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.store import (
    RunNotFoundError,
    default_store_dir,
    list_runs,
    load_run,
)

CALIBRATION_FORMAT = "promptloop.calibration/1"
CALIBRATION_DIR = "calibration"
DEFAULT_LEVELS = 5
DEFAULT_MIN_ALPHA = 0.667
DEFAULT_MIN_ITEMS = 20
OVERALL = "all dimensions"
"""The name of the agreement over every dimension at once (not "overall": that is the name of
a rubric_judge's one default dimension, and the two rows read alike)."""


class ConfusionCounts(BaseModel):
    both_pass: int
    judge_only_pass: int
    """The judge passed trials the human failed."""
    human_only_pass: int
    """The judge failed trials the human passed."""
    both_fail: int
    agreement: float | None
    kappa: float | None


class DimensionAgreement(BaseModel):
    name: str
    n: int
    cohen_kappa_quadratic: float | None
    krippendorff_alpha_interval: float | None
    mean_absolute_error: float | None
    confusion: ConfusionCounts


class CalibrationReport(BaseModel):
    format: str = CALIBRATION_FORMAT
    created_at: datetime
    grader: str
    threshold: float
    levels: int
    judge_models: list[str]
    labels_file: str
    labels_sha256: str
    labelled_trials: int
    other_grader_lines: int = 0
    overall: DimensionAgreement
    dimensions: list[DimensionAgreement]
    items: list[LabelledItem]
    warnings: list[str] = Field(default_factory=list)


def agreement(name: str, pairs: Sequence[tuple[float, float]], threshold: float,
              levels: int = DEFAULT_LEVELS) -> DimensionAgreement:
    """Agreement of (human, judge) value pairs in [0, 1]."""
    human = [h for h, _ in pairs]
    judge = [j for _, j in pairs]
    conf = confusion_at(human, judge, threshold)
    pass_h = [int(h >= threshold) for h in human]
    pass_j = [int(j >= threshold) for j in judge]
    return DimensionAgreement(
        name=name, n=len(pairs),
        cohen_kappa_quadratic=cohen_kappa([to_level(h, levels) for h in human],
                                          [to_level(j, levels) for j in judge], levels,
                                          "quadratic") if pairs else None,
        krippendorff_alpha_interval=krippendorff_alpha([[h, j] for h, j in pairs], "interval"),
        mean_absolute_error=mean_absolute_error(human, judge),
        confusion=ConfusionCounts(
            both_pass=conf.both_pass, judge_only_pass=conf.judge_only_pass,
            human_only_pass=conf.human_only_pass, both_fail=conf.both_fail,
            agreement=conf.agreement,
            kappa=cohen_kappa(pass_h, pass_j, 2) if pairs else None))


def calibrate(items: Sequence[LabelledItem], grader: str, threshold: float, *,
              levels: int = DEFAULT_LEVELS, labels_file: str = "", labels_sha256: str = "",
              other_grader_lines: int = 0, warnings: Sequence[str] = (),
              now: datetime | None = None) -> CalibrationReport:
    """The calibration report of joined items (pure)."""
    dims = list(dict.fromkeys(d for i in items for d in i.judge))
    per_dim = []
    for dim in dims:
        pairs = [(h, j) for i in items
                 if (h := i.human.get(dim)) is not None and (j := i.judge.get(dim)) is not None]
        per_dim.append(agreement(dim, pairs, threshold, levels))
    overall = [(h, j) for i in items
               if (h := i.human_value) is not None and (j := i.judge_value) is not None]
    return CalibrationReport(
        created_at=now or datetime.now(UTC), grader=grader, threshold=threshold, levels=levels,
        judge_models=sorted({i.judge_model for i in items if i.judge_model}),
        labels_file=labels_file, labels_sha256=labels_sha256, labelled_trials=len(items),
        other_grader_lines=other_grader_lines,
        overall=agreement(OVERALL, overall, threshold, levels),
        dimensions=per_dim, items=list(items), warnings=list(warnings))


def judge_grader(name: str) -> float:
    """The pass threshold of judge grader `name`; unknown or code graders are user errors."""
    judges = judge_graders()
    try:
        spec = get_grader(name)
    except UnknownGraderError:
        raise UnknownNameError("judge grader", name, judges) from None
    if spec.kind != "model":
        raise LifecycleError(f"{name} is a code grader (deterministic): only judge graders are "
                             f"calibrated. Judge graders: {', '.join(judges)}")
    return spec.threshold


def run_calibration(state_dir: Path, grader: str, labels_path: Path,
                    levels: int = DEFAULT_LEVELS) -> tuple[CalibrationReport, Path]:
    """Read the labels, join them to the stored judge scores, compute and save the report."""
    if levels < 2:
        raise LifecycleError(f"--levels must be at least 2, got {levels}")
    threshold = judge_grader(grader)
    labels = read_labels(labels_path, grader)
    store = default_store_dir(state_dir)

    def load(name: str) -> RunResult | None:
        try:
            return load_run(store, name)
        except RunNotFoundError:
            return None

    items = join_labels(labels, grader, threshold, load,
                        [e.run_name for e in list_runs(store)])
    report = calibrate(items, grader, threshold, levels=levels, labels_file=str(labels_path),
                       labels_sha256=hashlib.sha256(labels_path.read_bytes()).hexdigest(),
                       other_grader_lines=labels.other_graders, warnings=labels.warnings)
    return report, save_calibration(state_dir, report)


def calibration_path(state_dir: Path, grader: str) -> Path:
    return state_dir / CALIBRATION_DIR / f"{safe_stem(grader)}.json"


def save_calibration(state_dir: Path, report: CalibrationReport) -> Path:
    """Save as the grader's current calibration, and a dated copy under history/."""
    text = report.model_dump_json(indent=2) + "\n"
    stamp = report.created_at.strftime("%Y%m%dT%H%M%S")
    atomic_write_text(state_dir / CALIBRATION_DIR / "history"
                 / f"{safe_stem(report.grader)}-{stamp}.json", text)
    return atomic_write_text(calibration_path(state_dir, report.grader), text)


def _read(path: Path) -> CalibrationReport:
    try:
        return CalibrationReport.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError) as err:
        raise LifecycleError(f"{path}: not a valid {CALIBRATION_FORMAT} file: {err}") from err


def load_calibration(state_dir: Path, grader: str) -> CalibrationReport | None:
    path = calibration_path(state_dir, grader)
    return _read(path) if path.is_file() else None


def load_calibrations(state_dir: Path) -> list[CalibrationReport]:
    folder = state_dir / CALIBRATION_DIR
    return [_read(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


CalibrationState = Literal["not_a_judge", "uncalibrated", "insufficient", "below_threshold",
                           "other_judge_model", "calibrated"]


class CalibrationStatus(BaseModel):
    grader: str
    state: CalibrationState
    calibrated: bool
    """True only in state 'calibrated' (and for code graders, which need no calibration)."""
    agreement: float | None
    """Overall Krippendorff's alpha (interval)."""
    kappa: float | None
    """Overall quadratic-weighted Cohen's kappa."""
    items: int
    min_alpha: float
    min_items: int
    calibrated_at: datetime | None
    judge_models: list[str]
    weakest_dimension: str | None
    message: str


def status_of(report: CalibrationReport | None, grader: str, *, is_judge: bool = True,
              judge_model: str | None = None, min_alpha: float = DEFAULT_MIN_ALPHA,
              min_items: int = DEFAULT_MIN_ITEMS) -> CalibrationStatus:
    """The calibration status of a grader from its newest report (pure)."""
    o = report.overall if report is not None else None
    alpha = o.krippendorff_alpha_interval if o is not None else None
    state: CalibrationState
    if not is_judge:
        state, msg = "not_a_judge", "a code grader: nothing to calibrate"
    elif report is None or o is None:
        state = "uncalibrated"
        msg = (f"never calibrated against human labels (promptloop calibrate --grader "
               f"{grader} --labels FILE)")
    elif o.n < min_items:
        state, msg = "insufficient", f"only {o.n} labelled trials (needs {min_items})"
    elif alpha is None or alpha < min_alpha:
        state = "below_threshold"
        msg = f"agreement alpha {fmt.num(alpha)} is below {min_alpha:.3f}"
    elif judge_model is not None and report.judge_models and \
            not any(same_model(judge_model, m) for m in report.judge_models):
        state = "other_judge_model"
        msg = f"calibrated for {', '.join(report.judge_models)}, not {judge_model}"
    else:
        state, msg = "calibrated", f"alpha {fmt.num(alpha)} over {o.n} labelled trials"
    rated = [d for d in (report.dimensions if report else [])
             if d.krippendorff_alpha_interval is not None]
    weakest = min(rated, key=lambda d: d.krippendorff_alpha_interval or 0.0) if rated else None
    return CalibrationStatus(
        grader=grader, state=state, calibrated=state in ("calibrated", "not_a_judge"),
        agreement=alpha, kappa=o.cohen_kappa_quadratic if o else None,
        items=o.n if o else 0, min_alpha=min_alpha, min_items=min_items,
        calibrated_at=report.created_at if report else None,
        judge_models=report.judge_models if report else [],
        weakest_dimension=weakest.name if weakest else None, message=f"{grader}: {msg}")


def same_model(used: str, calibrated: str) -> bool:
    """Whether a judge model in use is the one a calibration recorded: the same id, or the
    same model name where the calibration recorded it without its provider (labels joined
    with trials of promptloop before 2026-11-29 carried the name the provider answered)."""
    if used == calibrated:
        return True
    return ":" not in calibrated and used.split(":", 1)[-1] == calibrated


def calibration_status(state_dir: Path, grader: str, *, judge_model: str | None = None,
                       min_alpha: float = DEFAULT_MIN_ALPHA,
                       min_items: int = DEFAULT_MIN_ITEMS) -> CalibrationStatus:
    """Whether `grader` is calibrated, from the state folder (for reports and the gate)."""
    judge = is_judge(grader)
    report = load_calibration(state_dir, grader) if judge else None
    return status_of(report, grader, is_judge=judge, judge_model=judge_model,
                     min_alpha=min_alpha, min_items=min_items)
