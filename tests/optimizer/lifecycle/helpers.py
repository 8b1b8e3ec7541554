"""Scripted runs for the lifecycle tests: no agents, no models, only stored results."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from promptloop.graders.base import Score
from promptloop.optimizer.core.results import Provenance, RunResult, TrialResult
from promptloop.optimizer.report.store import save_run

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
PROMPT = "# Card agent\n\nPick the template that fits the input.\n"
MODEL = "scripted:card"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


Outcome = bool | str  # True passed, False failed, "errored"


def trial(task: str, bucket: str, index: int, outcome: Outcome, start: datetime, *,
          scores: Sequence[Score] | None = None, cached: bool = False) -> TrialResult:
    if outcome == "errored":
        status, default = "errored", []
    else:
        status = "passed" if outcome else "failed"
        default = [Score(grader="card_completion", value=1.0 if outcome else 0.0,
                         passed=bool(outcome))]
    begin = start + timedelta(seconds=index)
    return TrialResult(task_id=task, bucket=bucket, trial_index=index, status=status,  # type: ignore[arg-type]
                       started_at=begin, ended_at=begin + timedelta(seconds=3),
                       scores=list(default if scores is None else scores), cached=cached,
                       infra_error="provider down" if status == "errored" else None)


def run(name: str, outcomes: Mapping[str, Sequence[Outcome]], *, day: int = 0,
        buckets: Mapping[str, str] | None = None, suite: str = "card_agent_capability",
        kind: str = "capability", agent: str = "card_agent", prompt: str = PROMPT,
        model: str = MODEL, mode: str = "live",
        trials: Sequence[TrialResult] | None = None) -> RunResult:
    """A run whose task `t` has one trial per outcome; buckets default to the task id's
    prefix before '-' (`event-a` -> `event`)."""
    start = T0 + timedelta(days=day)
    bmap = dict(buckets or {})
    for t in outcomes:
        bmap.setdefault(t, t.split("-")[0])
    made = list(trials) if trials is not None else [
        trial(t, bmap[t], i, o, start) for t, outs in outcomes.items() for i, o in enumerate(outs)]
    ids = list(dict.fromkeys([*outcomes, *(t.task_id for t in made)]))
    return RunResult(
        run_name=name, suite_name=suite, suite_kind=kind, agent_name=agent,
        suite_root=f"/suites/{suite}", task_ids=ids,
        task_buckets={t: bmap.get(t, "unbucketed") for t in ids},
        started_at=start, ended_at=start + timedelta(minutes=5),
        provenance=Provenance(agent_model=model, mode=mode, git_commit="c" * 40,
                              prompt_hashes={agent: sha(prompt)}),
        trials=made)


def save_all(state: Path, runs: Sequence[RunResult]) -> None:
    for r in runs:
        save_run(r, state / "runs")


def judge_score(dims: Mapping[str, float | None], grader: str = "pkm_insight_quality",
                model: str = "scripted:judge") -> Score:
    known = [v for v in dims.values() if v is not None]
    value = sum(known) / len(known) if known else None
    return Score(grader=grader, value=value,
                 passed=None if value is None else value >= 0.6,
                 metadata={"dimensions": dict(dims), "judge_model": model})


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def app_with(*commands: tuple[str, Any]) -> typer.Typer:
    """A fresh typer app holding only the given commands (as app.py would register them)."""
    from promptloop.optimizer.cli.command import PromptloopCommand, PromptloopGroup

    app = typer.Typer(add_completion=False, cls=PromptloopGroup)

    @app.callback()
    def _root() -> None:
        """promptloop (test app)."""

    for name, fn in commands:
        app.command(name, cls=PromptloopCommand)(fn)
    return app
