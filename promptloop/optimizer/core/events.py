"""Typed events: what the loop reports while it works.

Engine code (runner, optimize, review, nightly) never prints; it calls an `EventSink` with one of
the models below. The terminal UI, the nightly engine and the `--events FILE` JSON-lines log all
consume the same stream, so a misspelt event or field fails type checking instead of silently
printing nothing. Every event carries its name (`event`) and the time it happened (`at`): one
`model_dump_json()` is one log line, and `parse_event` reads it back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from promptloop.optimizer.core.redact import redact


def _now() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event: str
    at: datetime = Field(default_factory=_now)


# --- one suite run (runner) -------------------------------------------------------------------


class RunStarted(Event):
    event: Literal["run_start"] = "run_start"
    run: str
    """The run name (unique per run; every trial event of the run names it)."""
    label: str
    """What the run is for, e.g. `baseline pkm_agent_capability`."""
    suite: str
    total: int
    """Trials planned."""


class TrialStarted(Event):
    event: Literal["trial_start"] = "trial_start"
    run: str
    task: str
    trial: int


class TrialFinished(Event):
    event: Literal["trial_end"] = "trial_end"
    run: str
    task: str
    trial: int
    bucket: str
    status: str
    cached: bool


class RunFinished(Event):
    event: Literal["run_end"] = "run_end"
    run: str
    suite: str


class RunWarning(Event):
    event: Literal["warning"] = "warning"
    message: str


# --- optimize / review / nightly ----------------------------------------------------------------


class Phase(Event):
    """A step of a workflow begins (one human-readable line)."""

    event: Literal["phase"] = "phase"
    message: str


class BaselineReady(Event):
    event: Literal["baseline"] = "baseline"
    total: int
    cached: int
    """Trials of the baseline served from the trial cache."""


class IterationStarted(Event):
    event: Literal["iteration_start"] = "iteration_start"
    iteration: int
    branch: str
    """The candidate branch this iteration will create."""


class ProposalRequested(Event):
    event: Literal["proposal"] = "proposal"
    iteration: int
    tokens: int
    """Size of the package sent to the proposer."""
    package: str
    """Path of the package on disk: exactly what the proposer saw."""
    command: bool = False
    """The proposer is an external command (--proposer-cmd) reading the package from disk,
    not a model the package is sent to."""


class ProposerReplied(Event):
    """One reply of the proposer model arrived (every attempt, usable or not)."""

    event: Literal["proposer_reply"] = "proposer_reply"
    iteration: int
    attempt: int
    seconds: float
    input_tokens: int = 0
    output_tokens: int = 0
    problem: str = ""
    """Why the reply was not usable, in words (empty when it was)."""
    saved: str = ""
    """Where the raw reply was saved (redacted)."""


class TrialsEstimated(Event):
    """Before a command starts its trials: how many, and what they may cost."""

    event: Literal["trials_estimate"] = "trials_estimate"
    what: str
    trials: int
    """Trials to run at least (cached ones included; the gate may add more)."""
    tokens: int | None = None
    usd: float | None = None
    """Estimated cost where the model's price is known."""
    seconds: float | None = None
    """Estimated wall time of those trials, where an earlier run (or the model) gives one."""
    basis: str = ""


class ProposalRefused(Event):
    """The guards refused the proposal before any evaluation was spent."""

    event: Literal["refused"] = "refused"
    iteration: int
    reasons: list[str]


class CandidateEvaluating(Event):
    event: Literal["evaluating"] = "evaluating"
    iteration: int
    branch: str


class ConfirmStarted(Event):
    """Suspected regressions are re-run with more trials on both sides."""

    event: Literal["confirm"] = "confirm"
    buckets: list[str]
    tasks: int


class GateStage(Event):
    """The sequential gate asks for more trials: which stage, why, and how many trials."""

    event: Literal["gate_stage"] = "gate_stage"
    iteration: int
    stage: str
    """screen | target | rest | confirm (see optimizer/gate/sequential.py)"""
    reason: str
    trials: int
    """Trials this stage adds (per side)."""


class VerdictReached(Event):
    event: Literal["verdict"] = "verdict"
    iteration: int
    decision: str
    """accept | reject | inconclusive"""
    reasons: list[str]
    branch: str | None
    """The kept branch (None when it was deleted)."""
    summary: str = ""
    """The verdict in one plain sentence (`report/plain.optimize_headline`)."""


class IterationFinished(Event):
    event: Literal["iteration_end"] = "iteration_end"
    iteration: int
    outcome: str
    """accepted | rejected | inconclusive | refused | error"""
    branch: str | None
    tokens: int


class IterationAbandoned(Event):
    """An iteration whose process died before its verdict: what the sweep removed of it.
    Its ledger record is closed as `abandoned`."""

    event: Literal["abandoned"] = "abandoned"
    id: str
    """The iteration's ledger id."""
    pid: int
    host: str
    started_at: datetime
    branch: str
    branch_deleted: bool
    worktree: str
    worktree_removed: bool
    others_cleaned: int = 0
    """Worktrees and branches of its other candidates (`--candidates K`) removed."""

    def describe(self) -> str:
        done = [f"removed worktree {self.worktree}"] if self.worktree_removed else []
        done += [f"deleted branch {self.branch}"] if self.branch_deleted else []
        done += ([f"removed {self.others_cleaned} worktree(s) or branch(es) of its other "
                  "candidates"] if self.others_cleaned else [])
        return (f"iteration {self.id} (pid {self.pid} on {self.host}, started "
                f"{self.started_at:%Y-%m-%d %H:%M:%S}) died before its verdict: "
                + ("; ".join(done) or "nothing of it was left") + "; closed as abandoned")


class ScreeningRound(Event):
    """`--candidates K`: a screening round of candidates on the visible target tasks."""

    event: Literal["screening_round"] = "screening_round"
    iteration: int
    round: int
    candidates: list[str]
    trials: int


class CandidateStopped(Event):
    """`--candidates K`: a candidate left the running (refused, duplicate, screened out)."""

    event: Literal["candidate_stopped"] = "candidate_stopped"
    iteration: int
    name: str
    reason: str


class StepEstimated(Event):
    """Nightly: the next step fits the budgets; what it is expected to cost."""

    event: Literal["step_estimate"] = "step_estimate"
    step: str
    tokens: int
    basis: str
    usd: float | None = None
    """At list prices, where every model's price is known."""
    seconds: float | None = None
    """Its expected wall time (the budget's estimate)."""


class BudgetStopped(Event):
    """Nightly: the night stops because the next step would exceed a budget."""

    event: Literal["budget_stop"] = "budget_stop"
    step: str
    budget: str
    """usd | tokens | wall"""
    detail: str


AnyEvent = Annotated[
    RunStarted
    | TrialStarted
    | TrialFinished
    | RunFinished
    | RunWarning
    | Phase
    | BaselineReady
    | IterationStarted
    | ProposalRequested
    | ProposerReplied
    | TrialsEstimated
    | ProposalRefused
    | CandidateEvaluating
    | ConfirmStarted
    | GateStage
    | VerdictReached
    | IterationFinished
    | IterationAbandoned
    | ScreeningRound
    | CandidateStopped
    | StepEstimated
    | BudgetStopped,
    Field(discriminator="event"),
]
_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

EventSink = Callable[[Event], None]
"""Receives every event; must not raise (it runs inside the engine)."""


def ignore(_event: Event) -> None:
    """The sink of a caller that does not listen."""


def fan_out(*sinks: EventSink | None) -> EventSink:
    """One sink that forwards each event to every given sink, in order."""
    live = [s for s in sinks if s is not None]

    def sink(event: Event) -> None:
        for s in live:
            s(event)

    return sink


def parse_event(line: str) -> Event:
    """One line of an events log back as its typed event."""
    event: Event = _ADAPTER.validate_json(line)
    return event


class EventLog:
    """`--events FILE`: appends one JSON object per event (with `event` and `at`) and flushes,
    so a tail of the file follows the run live and a crash loses nothing written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def __enter__(self) -> EventLog:
        from promptloop.optimizer.core.config import ConfigError

        folder = self.path.parent
        if not folder.is_dir():  # a typo in the path: say so, never create folders for it
            raise ConfigError(f"--events {self.path}: the folder {folder} does not exist "
                              "(create it, or give a file in an existing folder)")
        try:
            self._fh = self.path.open("a", encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"--events {self.path}: cannot write it: "
                              f"{err.strerror or err}") from None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __call__(self, event: Event) -> None:
        if self._fh is None:
            raise RuntimeError("EventLog used outside its `with` block")
        self._fh.write(redact(event.model_dump_json()) + "\n")
        self._fh.flush()


__all__ = [
    "AnyEvent",
    "BaselineReady",
    "BudgetStopped",
    "CandidateEvaluating",
    "ConfirmStarted",
    "Event",
    "EventLog",
    "EventSink",
    "IterationAbandoned",
    "IterationFinished",
    "IterationStarted",
    "Phase",
    "ProposalRefused",
    "ProposalRequested",
    "ProposerReplied",
    "RunFinished",
    "RunStarted",
    "RunWarning",
    "StepEstimated",
    "TrialFinished",
    "TrialStarted",
    "TrialsEstimated",
    "VerdictReached",
    "fan_out",
    "ignore",
    "parse_event",
]
