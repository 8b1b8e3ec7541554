"""Read-only access to one state folder, confined to it.

Every file the viewer opens goes through `StateFolder.confine`: the path is resolved (symlinks
followed) and must still lie inside the resolved state folder, so a symlink planted in the
folder, a run name or session id taken from a URL, or a path recorded in the ledger can never
make the viewer read a file elsewhere. Names from URLs are looked up among the names the folder
lists (the run index, the ledger, the nightly folders) and are never joined onto a path as
typed. Runs are read through the report store's public functions only; parsed runs and their
summaries are cached by the report file's size and modification time.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from promptloop.optimizer.core.ledger import Ledger, LedgerEntry, LedgerOpen
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.report.store import (
    ReportError,
    RunIndexEntry,
    default_store_dir,
    list_runs,
    load_report_file,
    report_path,
)
from promptloop.optimizer.report.summary import RunSummary, summarize

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
"""Session and night ids as the workflows make them (timestamps, hex, dashes)."""
SESSION_FILES = ("package.md", "reply.md", "PR.md")
RUN_CACHE = 12


class NotFoundError(Exception):
    """Nothing of that name in the state folder (or it would lie outside it): HTTP 404."""


class BadRequestError(Exception):
    """A request the viewer understands but cannot answer (e.g. runs of two suites): 400."""


Signature = tuple[int, int]


@dataclass
class Session:
    """An optimize session: its ledger entries (one per iteration) and its folder."""

    id: str
    entries: list[LedgerEntry] = field(default_factory=list)
    folder: Path | None = None

    @property
    def iterations(self) -> list[int]:
        numbers = {e.iteration for e in self.entries}
        if self.folder is not None:
            for p in self.folder.glob("iter-*"):
                suffix = p.name.removeprefix("iter-")
                if suffix.isdigit():
                    numbers.add(int(suffix))
        return sorted(numbers)


def session_of(entry: LedgerEntry | LedgerOpen) -> str:
    """The session id of a ledger entry (`<session>-<iteration>`)."""
    head, sep, tail = entry.id.rpartition("-")
    return head if sep and tail.isdigit() else entry.id


class StateFolder:
    """The state folder the viewer serves (safe to share between request threads)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real = root.resolve()
        self.store = default_store_dir(root)
        self._lock = threading.Lock()
        self._index: tuple[Signature | None, list[RunIndexEntry]] = (None, [])
        self._runs: OrderedDict[str, tuple[Signature, RunResult]] = OrderedDict()
        self._summaries: dict[str, tuple[Signature, RunSummary]] = {}

    # --- confinement ----------------------------------------------------------------------
    def confine(self, path: Path) -> Path:
        """`path` resolved, if it exists and lies inside the state folder; else NotFoundError."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise NotFoundError(f"{path.name}: not found") from None
        if real != self.real and not real.is_relative_to(self.real):
            raise NotFoundError(f"{path.name}: not found")
        return real

    def read_text(self, path: Path) -> str:
        real = self.confine(path)
        if not real.is_file():
            raise NotFoundError(f"{path.name}: not a file")
        try:
            return real.read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise NotFoundError(f"{path.name}: cannot be read ({err.strerror})") from None

    def _child_dir(self, parent: Path, name: str) -> Path:
        if not ID_RE.fullmatch(name):
            raise NotFoundError(f"{name!r}: not found")
        real = self.confine(parent / name)
        if not real.is_dir():
            raise NotFoundError(f"{name}: not a folder")
        return real

    # --- runs -----------------------------------------------------------------------------
    def _stat(self, path: Path) -> Signature | None:
        try:
            st = self.confine(path).stat()
        except (NotFoundError, OSError):
            return None
        return st.st_size, st.st_mtime_ns

    def runs(self) -> list[RunIndexEntry]:
        """Every saved run, oldest first, from the index alone (no report is opened)."""
        index = self.store / "index.jsonl"
        sig = self._stat(index)
        with self._lock:
            if sig is not None and self._index[0] == sig:
                return self._index[1]
        entries = list_runs(self.confine(self.store)) if sig is not None else []
        with self._lock:
            self._index = (sig, entries)
        return entries

    def entry(self, name: str) -> RunIndexEntry:
        for e in self.runs():
            if e.run_name == name:
                return e
        raise NotFoundError(f"no run named {name!r} in this state folder")

    def _report(self, name: str) -> tuple[Path, Signature]:
        self.entry(name)
        try:
            path = self.confine(report_path(self.store, name))
        except ReportError:
            raise NotFoundError(f"no run named {name!r}") from None
        st = path.stat()
        return path, (st.st_size, st.st_mtime_ns)

    def run(self, name: str) -> RunResult:
        path, sig = self._report(name)
        with self._lock:
            hit = self._runs.get(name)
            if hit is not None and hit[0] == sig:
                self._runs.move_to_end(name)
                return hit[1]
        run = load_report_file(path)
        with self._lock:
            self._runs[name] = (sig, run)
            while len(self._runs) > RUN_CACHE:
                self._runs.popitem(last=False)
        return run

    def summary(self, name: str) -> RunSummary:
        _, sig = self._report(name)
        with self._lock:
            hit = self._summaries.get(name)
            if hit is not None and hit[0] == sig:
                return hit[1]
        summary = summarize(self.run(name))
        with self._lock:
            self._summaries[name] = (sig, summary)
        return summary

    # --- ledger and optimize sessions -----------------------------------------------------
    def _ledger(self) -> Ledger | None:
        try:
            return Ledger(self.confine(self.root / "ledger.jsonl"))
        except NotFoundError:
            return None

    def ledger(self) -> list[LedgerEntry]:
        found = self._ledger()
        return found.entries() if found is not None else []

    def unclosed(self) -> list[LedgerOpen]:
        """Iterations opened and not closed: running now, or whose process died first."""
        found = self._ledger()
        return found.unclosed() if found is not None else []

    def sessions(self) -> list[Session]:
        """Sessions newest first: from the ledger and from the folders under optimize/."""
        found: dict[str, Session] = {}
        for e in self.ledger():
            found.setdefault(session_of(e), Session(session_of(e))).entries.append(e)
        try:
            folder = self.confine(self.root / "optimize")
        except NotFoundError:
            folder = None
        if folder is not None and folder.is_dir():
            for p in folder.iterdir():
                try:
                    real = self._child_dir(self.root / "optimize", p.name)
                except NotFoundError:
                    continue  # not a session folder, or a link out of the state folder
                found.setdefault(p.name, Session(p.name)).folder = real
        return sorted(found.values(), key=lambda s: s.id, reverse=True)

    def session(self, session_id: str) -> Session:
        for s in self.sessions():
            if s.id == session_id:
                return s
        raise NotFoundError(f"no optimize session {session_id!r}")

    def session_file(self, session: Session, iteration: int, name: str) -> str | None:
        """A file the session wrote for an iteration (package, proposer reply, PR body)."""
        if session.folder is None or name not in SESSION_FILES:
            return None
        try:
            return self.read_text(session.folder / f"iter-{iteration}" / name)
        except NotFoundError:
            return None

    def recorded_file(self, recorded: str | None) -> str | None:
        """A file whose path a ledger entry or checkpoint recorded, if inside the folder."""
        if not recorded:
            return None
        path = Path(recorded)
        # a relative path was recorded from the folder holding the state folder (the checkout)
        for candidate in ([path] if path.is_absolute() else [self.root.parent / path,
                                                             Path.cwd() / path]):
            try:
                return self.read_text(candidate)
            except NotFoundError:
                continue
        return None

    # --- nightly --------------------------------------------------------------------------
    def nights(self) -> list[Path]:
        """Folders of nightly runs, newest first (each holds checkpoint.json)."""
        try:
            root = self.confine(self.root / "nightly")
        except NotFoundError:
            return []
        if not root.is_dir():
            return []
        out = []
        for p in root.iterdir():
            if ID_RE.fullmatch(p.name) and p.is_dir():
                try:
                    out.append(self._child_dir(self.root / "nightly", p.name))
                except NotFoundError:
                    continue
        return sorted(out, key=lambda p: p.name, reverse=True)

    def night_folder(self, night_id: str) -> Path:
        return self._child_dir(self.root / "nightly", night_id)
