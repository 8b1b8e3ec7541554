"""Writes an external proposer made where it must not: the second line of defence.

`--proposer-cmd` runs in a throwaway copy of the repository (propose/sandbox.py), read-only
everywhere else where the system can isolate it. Where it cannot (no bubblewrap, no user
namespaces), a command may still write by absolute path: into your checkout (its files,
`.git/config`, `.git/hooks`, refs, the index, HEAD), the candidate worktree, or the startup files
of your real HOME. The sandbox takes a `snapshot` of `proposer_watch(...)` before the command
and one after, and `outside_writes(before, after)` names every such write as an
`outside_write` refusal (after the fact: what was written stays written). The same comparison
of the sandbox copy itself finds what the command changed there besides the prompt. Files are
compared by type, mode, size, inode and change time (ctime, which no user-space call can set
back), so content is never read and a walk of a checkout with its virtualenv takes well under
a second.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from promptloop.optimizer.propose.guards import GuardViolation

EntryKind = Literal["file", "dir", "link", "other"]
HOME_FILES = (".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile", ".gitconfig",
              ".config/git", ".ssh", ".netrc", ".pypirc", ".config/pip", ".npmrc")
"""Files in HOME that change what later commands do; watched in the real HOME."""
_GIT_MAY_ADD = ("objects/*",)
"""New objects are inert until a ref points at them; refs are watched."""
_MAX_LISTED = 8


@dataclass(frozen=True)
class Watched:
    """One tree to watch and what may legitimately change in it (fnmatch patterns on
    '/'-separated paths relative to `root`; '*' matches across '/')."""

    label: str
    root: Path
    only: tuple[str, ...] = ()
    """Watch just these relative paths (files or folders); empty: the whole tree."""
    skip: tuple[str, ...] = ()
    """Folders not walked (and not watched) at all."""
    may_change: tuple[str, ...] = ()
    """Regular files that may be rewritten, if they stay regular files."""
    may_add: tuple[str, ...] = ()
    """Paths that may appear (and then change) but not replace or remove what was there."""


@dataclass(frozen=True)
class Entry:
    kind: EntryKind
    mode: int
    size: int = 0
    ino: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    link: str = ""


@dataclass(frozen=True)
class Snapshot:
    watched: tuple[Watched, ...]
    entries: tuple[Mapping[str, Entry], ...] = field(repr=False)
    """Per watched tree: relative path -> state ('.' is the root itself)."""


def _entry(path: Path) -> Entry | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    if path.is_symlink():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return Entry("link", st.st_mode, link=target)
    if path.is_dir():
        return Entry("dir", st.st_mode)  # children are compared, not the folder's times
    kind: EntryKind = "file" if path.is_file() else "other"
    return Entry(kind, st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) for p in patterns)


def _walk(w: Watched) -> dict[str, Entry]:
    found: dict[str, Entry] = {}
    starts = [w.root / p for p in w.only] if w.only else [w.root]
    stack = list(starts)
    while stack:
        path = stack.pop()
        rel = path.relative_to(w.root).as_posix()
        if _matches(rel, w.skip):
            continue
        entry = _entry(path)
        if entry is None:
            continue
        found[rel] = entry
        if entry.kind == "dir":
            try:
                stack.extend(path.iterdir())
            except OSError:
                continue
    return found


def snapshot(watched: Sequence[Watched]) -> Snapshot:
    """The state of every watched tree, to compare with `outside_writes`."""
    return Snapshot(tuple(watched), tuple(_walk(w) for w in watched))


def _change(w: Watched, rel: str, old: Entry | None, new: Entry | None) -> str | None:
    """How `rel` changed, or None when that change is allowed."""
    if old is None:
        return None if _matches(rel, w.may_add) else "created"
    if new is None:
        return "removed"
    if old.kind != new.kind:
        return f"turned from a {old.kind} into a {new.kind}"
    if old.kind == "link":
        return None if old.link == new.link else f"re-pointed to {new.link}"
    if old.mode != new.mode:
        return f"mode changed from {old.mode:o} to {new.mode:o}"
    if old.kind == "dir":
        return None
    if old.kind == "file" and _matches(rel, (*w.may_change, *w.may_add)):
        return None
    return "modified"


def outside_writes(before: Snapshot, after: Snapshot) -> list[GuardViolation]:
    """One `outside_write` refusal per watched tree that changed where it must not; empty when
    the command only touched what it may. `before` and `after` must watch the same trees."""
    by_tree: dict[Watched, list[str]] = {}
    for w, rel, how in changed_paths(before, after):
        by_tree.setdefault(w, []).append(f"{rel} {how}")
    out: list[GuardViolation] = []
    for w, changes in by_tree.items():
        more = f" and {len(changes) - _MAX_LISTED} more" if len(changes) > _MAX_LISTED else ""
        out.append(GuardViolation(
            "outside_write", f"the proposer command wrote outside its sandbox, in "
            f"{w.label} ({w.root}): {'; '.join(changes[:_MAX_LISTED])}{more}"))
    return out


def _gitdir(worktree: Path) -> Path | None:
    """The per-worktree git folder a `.git` file points to (None when `.git` is a folder)."""
    dot_git = worktree / ".git"
    if not dot_git.is_file() or dot_git.is_symlink():
        return None
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    path = Path(text.removeprefix("gitdir:").strip())
    return (worktree / path).resolve() if not path.is_absolute() else path.resolve()


def _common_dir(gitdir: Path) -> Path:
    common = gitdir / "commondir"
    if common.is_file():
        rel = Path(common.read_text(encoding="utf-8").strip())
        return (gitdir / rel).resolve() if not rel.is_absolute() else rel
    return gitdir


def proposer_watch(checkout: Path, worktree: Path | None = None,
                   homes: Sequence[Path] = (), others: Sequence[Path] = ()
                   ) -> tuple[Watched, ...]:
    """What an external proposer (run in its sandbox) must leave alone: the user's `checkout`
    (every file), the shared git directory (config, hooks, refs, HEAD, index; new objects and
    reflogs may appear: other git commands of the user may be running), the user's own git
    folder when the checkout is a linked worktree, the candidate `worktree` and its git
    folder, the iteration's `others` candidate worktrees (`--candidates K`), and `HOME_FILES`
    in each of `homes` (the real HOME). Other worktrees' git folders are not watched: other
    checkouts of the same repository may be in use."""
    checkout = checkout.resolve()
    user = _gitdir(checkout)  # when the checkout is itself a linked worktree
    own = _gitdir(worktree.resolve()) if worktree is not None else None
    common = _common_dir(own or user or checkout / ".git")
    skip = [".git"]
    if worktree is not None and worktree.resolve().is_relative_to(checkout):
        skip.append(worktree.resolve().relative_to(checkout).as_posix())
    trees = [
        Watched("your checkout", checkout, skip=tuple(skip)),
        Watched("the repository's git directory", common, skip=("worktrees/*",),
                may_add=(*_GIT_MAY_ADD, "logs/*")),
    ]
    if user is not None:
        trees.append(Watched("your checkout's git folder", user))
    if worktree is not None:
        trees.append(Watched("the candidate worktree", worktree.resolve()))
    if own is not None:
        trees.append(Watched("the candidate worktree's git folder", own))
    trees.extend(Watched(f"the candidate worktree {o}", o.resolve()) for o in others)
    trees.extend(Watched(f"HOME {home}", home.resolve(), only=HOME_FILES) for home in homes)
    return tuple(trees)


def changed_paths(before: Snapshot, after: Snapshot) -> list[tuple[Watched, str, str]]:
    """(tree, relative path, how) for every change that tree does not allow."""
    if before.watched != after.watched:
        raise ValueError("the two snapshots watch different trees")
    out: list[tuple[Watched, str, str]] = []
    for w, old, new in zip(before.watched, before.entries, after.entries, strict=True):
        for rel in sorted(old.keys() | new.keys()):
            if old.get(rel) == new.get(rel):
                continue
            how = _change(w, rel, old.get(rel), new.get(rel))
            if how is not None:
                out.append((w, rel, how))
    return out


class OutsideWriteError(Exception):
    """The proposer command wrote outside the prompt file; `violations` say where."""

    def __init__(self, violations: list[GuardViolation]) -> None:
        super().__init__("; ".join(v.message for v in violations))
        self.violations = violations
