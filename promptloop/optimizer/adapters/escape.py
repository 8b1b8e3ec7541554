"""Files an agent process wrote outside its workspace, found after the trial.

Where a sandbox runs the trial (`box`: bwrap or unshare), nothing outside the workspace and
its private HOME and TMPDIR is writable; the check below is a second line only. Where none does
(`box.for_trials() == "none"`), it is all there is:

- around each trial the workspace's parent folder and the top level of the repository root are
  listed and compared; without a sandbox also (`deep`) every file of the checkout (but its
  state folder, `.git` and the workspace; in `review`, where the agent runs from an export of
  the base commit, both the export and the checkout promptloop runs in: `box.checkout_of`),
  the git folder's config, HEAD, hooks, refs and
  info, and the startup files of the real HOME (`propose.watch.HOME_FILES`) by type, mode,
  size, inode and change time;
- a change is a file written outside the workspace: the trial is ERRORED with the cause
  "wrote outside its workspace: PATH" (no evidence about the prompt: the summary counts it by
  that cause, optimize's gate rejects a candidate with such a trial, `workflows.gating`) and
  the write is undone where promptloop can: a new
  file or folder is removed, a changed file of the checkout that matched HEAD before the trial
  is restored from git, a changed file of the git folder or HOME's startup files is restored
  from the copy read before the trial. What cannot be undone (a file of the checkout that had
  uncommitted changes of yours) is named in the message ("not undone").

What it does not see without a sandbox: writes to absolute paths elsewhere (/tmp, the real
home's other files), reads of anything your user can read. A trial running side by side with
others may be blamed for a sibling's write (every trial running then is told). The parent
folder is checked only when it holds nothing but the workspace when the trial starts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from promptloop.agents import trees
from promptloop.optimizer.adapters import box
from promptloop.optimizer.core.isolation import OUTSIDE
from promptloop.optimizer.propose import watch

if TYPE_CHECKING:
    from promptloop.optimizer.adapters.outcome import AdapterOutcome, TrialLabel

UNDONE: list[tuple[float, str]] = []
"""(monotonic time, path) of each write a trial's check undid in this process: a trial that
ran meanwhile finds the file as it was before its own start, so a write of its own to the
same file would go unseen; it is blamed too (`Snapshot.judge`)."""
UNDONE_KEPT_S = 6 * 3600.0

IGNORED_AT_ROOT = frozenset({".promptloop", ".git", "__pycache__", ".dart_tool"})
"""promptloop's own state folder and git's, which promptloop itself writes during a run, and
the caches an interpreter makes next to the code it runs (Python's bytecode, `dart run`'s)."""


def _entries(folder: Path) -> frozenset[str]:
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()


BACKUP_MAX_BYTES = 256 * 1024
"""Files of the git folder and HOME's startup files up to this size are kept before a trial
(to put them back)."""


@dataclass(frozen=True)
class Checkout:
    """A tree of files a trial must not change, and how a changed file is put back: from git
    (`git checkout HEAD`, when it matched HEAD before the trial) or, for an export of a commit
    (review's copy of the base), from that commit in the checkout's repository."""

    root: Path
    dirty: frozenset[str] | None
    """Files that differed from HEAD ('None': not a git checkout)."""
    commit: str | None = None
    repository: Path | None = None
    """For an export: the commit it holds and the checkout whose repository has it."""

    def restore(self, rel: str) -> bool:
        """Put file `rel` back; whether that was possible."""
        path = self.root / rel
        if self.commit is not None:
            if self.repository is None:
                return False
            done = subprocess.run(["git", "-C", str(self.repository), "cat-file", "blob",
                                   f"{self.commit}:{rel}"], capture_output=True, timeout=60,
                                  check=False)
            if done.returncode != 0:
                return False
            if path.is_symlink() or path.is_dir():
                trees.remove_tree(path)
            path.write_bytes(done.stdout)
            return True
        if self.dirty is None or rel in self.dirty:
            return False
        if path.is_symlink() or path.is_dir():
            trees.remove_tree(path)
        done = subprocess.run(["git", "-C", str(self.root), "checkout", "HEAD", "--", rel],
                              capture_output=True, timeout=60, check=False)
        return done.returncode == 0


@dataclass
class Deep:
    """The state of the checkouts, their git folders and HOME's startup files before a trial
    (the check without a sandbox). The checkouts: the repository the agent runs from and,
    where that is an export of a commit (review), the checkout promptloop runs in
    (`box.checkout_of`): an agent writing there by absolute path is caught too."""

    repo_root: Path
    before: watch.Snapshot
    checkouts: dict[Path, Checkout]
    backup: dict[Path, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, workspace: Path, repo_root: Path) -> Deep:
        root = repo_root.resolve()
        roots = [root]
        outer = box.checkout_of(repo_root)
        if outer is not None:
            roots.append(outer)
        commit = box.export_of(repo_root)
        inner = [*(s.resolve() for r in roots for s in box.state_folders(r)),
                 workspace.resolve(), *roots]
        checkouts: dict[Path, Checkout] = {}
        watched: list[watch.Watched] = []
        for top in roots:
            skip = [".git", "*__pycache__", ".dart_tool"]
            skip += [p.relative_to(top).as_posix() for p in dict.fromkeys(inner)
                     if p != top and p.is_relative_to(top)]
            watched.append(watch.Watched("the checkout", top, skip=tuple(skip)))
            checkouts[top] = (Checkout(top, frozenset(), commit, outer)
                              if top == root and commit is not None
                              else Checkout(top, _dirty(top)))
            git = top / ".git"
            if git.is_dir() and not git.is_symlink():
                watched.append(watch.Watched("the git folder", git.resolve(),
                                             only=("config", "HEAD", "hooks", "refs", "info",
                                                   "packed-refs")))
        home = Path.home()
        if home.is_dir():
            watched.append(watch.Watched("HOME", home.resolve(), only=watch.HOME_FILES))
        before = watch.snapshot(watched)
        backup: dict[Path, bytes] = {}
        for w, entries in zip(before.watched, before.entries, strict=True):
            if w.root in checkouts:
                continue
            for rel, entry in entries.items():
                if entry.kind == "file" and entry.size <= BACKUP_MAX_BYTES:
                    with contextlib.suppress(OSError):
                        backup[w.root / rel] = (w.root / rel).read_bytes()
        return cls(repo_root, before, checkouts, backup)

    def changes(self, undo: bool = True) -> list[str]:
        """What changed since `take`, each as `PATH` (`PATH (how, not undone)` where it could
        not be put back); undone when `undo`."""
        after = watch.snapshot(self.before.watched)
        out: list[str] = []
        changed = watch.changed_paths(self.before, after)
        # the git folders first: a checkout is restored by git, which needs its config back
        changed.sort(key=lambda c: c[0].root in self.checkouts)
        for w, rel, how in changed:
            path = w.root / rel
            ok = _undo(path, how, self.checkouts.get(w.root), rel, self) if undo else False
            out.append(f"{path}" + ("" if ok or not undo else f" ({how}, not undone)"))
            if ok:
                UNDONE.append((time.monotonic(), str(path)))
        return out


def _dirty(root: Path) -> frozenset[str] | None:
    try:
        done = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v1", "-z",
                               "--untracked-files=no"], capture_output=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return frozenset(item[3:].decode("utf-8", "replace")
                     for item in done.stdout.split(b"\0") if len(item) > 3)


def _undo(path: Path, how: str, checkout: Checkout | None, rel: str, deep: Deep) -> bool:
    """Put `path` back as it was before the trial; whether that was possible."""
    try:
        if how == "created":
            trees.remove_tree(path)
            return True
        if path in deep.backup:
            if path.is_symlink() or path.is_dir():
                trees.remove_tree(path)
            path.write_bytes(deep.backup[path])
            return True
        if checkout is not None:
            return checkout.restore(rel)
    except (OSError, subprocess.SubprocessError):
        return False
    return False


@dataclass(frozen=True)
class Snapshot:
    """The entries of the workspace's parent and of the repository root before a trial (and,
    without a sandbox, the `Deep` state of the checkout)."""

    workspace: Path
    repo_root: Path
    parent: frozenset[str]
    root: frozenset[str]
    deep: Deep | None = None
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def take(cls, workspace: Path, repo_root: Path, deep: bool = False) -> Snapshot:
        """The listings before a trial (`deep`: the whole `Deep` state too). Raises
        FileNotFoundError when the workspace is missing (the caller's bug, not the agent's)."""
        if not workspace.is_dir():
            raise FileNotFoundError(f"the trial's workspace {workspace} is not a folder")
        parent = workspace.parent
        return cls(workspace, repo_root, _entries(parent), _entries(repo_root),
                   Deep.take(workspace, repo_root) if deep else None)

    @property
    def own_parent(self) -> bool:
        """Whether the workspace's parent held only the workspace (a trial folder of its own,
        not the repository root)."""
        return (self.parent == {self.workspace.name}
                and self.workspace.parent.resolve() != self.repo_root.resolve())

    def strays(self, remove: bool = True, root: bool = True) -> list[Path]:
        """New entries since the snapshot (the workspace's parent first, then, with `root`, the
        repository's top level); those in the workspace's parent are removed when `remove`."""
        parent = self.workspace.parent
        found: list[Path] = []
        if self.own_parent:
            for name in sorted(_entries(parent) - self.parent):
                path = parent / name
                found.append(path)
                if remove:
                    _remove(path)
        if root:
            for name in sorted(_entries(self.repo_root) - self.root - IGNORED_AT_ROOT):
                found.append(self.repo_root / name)
        return found

    def writes(self, sandboxed: bool = False) -> list[str]:
        """Every write outside the workspace since the snapshot, undone where possible. In a
        sandbox the repository is read-only: a new entry there is not the trial's."""
        if self.deep is not None:
            own = [*map(str, self.strays(root=False)), *self.deep.changes()]
            return own + self._undone_by_others(own)
        return [str(p) for p in self.strays(root=not sandboxed)]

    def _undone_by_others(self, own: list[str]) -> list[str]:
        """Writes another trial's check undid while this one ran: this trial may have written
        the same file (its own check then finds it as it was), so it is told too, as a trial
        running beside a writer may be blamed for it (the module's docstring)."""
        now = time.monotonic()
        UNDONE[:] = [(t, p) for t, p in UNDONE if now - t < UNDONE_KEPT_S]
        mine = {o.split(" (", 1)[0] for o in own}
        seen = [p for t, p in UNDONE if t >= self.started and p not in mine]
        return [f"{p} (a trial running beside it wrote there too; undone)"
                for p in dict.fromkeys(seen)]

    def judge(self, got: AdapterOutcome, label: TrialLabel,
              sandboxed: bool = False) -> AdapterOutcome:
        """`got`, errored with the cause "wrote outside its workspace: PATH" when the trial
        wrote outside its workspace (the write undone where possible). Errored, not failed: the
        trial is no evidence about the prompt's quality (its outcome may come from a changed
        checkout), the run's summary counts it by that cause, and a candidate with such a
        trial is rejected by optimize's gate (`workflows.gating.outside_writes`)."""
        writes = self.writes(sandboxed)
        if not writes:
            return got
        more = f" (and {len(writes) - 1} more: {'; '.join(writes[1:4])})" if len(
            writes) > 1 else ""
        return label.errored(f"{OUTSIDE}: {writes[0]}{more}",
                             stderr=got.stderr_tail, result=got.result)


def _remove(path: Path) -> None:
    trees.remove_tree(path)  # a link is removed as a link, never followed


__all__ = ["IGNORED_AT_ROOT", "OUTSIDE", "Checkout", "Deep", "Snapshot"]
