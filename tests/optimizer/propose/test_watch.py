"""The outside-write check for external proposers, beyond the corpus's cases."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from promptloop.optimizer.propose.watch import HOME_FILES, outside_writes, proposer_watch, snapshot


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", *args], cwd=cwd,
                   check=True, capture_output=True)


def test_a_checkout_that_is_itself_a_linked_worktree(tmp_path: Path) -> None:
    """Like a developer's second checkout: its own git folder is watched, other worktrees'
    folders (other sessions at work in the same repository) are not."""
    main = tmp_path / "main"
    (main / "prompts").mkdir(parents=True)
    (main / "prompts" / "p.md").write_text("# P\n")
    _git(main, "init", "-q", "-b", "main")
    _git(main, "add", "-A")
    _git(main, "commit", "-qm", "base")
    user, other, cand = tmp_path / "user", tmp_path / "other", tmp_path / "cand"
    for path, branch in ((user, "user"), (other, "other"), (cand, "cand")):
        _git(main, "worktree", "add", "-q", "-b", branch, str(path))
    watched = proposer_watch(user, cand)
    before = snapshot(watched)
    (other / "scratch.txt").write_text("x")
    _git(other, "add", "-A")  # another session's index: not ours to judge
    assert outside_writes(before, snapshot(watched)) == []
    (cand / "prompts" / "p.md").write_text("# P\nA rule.\n")  # the command never runs there
    found = outside_writes(before, snapshot(watched))
    assert any(v.message.startswith("the proposer command wrote outside its sandbox, in the "
                                    "candidate worktree (") for v in found), found
    before = snapshot(watched)
    _git(user, "rm", "-q", "--cached", "prompts/p.md")  # the user's own index
    [violation] = outside_writes(before, snapshot(watched))
    assert violation.code == "outside_write"
    assert "your checkout's git folder" in violation.message and "index" in violation.message


def test_snapshots_of_different_trees_do_not_compare(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    a = snapshot(proposer_watch(checkout, homes=(home,)))
    (home / ".ssh" / "authorized_keys").write_text("key\n")
    [violation] = outside_writes(a, snapshot(proposer_watch(checkout, homes=(home,))))
    assert ".ssh/authorized_keys created" in violation.message and ".ssh" in HOME_FILES
    b = snapshot(proposer_watch(checkout))
    with pytest.raises(ValueError, match="different trees"):
        outside_writes(a, b)
