"""The proposal ledger: one JSON line per proposal, read by later iterations and later runs.

Every proposal is recorded whatever happened to it (refused by a guard, failed to apply,
evaluated and rejected, accepted, proposer error), so a rejected idea is shown to the proposer
again with its reason and an identical diff is never evaluated twice.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock
from pydantic import BaseModel, Field

LEDGER_VERSION = 1
Outcome = Literal["accepted", "rejected", "inconclusive", "refused", "error"]


class LedgerEntry(BaseModel):
    version: int = LEDGER_VERSION
    id: str
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    suite: str
    agent: str
    bucket: str
    iteration: int
    base_commit: str
    prompt_path: str
    proposer: str
    hypothesis: str = ""
    diff: str = ""
    diff_hash: str = ""
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


def diff_hash(diff: str) -> str:
    """Hash of a diff's changed lines only, so re-numbered hunks of the same idea match."""
    changed = [
        ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    return hashlib.sha256("\n".join(changed).encode()).hexdigest()[:16]


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, entry: LedgerEntry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (
            FileLock(str(self.path) + ".lock", timeout=30),
            self.path.open("a", encoding="utf-8") as fh,
        ):
            fh.write(entry.model_dump_json() + "\n")

    def entries(self) -> list[LedgerEntry]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(LedgerEntry.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValueError):
                continue  # a torn last line from a killed process is not fatal
        return out

    def for_bucket(self, agent: str, bucket: str) -> list[LedgerEntry]:
        return [e for e in self.entries() if e.agent == agent and e.bucket == bucket]

    def rejected(self, agent: str, bucket: str) -> list[LedgerEntry]:
        return [
            e
            for e in self.for_bucket(agent, bucket)
            if e.outcome in ("rejected", "refused", "inconclusive") and e.diff
        ]

    def seen_diff(self, agent: str, bucket: str, digest: str) -> LedgerEntry | None:
        for e in self.for_bucket(agent, bucket):
            if e.diff_hash == digest and e.outcome not in ("error", "inconclusive"):
                return e
        return None
