"""Durable state of nightly runs: the single-instance lock and the per-night checkpoint.

The lock is a file holding pid, host and start time, created with O_EXCL so two runs cannot both
get it; a lock whose process is gone (kill -9, reboot) is taken over. The checkpoint is written
atomically after every step, so `--resume` can continue from the last finished step.
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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optimizer.run.cache import atomic_write_text
from optimizer.workflows.nightly.budget import Spend, TrialRate
from optimizer.workflows.optimize import IterationResult

CHECKPOINT_VERSION = 1
NightStatus = Literal["running", "finished", "failed"]


class LockHeldError(Exception):
    """Another nightly run holds the lock (exit code 1)."""


class LockInfo(BaseModel):
    pid: int
    host: str
    started_at: str


def _alive(info: LockInfo) -> bool:
    """Whether the lock's owner may still run. Another host's process cannot be checked."""
    if info.host != socket.gethostname():
        return True
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NightLock:
    """`<state>/nightly.lock`; `acquire()` returns the stale lock it took over, if any."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = False

    def _read(self) -> LockInfo | None:
        try:
            return LockInfo.model_validate_json(self.path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            return None

    def acquire(self) -> LockInfo | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mine = LockInfo(pid=os.getpid(), host=socket.gethostname(),
                        started_at=datetime.now(UTC).isoformat(timespec="seconds"))
        stale: LockInfo | None = None
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                info = self._read()
                if info is not None and _alive(info):
                    where = "" if info.host == mine.host else f" on host {info.host}"
                    raise LockHeldError(
                        f"another nightly run (pid {info.pid}{where}, started {info.started_at}) "
                        f"is running; lock file {self.path}"
                    ) from None
                stale = info or LockInfo(pid=0, host="?", started_at="unreadable lock file")
                self._move_aside(info)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(mine.model_dump_json())
            self.held = True
            return stale
        raise LockHeldError(f"could not take the lock {self.path} (it keeps changing)")

    def _move_aside(self, seen: LockInfo | None) -> None:
        """Remove the stale lock by an atomic rename; if a live run replaced it meanwhile
        (a race between two takeovers), put that one back."""
        aside = self.path.with_name(f"{self.path.name}.stale-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = LockInfo.model_validate_json(aside.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            moved = None
        if moved is not None and moved != seen and _alive(moved):
            with contextlib.suppress(OSError):
                os.link(aside, self.path)
        with contextlib.suppress(FileNotFoundError):
            aside.unlink()

    def release(self) -> None:
        if not self.held:
            return
        info = self._read()
        if info is not None and info.pid == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.held = False


class StepRecord(BaseModel):
    """One finished step: a suite baseline or one proposal+evaluation iteration."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["baseline", "iteration"]
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
    return path


def load_checkpoint(path: Path) -> Checkpoint:
    return Checkpoint.model_validate_json(path.read_text(encoding="utf-8"))


def latest_unfinished(state: Path) -> Checkpoint | None:
    """The newest night, if it did not finish (killed, interrupted or failed).

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
        return cp if cp.status != "finished" else None
    return None
