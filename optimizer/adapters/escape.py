"""Files an agent process wrote outside its workspace, where promptloop can see them cheaply.

There is no kernel sandbox around agent processes (no mount namespace, no seccomp): an agent
can write anywhere its user can. What promptloop does:

- the process runs with cwd = the workspace (command) and HOME and TMPDIR in a private scratch
  folder of its own, removed afterwards: scratch files written the usual ways never leak;
- around each trial it lists two places and compares: the workspace's parent folder and the top
  level of the repository root. A new entry in either is a file written outside the workspace:
  the trial FAILS (the agent caused it) and the message names the path; a stray inside the
  trial folder is removed, one in the repository is left for the user to look at (it may be
  theirs). The parent folder is checked only when it holds nothing but the workspace when the
  trial starts (the caller makes every workspace as `<a fresh trial folder>/workspace`): a
  parent shared with other trials cannot tell whose an entry is, and nothing in it is ever
  removed.

What it does not see: writes deeper inside the repository (an existing folder's contents),
changes to existing files, writes to absolute paths elsewhere (/tmp, the real home). A trial
running side by side with others in the same repository root may be blamed for a sibling's
stray at the repository's top level (every trial running then is told). Run untrusted agents
in a container.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agents import trees

if TYPE_CHECKING:
    from optimizer.adapters.outcome import AdapterOutcome, TrialLabel

IGNORED_AT_ROOT = frozenset({".promptloop", ".git", "__pycache__", ".dart_tool"})
"""promptloop's own state folder and git's, which promptloop itself writes during a run, and
the caches an interpreter makes next to the code it runs (Python's bytecode, `dart run`'s)."""


def _entries(folder: Path) -> frozenset[str]:
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()


@dataclass(frozen=True)
class Snapshot:
    """The entries of the workspace's parent and of the repository root before a trial."""

    workspace: Path
    repo_root: Path
    parent: frozenset[str]
    root: frozenset[str]

    @classmethod
    def take(cls, workspace: Path, repo_root: Path) -> Snapshot:
        """The listings before a trial. Raises FileNotFoundError when the workspace is missing
        (the caller's bug, not the agent's)."""
        if not workspace.is_dir():
            raise FileNotFoundError(f"the trial's workspace {workspace} is not a folder")
        parent = workspace.parent
        return cls(workspace, repo_root, _entries(parent), _entries(repo_root))

    @property
    def own_parent(self) -> bool:
        """Whether the workspace's parent held only the workspace (a trial folder of its own,
        not the repository root)."""
        return (self.parent == {self.workspace.name}
                and self.workspace.parent.resolve() != self.repo_root.resolve())

    def strays(self, remove: bool = True) -> list[Path]:
        """New entries since the snapshot (the workspace's parent first); those in the
        workspace's parent are removed when `remove`."""
        parent = self.workspace.parent
        found: list[Path] = []
        if self.own_parent:
            for name in sorted(_entries(parent) - self.parent):
                path = parent / name
                found.append(path)
                if remove:
                    _remove(path)
        for name in sorted(_entries(self.repo_root) - self.root - IGNORED_AT_ROOT):
            found.append(self.repo_root / name)
        return found

    def judge(self, got: AdapterOutcome, label: TrialLabel) -> AdapterOutcome:
        """`got`, failed (the agent's fault) when the trial wrote outside its workspace."""
        strays = self.strays()
        if not strays:
            return got
        more = f" (and {len(strays) - 1} more)" if len(strays) > 1 else ""
        return label.failed(f"wrote outside its workspace: {strays[0]}{more}",
                            stderr=got.stderr_tail, result=got.result)


def _remove(path: Path) -> None:
    trees.remove_tree(path)  # a link is removed as a link, never followed


__all__ = ["IGNORED_AT_ROOT", "Snapshot"]
