"""Human labels of judge graders: the labels file (JSONL) and its join to stored judge scores.

One JSON object per line:
    {"trial_id": "<runName>/<taskId>#<trialIndex>", "scores": {"groundedness": 0.8, ...},
     "grader": "pkm_insight_quality", "labeler": "ana", "note": "..."}
`trial_id` and `scores` are required; a score is a number in [0, 1], or "unknown"/null when
the labeler cannot tell. `grader` (default: the grader being calibrated) lets one file hold the
labels of several graders: lines of another grader are skipped. Other keys are ignored with a
warning. Several labelers of one trial are averaged per dimension; the same labeler twice on
one trial is an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.lifecycle.errors import LabelsError, UnknownNameError

KNOWN_KEYS = {"trial_id", "scores", "grader", "labeler", "note"}
UNKNOWN_WORDS = {"unknown", "n/a", "na", ""}


@dataclass(frozen=True)
class Label:
    line: int
    trial_id: str
    run_name: str
    task_id: str
    trial_index: int
    scores: dict[str, float | None]
    labeler: str


@dataclass
class LabelsFile:
    path: str
    labels: list[Label] = field(default_factory=list)
    other_graders: int = 0
    warnings: list[str] = field(default_factory=list)


class LabelledItem(BaseModel):
    """One labelled trial joined to the judge's stored score."""

    trial_id: str
    run_name: str
    task_id: str
    bucket: str
    trial_index: int
    lines: list[int]
    labelers: list[str]
    human: dict[str, float | None]
    judge: dict[str, float | None]
    human_value: float | None
    """Mean of the human's known dimensions."""
    judge_value: float | None
    """The stored score value (mean of the judge's known dimensions), None if undecided."""
    human_passed: bool | None
    judge_passed: bool | None
    judge_model: str | None = None
    note: list[str] = Field(default_factory=list)


def parse_trial_id(text: str) -> tuple[str, str, int]:
    """`<runName>/<taskId>#<trialIndex>` -> (run, task, index); ValueError when malformed."""
    run, sep, rest = text.partition("/")
    task, hash_, index = rest.rpartition("#")
    if not sep or not run or not hash_ or not task or not index.isdigit():
        raise ValueError(f"'{text}' is not <runName>/<taskId>#<trialIndex>")
    if run.startswith(".") or "\\" in run or run.endswith(".json"):
        raise ValueError(f"'{run}' cannot be a run name")
    return run, task, int(index)


def _score(raw: Any) -> float | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in UNKNOWN_WORDS):
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"must be a number in [0, 1] or \"unknown\", got {json.dumps(raw)}")
    if not math.isfinite(raw) or not 0.0 <= raw <= 1.0:
        raise ValueError(f"must be in [0, 1], got {raw}")
    return float(raw)


def _parse_line(path: str, n: int, data: Any, grader: str, out: LabelsFile) -> None:
    if not isinstance(data, dict):
        raise LabelsError(path, n, "(line)", "must be a JSON object")
    extra = sorted(set(data) - KNOWN_KEYS)
    if extra:
        out.warnings.append(f"{path}: line {n}: ignored unknown key(s) {', '.join(extra)}")
    if data.get("grader", grader) != grader:
        out.other_graders += 1
        return
    raw_id = data.get("trial_id")
    if not isinstance(raw_id, str):
        raise LabelsError(path, n, "trial_id", "required, a string <runName>/<taskId>#<index>")
    try:
        run, task, index = parse_trial_id(raw_id)
    except ValueError as err:
        raise LabelsError(path, n, "trial_id", str(err)) from None
    scores = data.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise LabelsError(path, n, "scores", "required, an object of dimension -> score")
    parsed: dict[str, float | None] = {}
    for dim, raw in scores.items():
        try:
            parsed[str(dim)] = _score(raw)
        except ValueError as err:
            raise LabelsError(path, n, f"scores.{dim}", str(err)) from None
    labeler = data.get("labeler", "")
    if not isinstance(labeler, str):
        raise LabelsError(path, n, "labeler", "must be a string")
    out.labels.append(Label(n, raw_id, run, task, index, parsed, labeler))


def read_labels(path: Path, grader: str) -> LabelsFile:
    """Parse a labels file; every problem names the file, the line and the field."""
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabelsError(shown, 0, "(file)", "no such labels file (--labels)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise LabelsError(shown, 0, "(file)", f"cannot read ({err})") from None
    out = LabelsFile(shown)
    seen: dict[tuple[str, str], int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise LabelsError(shown, n, "(line)", f"invalid JSON: {err.msg}") from None
        _parse_line(shown, n, data, grader, out)
        if out.labels and out.labels[-1].line == n:
            key = (out.labels[-1].trial_id, out.labels[-1].labeler)
            if key in seen:
                raise LabelsError(shown, n, "trial_id", f"trial already labelled by the same "
                                  f"labeler on line {seen[key]}")
            seen[key] = n
    if not out.labels:
        raise LabelsError(shown, 0, "(file)", f"no labels for grader {grader}"
                          + (f" ({out.other_graders} line(s) of other graders)"
                             if out.other_graders else ""))
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def join_labels(labels: LabelsFile, grader: str, threshold: float,
                load: Callable[[str], RunResult | None],
                known_runs: Sequence[str] = ()) -> list[LabelledItem]:
    """Join each labelled trial to its stored `grader` score. `load(run_name)` returns the run
    or None when the store has no such run (an error naming the line, with a did-you-mean)."""
    groups: dict[str, list[Label]] = {}
    for label in labels.labels:
        groups.setdefault(label.trial_id, []).append(label)
    cache: dict[str, RunResult | None] = {}
    items = []
    for tid, group in groups.items():
        first = group[0]
        if first.run_name not in cache:
            cache[first.run_name] = load(first.run_name)
        run = cache[first.run_name]
        if run is None:
            err = UnknownNameError("run", first.run_name, known_runs)
            raise LabelsError(labels.path, first.line, "trial_id", str(err))
        items.append(_join_one(labels.path, tid, group, run, grader, threshold))
    return items


def _join_one(path: str, tid: str, group: list[Label], run: RunResult, grader: str,
              threshold: float) -> LabelledItem:
    first = group[0]
    trial = next((t for t in run.trials if t.task_id == first.task_id
                  and t.trial_index == first.trial_index), None)
    if trial is None:
        raise LabelsError(path, first.line, "trial_id",
                          f"run {run.run_name} has no trial {first.task_id}#{first.trial_index}")
    score = next((s for s in trial.scores if s.grader == grader), None)
    if score is None:
        raise LabelsError(path, first.line, "trial_id", f"trial {tid} has no {grader} score")
    stored = score.metadata.get("dimensions")
    judge: dict[str, float | None] = dict(stored) if isinstance(stored, Mapping) else {}
    dims = list(judge) or sorted({d for lab in group for d in lab.scores})
    human: dict[str, float | None] = {}
    for lab in group:
        unknown = sorted(set(lab.scores) - set(dims))
        if unknown:
            raise LabelsError(path, lab.line, f"scores.{unknown[0]}",
                              f"{grader} has no such dimension; its dimensions: {', '.join(dims)}")
    for dim in dims:
        human[dim] = _mean([lab.scores.get(dim) for lab in group])
    human_value = _mean(list(human.values()))
    model = score.metadata.get("judge_model")
    return LabelledItem(
        trial_id=tid, run_name=run.run_name, task_id=trial.task_id, bucket=trial.bucket,
        trial_index=trial.trial_index, lines=[lab.line for lab in group],
        labelers=sorted({lab.labeler for lab in group if lab.labeler}),
        human=human, judge=judge, human_value=human_value, judge_value=score.value,
        human_passed=None if human_value is None else human_value >= threshold,
        judge_passed=score.passed, judge_model=model if isinstance(model, str) else None)
