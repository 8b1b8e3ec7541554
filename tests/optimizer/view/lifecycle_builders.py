"""The lifecycle's saved files in the viewer's test state folder, made by the lifecycle itself.

Six runs of a judged PKM suite (a bucket that passes every trial, so it is ready to graduate;
a judged `insight` bucket with a flaky task), its health and the evil suite's health saved by
`optimizer.lifecycle.health_io`, a calibration of `pkm_insight_quality` from a labels file
(`run_calibration`), and a graduation record saved by `graduate_git.save_record`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from promptloop.agents.llm.types import Message
from promptloop.agents.transcript import Transcript
from promptloop.graders.base import Score
from promptloop.optimizer.core.results import RunResult, TrialResult
from promptloop.optimizer.lifecycle.calibration import run_calibration
from promptloop.optimizer.lifecycle.graduate_git import GraduationRecord, MovedFiles, save_record
from promptloop.optimizer.lifecycle.health_io import build_health, save_health
from promptloop.optimizer.report.store import save_run
from tests.optimizer.lifecycle.helpers import judge_score, run, trial

JUDGED_SUITE = "pkm_judged_capability"
JUDGE = "pkm_insight_quality"
JUDGE_DIMS = ("groundedness", "non_redundancy", "expression_quality")
JUDGED_NEWEST = "pkm_judged_capability-day5"
PROMPT = "# PKM agent\n\nOrganise the note into the timeline.\n"


@dataclass(frozen=True)
class LifecycleState:
    suite: str
    newest_run: str
    judge: str
    dims: tuple[str, ...]
    labelled: tuple[str, ...]
    """Trial ids of the newest run that the saved calibration labelled."""


def _judged(task: str, index: int, passed: bool, day: int, dims: tuple[float, ...]) -> TrialResult:
    start = datetime(2026, 3, 1 + day, 2, 0, tzinfo=UTC)
    score = judge_score(dict(zip(JUDGE_DIMS, dims, strict=True)), JUDGE)
    done = Score(grader="pkm_completion", value=1.0 if passed else 0.0, passed=passed)
    t = trial(task, "insight", index, passed, start, scores=[done, score])
    note = f"Met Ana about the {task} launch; she wants the draft by Friday."
    transcript = Transcript(messages=[
        Message.system(PROMPT), Message.user(f"Raw Input Content:\n{note}"),
        Message.assistant(f"Filed under Projects: {task} launch, due Friday (from Ana)."),
    ])
    return t.model_copy(update={"transcript": transcript})


def judged_runs() -> list[RunResult]:
    out = []
    for day in range(6):
        start = datetime(2026, 3, 1 + day, 2, 0, tzinfo=UTC)
        trials = [
            trial("plain-a", "plain", 0, True, start), trial("plain-b", "plain", 0, True, start),
            _judged("insight-a", 0, True, day, (0.9, 0.8, 0.7)),
            _judged("insight-b", 0, day % 2 == 0, day, (0.4 + 0.1 * (day % 2), 0.5, 0.9)),
            _judged("insight-b", 1, day % 2 == 1, day, (0.7, 0.3, 0.6)),
        ]
        out.append(run(f"{JUDGED_SUITE}-day{day}", {}, day=day, suite=JUDGED_SUITE,
                       agent="pkm_agent", prompt=PROMPT, model="scripted:pkm-judged",
                       trials=trials, buckets={t.task_id: t.bucket for t in trials}))
    return out


def _labels(path: Path) -> tuple[str, ...]:
    ids = (f"{JUDGED_NEWEST}/insight-a#0", f"{JUDGED_NEWEST}/insight-b#0",
           f"{JUDGED_NEWEST}/insight-b#1")
    grades = ({"groundedness": 1, "non_redundancy": 0.75, "expression_quality": 0.75},
              {"groundedness": 0.25, "non_redundancy": 0.5, "expression_quality": "unknown"},
              {"groundedness": 0.5, "non_redundancy": 0.25, "expression_quality": 0.5})
    lines = [json.dumps({"trial_id": i, "scores": g, "labeler": "ana"})
             for i, g in zip(ids, grades, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ids


def add_lifecycle(state: Path, other_suites: tuple[str, ...] = ()) -> LifecycleState:
    """Save the judged runs, then the health (also of `other_suites`), calibration and
    graduation files."""
    for r in judged_runs():
        save_run(r, state / "runs")
    health = build_health(state, JUDGED_SUITE, any_prompt=True)
    save_health(state, health)
    for other in other_suites:
        save_health(state, build_health(state, other, any_prompt=True))
    labelled = _labels(state.parent / "labels.jsonl")
    run_calibration(state, JUDGE, state.parent / "labels.jsonl")
    plain = next(b for b in health.buckets if b.bucket == "plain")
    record = GraduationRecord(
        created_at=datetime(2026, 3, 7, 9, 0, tzinfo=UTC), agent="pkm_agent", bucket="plain",
        mode="move", forced=False, dry_run=False, base_ref="HEAD", base_commit="d" * 40,
        branch="promptloop/graduate/pkm_agent-plain/20260307", commit="e" * 40,
        source_suite=JUDGED_SUITE, target_suite="pkm_agent_regression",
        task_ids=["plain-a", "plain-b"],
        files=[MovedFiles(source=f"tasks/pkm_agent/capability/tasks/{t}",
                          destination=f"tasks/pkm_agent/regression/tasks/{t}", kind="task",
                          removed_source=True) for t in ("plain-a", "plain-b")],
        ready=True, reasons=["6 consecutive mature run(s) at >= 95% (needs 5)"],
        evidence_runs=plain.series[-5:], lineage=health.lineage.definition)
    save_record(state, record)
    return LifecycleState(JUDGED_SUITE, JUDGED_NEWEST, JUDGE, JUDGE_DIMS, labelled)
