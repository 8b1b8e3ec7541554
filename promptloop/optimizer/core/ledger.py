"""The proposal ledger: JSON lines read by later iterations, later runs and crash recovery.

Every iteration writes two records. An `open` record (`LedgerOpen`: pid, host, start time,
branch, worktree folder) goes in before the iteration creates its branch or worktree; the
closing record (`LedgerEntry`) goes in after the verdict, whatever happened to the proposal
(refused by a guard, failed to apply, evaluated and rejected, accepted, proposer error). Readers
pair the two by `id`; an open record without a later close belongs to an iteration in progress
or to a process that died mid-iteration, which the next run closes as `abandoned` once it has
removed what that iteration left (workflows/sweep.py).

The file stays valid JSONL: each record is written with one `write` call under a file lock,
and a torn last line (a process killed mid-write, a full disk) is skipped by readers and cut
off by the next write. A rejected idea is shown to the proposer again with its reason, and an
identical diff is never evaluated twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock
from pydantic import BaseModel, Field, ValidationError

from promptloop.optimizer.core.killpoint import kill_point
from promptloop.optimizer.core.redact import redact

LEDGER_VERSION = 1
Outcome = Literal["accepted", "rejected", "inconclusive", "refused", "error", "abandoned"]


def _now() -> datetime:
    return datetime.now(UTC)


class _Record(BaseModel):
    """What every ledger record says about its iteration."""

    version: int = LEDGER_VERSION
    id: str
    at: datetime = Field(default_factory=_now)
    suite: str
    agent: str
    bucket: str
    iteration: int
    base_commit: str
    prompt_path: str
    proposer: str


CandidateStatus = Literal["winner", "screened_out", "refused", "duplicate", "error",
                          "abandoned"]


class ScreenTrial(BaseModel):
    """One screening trial of a candidate, paired with a baseline trial of the same task."""

    task_id: str
    trial_index: int
    base_passed: bool
    cand_passed: bool
    base_score: float
    cand_score: float


class CandidateRecord(BaseModel):
    """One of the candidates of an iteration with `--candidates K` > 1 (every one is kept:
    refused, duplicate, screened out and the winner)."""

    name: str
    """c1, c2, ... in proposal order; `merge` for the merged candidate."""
    hypothesis: str = ""
    diff: str = ""
    diff_hash: str = ""
    status: CandidateStatus
    guard_violations: list[dict[str, str]] = Field(default_factory=list)
    """Why the guards refused it (or the duplicate it repeats); empty when it passed."""
    branch: str | None = None
    screening: list[ScreenTrial] = Field(default_factory=list)
    rounds: int = 0
    """Screening rounds it ran."""
    stopped: str = ""
    """Why it stopped; empty for the winner."""
    merged_from: list[str] = Field(default_factory=list)


class CandidateSlot(BaseModel):
    """A branch and worktree an iteration may create for one more candidate."""

    branch: str
    worktree: str


class LedgerEntry(_Record):
    """The closing record of an iteration (records without `kind` are closing records)."""

    kind: Literal["close"] = "close"
    hypothesis: str = ""
    diff: str = ""
    """The proposal's canonical diff of the prompt's text, as the proposer wrote it (for a
    prompt inside a source file, numbered from the region's first line)."""
    diff_hash: str = ""
    file_diff: str = ""
    """For a prompt inside a source file: the same change as a diff of the whole file, with its
    own line numbers (what the branch commits and the viewer shows); empty otherwise."""
    outcome: Outcome
    reasons: list[str] = Field(default_factory=list)
    guard_violations: list[dict[str, str]] = Field(default_factory=list)
    verdict_table: list[dict[str, Any]] = Field(default_factory=list)
    branch: str | None = None
    commit: str | None = None
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
    package_path: str | None = None
    pr_body_path: str | None = None
    candidates: list[CandidateRecord] = Field(default_factory=list)
    """With --candidates K > 1: every candidate of the iteration (empty for one patch)."""
    screening: list[str] = Field(default_factory=list)
    """With --candidates K > 1: the screening, round by round, in words."""

    def ideas(self) -> list[LedgerEntry]:
        """This entry and, as entries of their own, its candidates that lost or were refused
        (the ideas a later proposer should not repeat)."""
        out = [self] if self.diff else []
        for c in self.candidates:
            if c.status in ("screened_out", "refused") and c.diff:
                outcome: Outcome = "rejected" if c.status == "screened_out" else "refused"
                reasons = [c.stopped] if c.stopped else [v["message"] for v in
                                                        c.guard_violations]
                out.append(self.model_copy(update={
                    "id": f"{self.id} candidate {c.name}",  # the idea, not its iteration
                    "hypothesis": c.hypothesis, "diff": c.diff, "diff_hash": c.diff_hash,
                    "outcome": outcome, "reasons": reasons, "candidates": [], "branch": None,
                    "commit": None}))
        return out


class LedgerOpen(_Record):
    """An iteration began: who runs it and what it is about to create."""

    kind: Literal["open"] = "open"
    command: str
    """optimize | nightly (the command whose process runs the iteration)."""
    pid: int
    host: str
    repo: str
    """The repository the branch and worktree belong to."""
    branch: str
    worktree: str
    """The candidate worktree's folder (it exists only while the iteration runs)."""
    more: list[CandidateSlot] = Field(default_factory=list)
    """With --candidates K > 1: the branches and worktrees of the other candidates."""

    def abandoned(self, reasons: list[str]) -> LedgerEntry:
        """The closing record of this iteration when it never reached a verdict."""
        return LedgerEntry(
            id=self.id, suite=self.suite, agent=self.agent, bucket=self.bucket,
            iteration=self.iteration, base_commit=self.base_commit,
            prompt_path=self.prompt_path, proposer=self.proposer, outcome="abandoned",
            reasons=reasons,
        )


Record = LedgerEntry | LedgerOpen


def diff_hash(diff: str) -> str:
    """Hash of a diff's changed lines only, so re-numbered hunks of the same idea match."""
    changed = [
        ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    return hashlib.sha256("\n".join(changed).encode()).hexdigest()[:16]


def idea_key(diff: str) -> frozenset[str]:
    """What a diff changes, loosely: its added and removed lines, whitespace collapsed, each
    once, in any order. Two diffs of the same idea that differ only by a repeated line, the
    order of their lines or their spacing have one key (a tiny proposer sent the same rule
    twice, then once, and both were evaluated)."""
    return frozenset(
        ln[0] + " ".join(ln[1:].split())
        for ln in diff.splitlines()
        if ln[:1] in "+-" and not ln.startswith(("+++", "---")) and ln[1:].strip()
    )


def parse_record(line: str) -> Record | None:
    """One ledger line as its record; None for a blank, torn or unreadable line."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        if data.get("kind") == "open":
            return LedgerOpen.model_validate(data)
        return LedgerEntry.model_validate(data)
    except (json.JSONDecodeError, ValidationError):
        return None


def _repair_tail(fd: int) -> None:
    """Cut a torn last line (no newline and not a whole record) off the file open at `fd`;
    give a whole last record its missing newline."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return
    tail_start = max(0, size - 65536)
    while True:
        data = os.pread(fd, size - tail_start, tail_start)
        if data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n")
        if cut >= 0 or tail_start == 0:
            break
        tail_start = max(0, tail_start - 65536)
    last = data[cut + 1 :]
    if parse_record(last.decode("utf-8", errors="replace")) is not None:
        os.write(fd, b"\n")
    else:
        os.ftruncate(fd, tail_start + cut + 1)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = FileLock(str(path) + ".lock", timeout=60)
        """Held by every write; re-entrant, so the sweep holds it across a read and its
        writes."""

    def append(self, record: Record) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = (redact(record.model_dump_json()) + "\n").encode("utf-8")
        with self.lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                _repair_tail(fd)
                kill_point("ledger_write", lambda: _write_all(fd, data[: len(data) // 2]))
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self) -> list[Record]:
        """Every readable record, in the order written."""
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        return [r for r in (parse_record(ln) for ln in lines if ln.strip()) if r is not None]

    def entries(self) -> list[LedgerEntry]:
        """The closing records (the outcome of every iteration that ended)."""
        return [r for r in self.records() if isinstance(r, LedgerEntry)]

    def unclosed(self) -> list[LedgerOpen]:
        """Open records no later record closes: iterations running now, or whose process
        died before the verdict."""
        pending: dict[str, LedgerOpen] = {}
        for r in self.records():
            if isinstance(r, LedgerOpen):
                pending[r.id] = r
            else:
                pending.pop(r.id, None)
        return list(pending.values())

    def for_bucket(self, agent: str, bucket: str) -> list[LedgerEntry]:
        return [e for e in self.entries() if e.agent == agent and e.bucket == bucket]

    def rejected(self, agent: str, bucket: str) -> list[LedgerEntry]:
        """Ideas a proposer must not repeat: those that did not make it (candidates that lost
        their screening included), and accepted ones (their branch awaits review, or was
        declined and deleted: `seen_diff` refuses a repeat, so the proposer is told)."""
        return [
            idea
            for e in self.for_bucket(agent, bucket)
            for idea in e.ideas()
            if idea.outcome in ("rejected", "refused", "inconclusive", "accepted")
        ]

    def seen_diff(self, agent: str, bucket: str, digest: str,
                  diff: str = "") -> LedgerEntry | None:
        """An idea of this bucket already decided with the same change: the same changed
        lines (`digest`), or the same `idea_key` of `diff`."""
        key = idea_key(diff) if diff else None
        for e in self.for_bucket(agent, bucket):
            for idea in e.ideas():
                if idea.outcome in ("error", "inconclusive", "abandoned"):
                    continue
                if idea.diff_hash == digest or (key and idea.diff and idea_key(idea.diff) == key):
                    return idea
        return None
