"""Durable state of nightly runs: the single-instance lock and the per-night checkpoint.

The lock is an OS file lock (`filelock`), released by the operating system when its holder
dies; the holder's pid, host and start time sit beside it. The checkpoint is written atomically
after every step, so `--resume` can continue from the last finished step.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from promptloop.optimizer.core.files import atomic_write_text
from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.run.usage import Spend
from promptloop.optimizer.workflows.nightly.budget import TrialRate
from promptloop.optimizer.workflows.optimize import IterationResult

CHECKPOINT_VERSION = 1
NightStatus = Literal["running", "finished", "failed", "stopped"]
"""A night is "stopped" by Ctrl-C or SIGTERM (resumable, like a failed or killed one)."""


class LockHeldError(Exception):
    """Another nightly run holds the lock (exit code 1)."""


class LockInfo(BaseModel):
    pid: int
    host: str
    started_at: str


class NightLock:
    """`<state>/nightly.lock`, an OS file lock: a second run cannot take it while the first runs,
    and the operating system frees it when its holder dies (kill -9, reboot).

    The holder's pid, host and start time are written beside it (`nightly.holder.json`) so a
    refused run can say who holds the lock. A holder file that is still there when the lock is
    free was left by a run that died: `acquire()` returns it (a stale lock taken over)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.holder_path = path.with_name("nightly.holder.json")
        self._lock = FileLock(path)
        self.held = False

    def _holder(self) -> LockInfo | None:
        try:
            return LockInfo.model_validate_json(self.holder_path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            return None

    def acquire(self) -> LockInfo | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            info = self._holder()
            who = "holder unknown"
            if info is not None:
                where = "" if info.host == socket.gethostname() else f" on host {info.host}"
                who = f"pid {info.pid}{where}, started {info.started_at}"
            raise LockHeldError(
                f"another nightly run ({who}) is running; lock file {self.path}"
            ) from None
        self.held = True
        stale: LockInfo | None = None
        if self.holder_path.exists():
            stale = self._holder() or LockInfo(pid=0, host="?", started_at="unreadable holder file")
        mine = LockInfo(
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        atomic_write_text(self.holder_path, mine.model_dump_json())
        return stale

    def release(self) -> None:
        if not self.held:
            return
        with contextlib.suppress(FileNotFoundError):
            self.holder_path.unlink()
        self._lock.release()
        self.held = False


class StepRecord(BaseModel):
    """One finished step: a suite baseline or one proposal+evaluation iteration."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["baseline", "profile", "iteration"]
    suite: str
    bucket: str | None = None
    iteration: int | None = None
    started_at: datetime
    ended_at: datetime
    seconds: float
    fresh_trials: int = 0
    spend: Spend = Field(default_factory=Spend)
    usd: float | None = None
    estimate_tokens: int = 0
    estimate_usd: float | None = None
    estimate_basis: str = ""
    outcome: str = "done"
    evaluated: bool = False
    """An iteration whose candidate was evaluated (comparable for the next estimate)."""
    runs: list[str] = Field(default_factory=list)
    result: IterationResult | None = None
    note: str = ""


class BucketRank(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite: str
    bucket: str
    failing: int
    trials: int
    mean_score: float | None


class Pending(BaseModel):
    """The iteration in progress when the checkpoint was written (for crash recovery)."""

    model_config = ConfigDict(extra="forbid")

    step: str
    suite: str
    bucket: str
    session: str
    iteration: int
    branch: str | None = None
    estimate: Spend = Field(default_factory=Spend)
    started_at: datetime
    metered: Spend | None = None
    """What the meter counted of the step before a stop that let the night save (Ctrl-C,
    SIGTERM): charged instead of `estimate` when it resumes; None after a kill -9."""


class PublishRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    branch: str
    pushed: bool = False
    push_error: str | None = None
    pr: Literal["opened", "failed", "not_requested", "manual"] = "not_requested"
    pr_url: str | None = None
    pr_error: str | None = None
    commands: list[str] = Field(default_factory=list)
    """What to run by hand when promptloop could not (or was not asked to)."""


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = CHECKPOINT_VERSION
    night_id: str
    status: NightStatus = "running"
    started_at: datetime
    updated_at: datetime
    attempts: int = 1
    config: dict[str, Any]
    base_commit: str
    steps: list[StepRecord] = Field(default_factory=list)
    ranking: list[BucketRank] | None = None
    skipped_buckets: list[str] = Field(default_factory=list)
    """Buckets with failing trials that the gate cannot target (regression-only buckets)."""
    sessions: dict[str, str] = Field(default_factory=dict)
    """`suite/bucket` -> optimize session id (ledger ids and folders survive a resume)."""
    pending: Pending | None = None
    spend: Spend = Field(default_factory=Spend)
    wall_seconds: float = 0.0
    rates: dict[str, TrialRate] = Field(default_factory=dict)
    """Per suite: trials run so far and their agent+judge spend (for estimates)."""
    stop_reason: str | None = None
    infra_errors: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    published: list[PublishRecord] = Field(default_factory=list)

    def step(self, step_id: str) -> StepRecord | None:
        return next((s for s in self.steps if s.id == step_id), None)


def nights_dir(state: Path) -> Path:
    return state / "nightly"


def checkpoint_path(state: Path, night_id: str) -> Path:
    return nights_dir(state) / night_id / "checkpoint.json"


def new_night_id(now: datetime | None = None) -> str:
    return f"{(now or datetime.now(UTC)):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:4]}"


def save_checkpoint(state: Path, cp: Checkpoint) -> Path:
    cp.updated_at = datetime.now(UTC)
    path = checkpoint_path(state, cp.night_id)
    atomic_write_text(path, json.dumps(cp.model_dump(mode="json"), indent=2) + "\n")
    kill_point("checkpoint")
    return path


def load_checkpoint(path: Path) -> Checkpoint:
    return Checkpoint.model_validate_json(path.read_text(encoding="utf-8"))


def latest_unfinished(state: Path) -> Checkpoint | None:
    """The newest night, if it did not finish (killed, interrupted or failed, or stopped before
    its summary was written).

    Older unfinished nights are not picked up once a newer night exists: their baselines and
    budgets belong to a past state of the repository."""
    root = nights_dir(state)
    if not root.is_dir():
        return None
    for folder in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
        path = folder / "checkpoint.json"
        if not path.is_file():
            continue
        try:
            cp = load_checkpoint(path)
        except (OSError, ValidationError, ValueError):
            continue
        # a night stopped after its last step but before its summary was written is not over:
        # resuming it runs no step again and writes the summary
        done = cp.status == "finished" and (folder / "summary.json").is_file()
        return None if done else cp
    return None
