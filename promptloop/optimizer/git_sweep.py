"""What a killed run leaves in git, and the verdict marks that tell finished branches apart.

A process killed mid-iteration (kill -9, the OOM killer, a power cut) runs no cleanup: its
candidate worktree stays registered with git and on disk under the temp folder, and its
`promptloop/...` branch stays. `Sweeper` removes both for the crash sweep
(workflows/sweep.py) and `promptloop doctor --fix`.

Every candidate commit ends with trailers naming its verdict and its branch:

    Promptloop-Verdict: accept
    Promptloop-Branch: promptloop/pkm_agent/skip_trivial/1a2b3c4d
    Promptloop-Ledger-Id: 20260314T101500-a1b2c3-1

so an accepted branch can be told apart from a kept rejected one, and from a branch whose
iteration never committed (its tip is the base commit, or a commit made for another branch),
without the ledger.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from promptloop.optimizer.git import (
    BRANCH_PREFIX,
    WORKTREE_PREFIX,
    GitOps,
    GitOpsError,
    identity_env,
    remove_worktree,
)

VERDICT_TRAILER = "Promptloop-Verdict"
BRANCH_TRAILER = "Promptloop-Branch"
LEDGER_TRAILER = "Promptloop-Ledger-Id"


@dataclass(frozen=True)
class WorktreeInfo:
    path: Path
    branch: str | None
    """Checked-out branch, None when detached."""
    prunable: bool
    """Its folder is gone; `git worktree prune` forgets it."""

    @property
    def ours(self) -> bool:
        """Made by promptloop: a candidate folder, or a promptloop branch checked out."""
        return (self.path.parent.name.startswith(WORKTREE_PREFIX)
                or (self.branch or "").startswith(BRANCH_PREFIX))


def trailers(message: str) -> dict[str, str]:
    """`Key: value` lines of a commit message's last paragraph (git's trailer block)."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return {}
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if not sep or not key or " " in key:
            return {}
        out[key] = value.strip()
    return out


def verdict_trailers(verdict: str, branch: str, ledger_id: str) -> str:
    """The trailer block that ends every candidate commit message."""
    return (f"{VERDICT_TRAILER}: {verdict}\n{BRANCH_TRAILER}: {branch}\n"
            f"{LEDGER_TRAILER}: {ledger_id}\n")


GRADUATED = "graduated"
"""What a `promptloop/graduate/...` branch carries in place of a verdict: `graduate` makes it
whole, in one commit (a finished result for the user's PR, never an unfinished iteration that
a sweep or `doctor --fix` may delete)."""


def verdict_in(branch: str, message: str) -> str | None:
    """The verdict a tip commit `message` of `branch` carries, None when it is no verdict
    commit of that branch (see `Sweeper.verdict_of`); a graduation branch: `GRADUATED`."""
    if branch.startswith(f"{BRANCH_PREFIX}graduate/"):
        return GRADUATED
    marks = trailers(message)
    if VERDICT_TRAILER in marks or BRANCH_TRAILER in marks:
        return marks.get(VERDICT_TRAILER) if marks.get(BRANCH_TRAILER) == branch else None
    # commits made before the trailers existed: "promptloop(...)" subject, "Verdict:" line
    if not message.startswith("promptloop("):
        return None
    for line in message.splitlines():
        if line.startswith("Verdict: "):
            return line.removeprefix("Verdict: ").strip()
    return None


def folder_pid(path: Path) -> int | None:
    """The process id in a candidate folder's name (`promptloop-wt-<pid>-<random>`)."""
    name = path.name
    if not name.startswith(WORKTREE_PREFIX):
        return None
    pid = name[len(WORKTREE_PREFIX):].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


class Sweeper(GitOps):
    """GitOps plus the operations that clean up after killed runs."""

    def worktrees(self) -> list[WorktreeInfo]:
        """Every worktree except the main one."""
        out = self._git("worktree", "list", "--porcelain")
        trees: list[WorktreeInfo] = []
        for block in out.strip().split("\n\n")[1:]:  # the first entry is the main worktree
            fields: dict[str, str] = {}
            for line in block.splitlines():
                key, _, value = line.partition(" ")
                fields[key] = value
            branch = fields.get("branch", "").removeprefix("refs/heads/") or None
            trees.append(WorktreeInfo(Path(fields["worktree"]), branch, "prunable" in fields))
        return trees

    def prune(self) -> None:
        """`git worktree prune`: forget worktrees whose folder is gone."""
        with contextlib.suppress(GitOpsError):
            self._git("worktree", "prune")

    def remove_worktree(self, path: Path) -> bool:
        """Remove a candidate worktree at `path` (registered or not) and its temp folder, then
        prune. Only folders named like ours are deleted from disk. True when anything was."""
        registered = any(w.path.resolve() == path.resolve() for w in self.worktrees())
        folder = path.parent
        ours = folder.name.startswith(WORKTREE_PREFIX) and folder.exists()
        remove_worktree(self.root, path, folder if ours else None)
        # only what is gone counts as cleaned: a removal git refused is not reported as done
        return (registered or ours) and not path.exists()

    def drop_branch(self, branch: str) -> bool:
        """Remove one of our half-made candidate branches and any worktree left holding it
        (a process killed mid-candidate leaves both). True when the branch was deleted."""
        if not branch.startswith(BRANCH_PREFIX):
            return False
        for wt in self.worktrees():
            if wt.branch == branch:
                self.remove_worktree(wt.path)
        self.prune()
        try:
            self._git("branch", "-D", "--", branch)
        except GitOpsError:
            return False
        return True

    def verdict_of(self, branch: str) -> str | None:
        """The verdict the tip commit of `branch` carries (accept, reject, inconclusive), None
        when the iteration never committed on this branch."""
        try:
            message = self._git("log", "-1", "--format=%B", f"refs/heads/{branch}", "--")
        except GitOpsError:
            return None
        return verdict_in(branch, message)

    def verdicts(self, prefix: str = BRANCH_PREFIX) -> dict[str, str | None]:
        """Every branch named `prefix`* -> the verdict its tip carries (as `verdict_of`), in
        one `git for-each-ref`."""
        out = self._git("for-each-ref", "--format=%(refname)%00%(contents)%00",
                        f"refs/heads/{prefix}")
        fields = out.split("\0")
        found: dict[str, str | None] = {}
        for ref, message in zip(fields[0::2], fields[1::2], strict=False):
            name = ref.strip().removeprefix("refs/heads/")
            if name.startswith(prefix):
                found[name] = verdict_in(name, message)
        return dict(sorted(found.items()))

    def drop_branches(self, branches: list[str]) -> list[str]:
        """`drop_branch` for many branches with one worktree listing and one prune; returns
        the branches deleted."""
        ours = [b for b in branches if b.startswith(BRANCH_PREFIX)]
        if not ours:
            return []
        for wt in self.worktrees():
            if wt.branch in ours:
                self.remove_worktree(wt.path)
        self.prune()
        try:
            self._git("branch", "-D", "--", *ours)
        except GitOpsError:  # some could not go: find out which, one at a time
            return [b for b in ours if self._delete(b) or not self.branch_exists(b)]
        return ours

    def _delete(self, branch: str) -> bool:
        try:
            self._git("branch", "-D", "--", branch)
        except GitOpsError:
            return False
        return True

    def set_message(self, branch: str, message: str) -> str:
        """Reword the tip commit of `branch` (e.g. to add the verdict) without a checkout."""
        if not branch.startswith(BRANCH_PREFIX):
            raise GitOpsError(f"refusing to rewrite {branch!r}: not a {BRANCH_PREFIX}* branch")
        tip = self.repo.commit(self.resolve(f"refs/heads/{branch}"))
        author = f"{tip.author.name} <{tip.author.email}>"
        args = ["commit-tree", tip.tree.hexsha, "-m", message]
        for parent in tip.parents:
            args += ["-p", parent.hexsha]
        new = self._git(*args, env=identity_env(author)).strip()
        self._git("update-ref", f"refs/heads/{branch}", new, tip.hexsha)
        return new


__all__ = [
    "BRANCH_TRAILER",
    "LEDGER_TRAILER",
    "VERDICT_TRAILER",
    "Sweeper",
    "WorktreeInfo",
    "folder_pid",
    "trailers",
    "verdict_in",
    "verdict_trailers",
]
