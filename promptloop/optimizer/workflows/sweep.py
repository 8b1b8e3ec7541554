"""The crash sweep: settle iterations whose process died before their verdict.

Every optimize, review and nightly run (and `promptloop doctor --fix`) starts with
`sweep_abandoned`: each open ledger record without a close whose process is gone (same host,
pid no longer running) gets its candidate worktree removed (`git worktree remove`, the temp
folder, `git worktree prune`), its `promptloop/...` branch deleted, and a closing record with
outcome `abandoned` naming what was cleaned. Records of live processes (a run going on in
another terminal, this process's own) and of other hosts are left alone.

`fix_strays` (doctor --fix only) also cleans this repository's strays: worktrees of this
repository in candidate folders of dead processes, `promptloop/...` branches that carry no
verdict (the iteration never committed) and are not held by a live run, and candidate folders
in the temporary folder that git has forgotten, but only those it owns: a folder the ledger of
this state folder names, or one whose owner marker (`git.OWNER_MARKER`) names this repository
and whose lock no live process holds. A folder of another repository, of a run in another
container or pid namespace, or without a marker is never removed: a process id in a folder's
name says nothing about who made it. Accepted and kept branches carry a verdict trailer and
are never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from promptloop.optimizer.core.events import EventSink, IterationAbandoned, ignore
from promptloop.optimizer.core.ledger import Ledger, LedgerOpen
from promptloop.optimizer.git import (
    WORKTREE_PREFIX,
    GitOpsError,
    folder_owner,
    owner_locked,
    repository_id,
)
from promptloop.optimizer.git_sweep import Sweeper, folder_pid
from promptloop.optimizer.run.workspaces import pid_alive


def ledger_of(state_dir: Path) -> Ledger:
    return Ledger(state_dir / "ledger.jsonl")


def is_dead(record: LedgerOpen) -> bool:
    """The process that opened `record` is gone (only decidable on the same host)."""
    if record.host != socket.gethostname():
        return False
    return record.pid != os.getpid() and not pid_alive(record.pid)


def sweep_abandoned(state_dir: Path, emit: EventSink = ignore) -> list[IterationAbandoned]:
    """Clean up and close every iteration of a dead process in the ledger of `state_dir`."""
    ledger = ledger_of(state_dir)
    if not ledger.path.is_file():
        return []
    cleaned: list[IterationAbandoned] = []
    with ledger.lock:  # two runs starting together must not both close the same record
        for record in ledger.unclosed():
            if not is_dead(record):
                continue
            event = _clean(record)
            ledger.append(record.abandoned([event.describe()]))
            emit(event)
            cleaned.append(event)
    return cleaned


def _clean(record: LedgerOpen) -> IterationAbandoned:
    """Remove the iteration's worktree and branch, and those of its other candidates
    (`--candidates K`); the event reports the iteration's own."""
    slots = [(record.branch, Path(record.worktree))]
    slots += [(s.branch, Path(s.worktree)) for s in record.more]
    done = [_clean_slot(record.repo, branch, worktree) for branch, worktree in slots]
    removed, deleted = done[0]
    return IterationAbandoned(
        id=record.id, pid=record.pid, host=record.host, started_at=record.at,
        branch=record.branch, branch_deleted=deleted, worktree=record.worktree,
        worktree_removed=removed, others_cleaned=sum(a + b for a, b in done[1:]),
    )


def _clean_slot(repo: str, branch: str, worktree: Path) -> tuple[bool, bool]:
    """(worktree removed, branch deleted) for one candidate of a dead iteration."""
    removed = deleted = False
    try:
        with Sweeper(repo) as git:
            removed = git.remove_worktree(worktree)
            deleted = git.branch_exists(branch) and git.drop_branch(branch)
    except GitOpsError:  # the repository is gone: its folders may still be on disk
        if worktree.parent.name.startswith(WORKTREE_PREFIX) and worktree.parent.exists():
            shutil.rmtree(worktree.parent, ignore_errors=True)
            removed = True
    return removed, deleted


class StrayCleanup(BaseModel):
    """What `fix_strays` removed."""

    worktrees: list[str] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)


def _live(pid: int | None) -> bool:
    return pid is not None and (pid == os.getpid() or pid_alive(pid))


def fix_strays(repo: Path, state_dir: Path) -> StrayCleanup:
    """Remove candidate worktrees, folders and unfinished branches no live run holds."""
    out = StrayCleanup()
    claimed = {b for r in ledger_of(state_dir).unclosed() if not is_dead(r)
               for b in (r.branch, *(s.branch for s in r.more))}
    with Sweeper(repo) as git:
        git.prune()
        for wt in git.worktrees():
            if wt.ours and not _live(folder_pid(wt.path.parent)) and wt.branch not in claimed:
                git.remove_worktree(wt.path)
                out.worktrees.append(str(wt.path))
        held = {wt.branch for wt in git.worktrees() if wt.branch}
        unfinished = [b for b, verdict in git.verdicts().items()
                      if verdict is None and b not in claimed and b not in held]
        out.branches += git.drop_branches(unfinished)
    registered = {str(wt) for wt in out.worktrees}
    named = _ledger_folders(state_dir)
    me = repository_id(repo)
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKTREE_PREFIX}*"):
        if str(folder / "worktree") in registered or not _owned(folder, named, me):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        out.folders.append(str(folder))
    return out


def _ledger_folders(state_dir: Path) -> set[Path]:
    """Candidate folders the ledger of `state_dir` names, except those of iterations that may
    still be running (open, and not known to be dead)."""
    ledger = ledger_of(state_dir)
    if not ledger.path.is_file():
        return set()
    running = {r.id for r in ledger.unclosed() if not is_dead(r)}
    return {Path(w).parent.resolve() for r in ledger.records()
            if isinstance(r, LedgerOpen) and r.id not in running
            for w in (r.worktree, *(s.worktree for s in r.more))}


def _owned(folder: Path, named: set[Path], repo_id: str) -> bool:
    """`folder` is this repository's to remove: not in use by a live process, and named by
    this state folder's ledger or marked as made by this repository."""
    if _live(folder_pid(folder)) or owner_locked(folder):
        return False
    if folder.resolve() in named:
        return True
    return folder_owner(folder) == repo_id


__all__ = ["StrayCleanup", "fix_strays", "is_dead", "ledger_of", "sweep_abandoned"]
