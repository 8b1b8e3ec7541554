"""The git part of `promptloop doctor`: the checkout, promptloop's branches and worktrees, the
iterations the ledger shows open, and (`--fix`) cleaning what killed runs left behind."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from promptloop.optimizer.core.config import state_folder
from promptloop.optimizer.core.events import IterationAbandoned
from promptloop.optimizer.git import GitOpsError, repo_root
from promptloop.optimizer.git_sweep import Sweeper
from promptloop.optimizer.run.workspaces import sweep_stale_folders
from promptloop.optimizer.workflows.sweep import (
    StrayCleanup,
    fix_strays,
    is_dead,
    ledger_of,
    sweep_abandoned,
)

BranchState = Literal["accepted", "kept", "unfinished"]


class Worktree(BaseModel):
    path: str
    branch: str | None
    prunable: bool


class BranchStatus(BaseModel):
    name: str
    verdict: str | None
    """From the tip commit's Promptloop-Verdict trailer; None: never committed."""
    state: BranchState
    """accepted (verdict accept), kept (another verdict, --keep-rejected), unfinished."""


class OpenIteration(BaseModel):
    """An iteration the ledger shows begun and not closed."""

    id: str
    command: str
    pid: int
    host: str
    started_at: datetime
    branch: str
    worktree: str
    dead: bool
    """Its process is gone: the next run or `doctor --fix` cleans it up."""


class GitStatus(BaseModel):
    repo_root: str | None = None
    branch: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    untracked: int = 0
    """Files git does not track and does not ignore (not part of `dirty`: runs read HEAD,
    but a new prompt or suite file left uncommitted is a usual first-day surprise)."""
    promptloop_branches: list[str] = Field(default_factory=list)
    branches: list[BranchStatus] = Field(default_factory=list)
    stray_worktrees: list[Worktree] = Field(default_factory=list)
    state_dir: str | None = None
    open_iterations: list[OpenIteration] = Field(default_factory=list)
    error: str | None = None


class Cleanup(BaseModel):
    """What `doctor --fix` removed."""

    abandoned: list[IterationAbandoned] = Field(default_factory=list)
    strays: StrayCleanup = Field(default_factory=StrayCleanup)
    scratch: list[str] = Field(default_factory=list)
    """Trial workspaces and agent processes' private folders of promptloop processes that
    died (`run.workspaces.sweep_stale_folders`)."""

    @property
    def lines(self) -> list[str]:
        s = self.strays
        return ([e.describe() for e in self.abandoned]
                + [f"removed stray worktree {w}" for w in s.worktrees]
                + [f"removed leftover folder {f}" for f in s.folders]
                + [f"deleted unfinished branch {b}" for b in s.branches]
                + [f"removed a killed run's trial folder {f}" for f in self.scratch])


def _branch_state(verdict: str | None) -> BranchState:
    if verdict is None:
        return "unfinished"
    return "accepted" if verdict == "accept" else "kept"


def check_git(start: Path | None = None, state_dir: Path | None = None) -> GitStatus:
    root = repo_root(start)
    if root is None:
        return GitStatus(error="not inside a git repository")
    state = state_folder(root, state_dir)
    status = GitStatus(repo_root=str(root), state_dir=str(state))
    try:
        with Sweeper(root) as git:
            head = git.head_info()
            status.branch = head.branch if not head.detached else None
            status.commit = head.commit
            status.dirty = head.dirty
            status.untracked = len(git.repo.untracked_files)
            verdicts = git.verdicts()
            status.promptloop_branches = list(verdicts)
            status.branches = [BranchStatus(name=name, verdict=verdict,
                                            state=_branch_state(verdict))
                               for name, verdict in verdicts.items()]
            status.stray_worktrees = [
                Worktree(path=str(w.path), branch=w.branch, prunable=w.prunable)
                for w in git.worktrees()
                if w.prunable or w.ours
            ]
    except (GitOpsError, ValueError) as err:
        status.error = str(err)
    status.open_iterations = [
        OpenIteration(id=r.id, command=r.command, pid=r.pid, host=r.host, started_at=r.at,
                      branch=r.branch, worktree=r.worktree, dead=is_dead(r))
        for r in ledger_of(state).unclosed()
    ]
    return status


def fix_git(start: Path | None = None, state_dir: Path | None = None) -> Cleanup:
    """`doctor --fix`: the crash sweep of the ledger, then worktrees, folders and unfinished
    branches no ledger knows about."""
    scratch = [str(p) for p in sweep_stale_folders()]
    root = repo_root(start)
    if root is None:
        return Cleanup(scratch=scratch)
    state = state_folder(root, state_dir)
    return Cleanup(abandoned=sweep_abandoned(state), strays=fix_strays(root, state),
                   scratch=scratch)


__all__ = [
    "BranchStatus",
    "Cleanup",
    "GitStatus",
    "OpenIteration",
    "Worktree",
    "check_git",
    "fix_git",
    "state_folder",
]
