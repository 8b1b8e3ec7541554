"""Optimize sessions and the proposal ledger.

A session's page shows, per iteration, what the loop recorded: the package the proposer read
(`optimize/<session>/iter-N/package.md`), its reply and proposal (hypothesis and diff), the
guard results, the tournament of an iteration with several candidates (each candidate, the
screening rounds, the merge and the winner), the gate's verdict table with its reasons, the
branch and commit, and the PR body of an accepted candidate. The ledger page lists every
proposal with filters.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptloop.optimizer.core.ledger import CandidateRecord, LedgerEntry, LedgerOpen
from promptloop.optimizer.report.html.trials import DiffFile, line_css
from promptloop.optimizer.report.store import RunIndexEntry
from promptloop.optimizer.report.table import Table, gate_table
from promptloop.optimizer.run.workspaces import pid_alive
from promptloop.optimizer.view.state import Session, StateFolder, session_of

OUTCOMES = ("accepted", "rejected", "inconclusive", "refused", "error")


def diff_view(diff: str, path: str) -> list[DiffFile]:
    """A proposal's unified diff as coloured lines for the report's `diff` macro."""
    if not diff.strip():
        return []
    return [DiffFile("modified", path, tuple((line_css(x), x) for x in diff.splitlines()))]


@dataclass(frozen=True)
class CandidateRow:
    """One candidate of an iteration's tournament (`optimize --candidates K`)."""

    record: CandidateRecord
    prompt_path: str

    @property
    def fixed(self) -> int:
        return sum(1 for t in self.record.screening
                   if (t.cand_passed and not t.base_passed) or t.cand_score > t.base_score)

    @property
    def broken(self) -> int:
        return sum(1 for t in self.record.screening if t.base_passed and not t.cand_passed)

    @property
    def why(self) -> str:
        r = self.record
        return r.stopped or "; ".join(v.get("message", "") for v in r.guard_violations)

    @property
    def diff(self) -> list[DiffFile]:
        return diff_view(self.record.diff, self.prompt_path)


@dataclass(frozen=True)
class Tournament:
    """Candidates, rounds, winner and merge of one iteration."""

    candidates: list[CandidateRow]
    rounds: list[str]

    @property
    def winner(self) -> str | None:
        return next((c.record.name for c in self.candidates if c.record.status == "winner"),
                    None)

    @property
    def merge(self) -> CandidateRow | None:
        return next((c for c in self.candidates if c.record.merged_from), None)

    @property
    def screened(self) -> int:
        return sum(1 for c in self.candidates if c.record.screening)


@dataclass(frozen=True)
class Iteration:
    number: int
    entry: LedgerEntry | None
    package: str | None
    reply: str | None
    pr_body: str | None
    opened: LedgerOpen | None = None
    """Its open record when no closing one exists yet."""

    @property
    def state(self) -> str:
        """For an iteration without a verdict: "running" while the process that opened it
        lives, "interrupted" when it is gone, "elsewhere" when it was opened on another host."""
        o = self.opened
        if o is not None and o.host != socket.gethostname():
            return "elsewhere"  # another machine's process: its life cannot be seen from here
        return "running" if o is not None and pid_alive(o.pid) else "interrupted"

    @property
    def verdict(self) -> Table | None:
        if self.entry is None or not self.entry.verdict_table:
            return None
        return gate_table(self.entry.verdict_table)

    @property
    def diff(self) -> list[DiffFile]:
        if self.entry is None:
            return []
        # a prompt inside a source file: the file's own lines, as its branch commits them
        return diff_view(self.entry.file_diff or self.entry.diff, self.entry.prompt_path)

    @property
    def tournament(self) -> Tournament | None:
        e = self.entry
        if e is None or not e.candidates:
            return None
        return Tournament([CandidateRow(c, e.prompt_path) for c in e.candidates],
                          list(e.screening))


@dataclass(frozen=True)
class SessionPage:
    session: Session
    iterations: list[Iteration]
    runs: list[RunIndexEntry]
    """The runs the session made (their `session` is its id), oldest first; runs it reused
    from the cache belong to the session that made them."""

    @property
    def first(self) -> LedgerEntry | None:
        return self.session.entries[0] if self.session.entries else None


def session_page(state: StateFolder, session: Session) -> SessionPage:
    by_number = {e.iteration: e for e in session.entries}
    opened = {o.iteration: o for o in state.unclosed() if session_of(o) == session.id}
    out = []
    for n in sorted({*session.iterations, *opened}):
        entry = by_number.get(n)
        pr = state.session_file(session, n, "PR.md")
        if pr is None and entry is not None:
            pr = state.recorded_file(entry.pr_body_path)
        out.append(Iteration(n, entry, state.session_file(session, n, "package.md"),
                             state.session_file(session, n, "reply.md"), pr,
                             None if entry is not None else opened.get(n)))
    runs = sorted((r for r in state.runs() if r.session == session.id),
                  key=lambda r: r.started_at)
    return SessionPage(session, out, runs)


@dataclass(frozen=True)
class SessionRow:
    session: Session

    @property
    def suites(self) -> str:
        return ", ".join(sorted({e.suite for e in self.session.entries}))

    @property
    def buckets(self) -> str:
        return ", ".join(sorted({e.bucket for e in self.session.entries}))

    @property
    def outcomes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.session.entries:
            out[e.outcome] = out.get(e.outcome, 0) + 1
        return out

    @property
    def branches(self) -> list[str]:
        return [e.branch for e in self.session.entries if e.branch]


# --- the ledger ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerFilter:
    agent: str = ""
    bucket: str = ""
    outcome: str = ""
    q: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> LedgerFilter:
        return cls(**{k: query.get(k, "").strip()[:200]
                      for k in ("agent", "bucket", "outcome", "q")})

    def keep(self, e: LedgerEntry) -> bool:
        if self.agent and e.agent != self.agent:
            return False
        if self.bucket and e.bucket != self.bucket:
            return False
        if self.outcome and e.outcome != self.outcome:
            return False
        text = " ".join((e.id, e.hypothesis, " ".join(e.reasons), e.branch or "")).lower()
        return not self.q or self.q.lower() in text


@dataclass(frozen=True)
class LedgerRow:
    entry: LedgerEntry

    @property
    def session(self) -> str:
        return session_of(self.entry)


@dataclass(frozen=True)
class LedgerPage:
    rows: list[LedgerRow]
    total: int
    filter: LedgerFilter
    choices: dict[str, list[str]]


def ledger_page(entries: Sequence[LedgerEntry], f: LedgerFilter) -> LedgerPage:
    """Newest first."""
    kept = sorted((e for e in entries if f.keep(e)), key=lambda e: e.at, reverse=True)
    choices = {
        "agent": sorted({e.agent for e in entries}),
        "bucket": sorted({e.bucket for e in entries}),
        "outcome": [o for o in OUTCOMES if any(e.outcome == o for e in entries)],
    }
    return LedgerPage([LedgerRow(e) for e in kept], len(entries), f, choices)
