"""The crash sweep and `promptloop doctor --fix`: what killed runs left is removed, what live
runs hold and what was accepted is not."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.events import Event, IterationAbandoned
from promptloop.optimizer.core.ledger import Ledger, LedgerOpen
from promptloop.optimizer.git import (
    OWNER_MARKER,
    GitOps,
    folder_owner,
    mark_owner,
    owner_locked,
    release_owner,
    repository_id,
)
from promptloop.optimizer.git_sweep import Sweeper, trailers, verdict_trailers
from promptloop.optimizer.workflows import doctor as doctor_mod
from promptloop.optimizer.workflows.doctor_git import check_git
from promptloop.optimizer.workflows.sweep import fix_strays, sweep_abandoned
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import _git

BRANCH = "promptloop/pkm_agent/skip_trivial/"


@pytest.fixture
def dead_pid() -> int:
    """The id of a process that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def record(repo: Path, pid: int, name: str, worktree: Path, host: str = "") -> LedgerOpen:
    return LedgerOpen(id=f"s-{name}", command="optimize", pid=pid,
                      host=host or socket.gethostname(), suite="pkm_agent", agent="pkm_agent",
                      bucket="skip_trivial", iteration=1, base_commit=_git(repo, "rev-parse",
                                                                          "HEAD").strip(),
                      prompt_path="prompts/pkm_agent.md", proposer="scripted:proposer",
                      repo=str(repo), branch=BRANCH + name, worktree=str(worktree))


def left_behind(repo: Path, pid: int, name: str, parent: Path) -> Path:
    """What a process killed mid-iteration leaves: a candidate worktree on its branch."""
    worktree = parent / f"promptloop-wt-{pid}-{name}" / "worktree"
    _git(repo, "worktree", "add", "-q", "-b", BRANCH + name, str(worktree))
    return worktree


def test_sweep_cleans_dead_iterations_only(repo: Path, state: Path, tmp_path: Path,
                                           dead_pid: int, live_pid: int) -> None:
    ledger = Ledger(state / "ledger.jsonl")
    dead_wt = left_behind(repo, dead_pid, "dead", tmp_path)
    live_wt = left_behind(repo, live_pid, "live", tmp_path)
    far_wt = left_behind(repo, dead_pid, "far", tmp_path)
    mine_wt = left_behind(repo, os.getpid(), "mine", tmp_path)
    for rec in (record(repo, dead_pid, "dead", dead_wt), record(repo, live_pid, "live", live_wt),
                record(repo, dead_pid, "far", far_wt, host="another-host"),
                record(repo, os.getpid(), "mine", mine_wt)):
        ledger.append(rec)
    events: list[Event] = []
    [gone] = sweep_abandoned(state, events.append)
    assert events == [gone] and isinstance(gone, IterationAbandoned)
    assert (gone.id, gone.pid, gone.branch_deleted, gone.worktree_removed) == (
        "s-dead", dead_pid, True, True)
    assert not dead_wt.parent.exists()
    with Sweeper(repo) as git:
        assert git.list_branches() == [BRANCH + n for n in ("far", "live", "mine")]
        assert sorted(w.path.name for w in git.worktrees()) == ["worktree"] * 3
    [closed] = ledger.entries()
    assert closed.outcome == "abandoned" and closed.id == "s-dead"
    assert f"deleted branch {BRANCH}dead" in closed.reasons[0]
    assert sorted(r.id for r in ledger.unclosed()) == ["s-far", "s-live", "s-mine"]
    assert sweep_abandoned(state) == []  # settled once


def commit_on(repo: Path, branch: str, message: str) -> None:
    """A commit of the base tree on a new `branch` (the checkout is not touched)."""
    sha = _git(repo, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", message).strip()
    _git(repo, "branch", branch, sha)


def test_verdict_trailers_tell_branches_apart(repo: Path) -> None:
    message = "promptloop(pkm_agent/skip_trivial): x\n\nVerdict: accept\n\n" + verdict_trailers(
        "accept", BRANCH + "a", "s-1")
    assert trailers(message) == {"Promptloop-Verdict": "accept",
                                 "Promptloop-Branch": BRANCH + "a", "Promptloop-Ledger-Id": "s-1"}
    commit_on(repo, BRANCH + "a", message)
    commit_on(repo, BRANCH + "r", "promptloop(x): y\n\n" + verdict_trailers("reject",
                                                                           BRANCH + "r", "s-2"))
    _git(repo, "branch", BRANCH + "copy", BRANCH + "a")  # an accepted commit, another branch
    _git(repo, "branch", BRANCH + "base")  # the iteration never committed
    commit_on(repo, BRANCH + "old", "promptloop(x): y\n\nHypothesis: h\n\nVerdict: accept\n")
    with Sweeper(repo) as git:
        verdicts = {b.removeprefix(BRANCH): git.verdict_of(b) for b in git.list_branches()}
    assert verdicts == {"a": "accept", "r": "reject", "copy": None, "base": None,
                        "old": "accept"}
    with Sweeper(repo) as git:  # the same verdicts from one for-each-ref
        assert {b.removeprefix(BRANCH): v for b, v in git.verdicts().items()} == verdicts


def test_a_graduation_branch_is_never_swept(repo: Path, state: Path) -> None:
    """A new-team trial: `doctor --fix` deleted the branch `graduate` had just made (its one
    commit carries no optimize verdict), while graduation.json and PR.md still named it."""
    graduated = "promptloop/graduate/recipes-volume/92253535"
    commit_on(repo, graduated, "Graduate recipes/volume to the regression suite\n")
    _git(repo, "branch", BRANCH + "base")  # an optimize iteration that never committed
    cleaned = fix_strays(repo, state)
    assert cleaned.branches == [BRANCH + "base"]
    assert _git(repo, "branch", "--list", graduated).strip() == graduated
    with Sweeper(repo) as git:
        assert git.verdicts()[graduated] == "graduated"


def _git_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []
    real = GitOps._git

    def counted(self: GitOps, *args: str, **kw: Any) -> str:
        calls.append(args)
        return real(self, *args, **kw)

    monkeypatch.setattr(GitOps, "_git", counted)
    return calls


@pytest.mark.parametrize("n", [2, 7])
def test_doctor_and_fix_run_git_a_fixed_number_of_times_whatever_the_branches(
    n: int, repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(n):
        commit_on(repo, f"{BRANCH}kept{i}", "promptloop(x): y\n\n" + verdict_trailers(
            "reject", f"{BRANCH}kept{i}", f"s-{i}"))
        _git(repo, "branch", f"{BRANCH}unfinished{i}")
    calls = _git_calls(monkeypatch)
    status = check_git(repo, state)
    assert [b.state for b in status.branches] == ["kept"] * n + ["unfinished"] * n
    assert len(calls) == 2, calls  # worktree list, for-each-ref
    calls.clear()
    cleaned = fix_strays(repo, state)
    assert cleaned.branches == [f"{BRANCH}unfinished{i}" for i in range(n)]
    assert len(calls) == 7, calls  # prune, 3 worktree lists, for-each-ref, prune, branch -D
    with Sweeper(repo) as git:
        assert git.list_branches() == [f"{BRANCH}kept{i}" for i in range(n)]


def test_doctor_fix_cleans_what_killed_runs_left(
    repo: Path, state: Path, dead_pid: int, live_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor_mod, "runtime_version", lambda: doctor_mod.XLLAMACPP_PIN)
    temp = Path(tempfile.gettempdir())
    Ledger(state / "ledger.jsonl").append(
        record(repo, dead_pid, "dead", left_behind(repo, dead_pid, "dead", temp)))
    stray = left_behind(repo, dead_pid, "stray", temp)  # no ledger here knows it
    running = left_behind(repo, live_pid, "running", temp)
    commit_on(repo, BRANCH + "acc", "promptloop(x): y\n\n" + verdict_trailers(
        "accept", BRANCH + "acc", "s-9"))
    commit_on(repo, BRANCH + "kept", "promptloop(x): y\n\n" + verdict_trailers(
        "reject", BRANCH + "kept", "s-8"))
    _git(repo, "branch", BRANCH + "unfinished")
    monkeypatch.chdir(repo)
    runner = CliRunner()
    try:
        before = cli_result(runner.invoke(app, ["doctor", "--json", "--out", str(state)]).stdout)
        states = {b["name"].removeprefix(BRANCH): b["state"] for b in before["git"]["branches"]}
        assert states == {"acc": "accepted", "kept": "kept", "dead": "unfinished",
                          "running": "unfinished", "stray": "unfinished",
                          "unfinished": "unfinished"}
        [dead] = before["git"]["open_iterations"]
        assert dead["dead"] and dead["pid"] == dead_pid
        assert any("doctor --fix" in w["fix"] for w in before["warnings"])
        assert before["cleaned"] is None

        result = runner.invoke(app, ["doctor", "--fix", "--json", "--out", str(state)])
        data = cli_result(result.stdout)
        cleaned = data["cleaned"]
        [abandoned] = cleaned["abandoned"]
        assert abandoned["id"] == "s-dead" and abandoned["branch_deleted"]
        assert cleaned["strays"]["worktrees"] == [str(stray.resolve())]
        assert sorted(cleaned["strays"]["branches"]) == [BRANCH + "stray",
                                                         BRANCH + "unfinished"]
        with Sweeper(repo) as git:
            assert git.list_branches() == [BRANCH + n for n in ("acc", "kept", "running")]
            assert [w.path for w in git.worktrees()] == [running.resolve()]
        assert not stray.parent.exists() and running.exists()
        assert data["git"]["open_iterations"] == []
        human = runner.invoke(app, ["doctor", "--fix", "--out", str(state)]).output
        assert "cleaned (--fix)" in human and "nothing to clean" in human
    finally:
        _git(repo, "worktree", "remove", "--force", str(running))
        running.parent.rmdir()  # the candidate-named folder in the real temp folder


def test_doctor_fix_never_removes_a_folder_another_repository_made(
    repo: Path, state: Path, dead_pid: int, tmp_path: Path
) -> None:
    """Issue 26: a candidate-named folder of another repository, or of a run in another pid
    namespace (its pid looks dead here), or with no owner marker, survives `fix_strays`."""
    temp = Path(tempfile.gettempdir())
    foreign = temp / f"promptloop-wt-{dead_pid}-foreign"
    (foreign / "worktree").mkdir(parents=True)
    (foreign / "worktree" / "work.txt").write_text("someone else's", encoding="utf-8")
    (foreign / OWNER_MARKER).write_text(json.dumps({"repository": str(tmp_path / "other.git")}))
    unmarked = temp / f"promptloop-wt-{dead_pid}-unmarked"
    unmarked.mkdir()
    (unmarked / "data.txt").write_text("no marker", encoding="utf-8")
    mine = temp / f"promptloop-wt-{dead_pid}-mine"
    mine.mkdir()
    (mine / OWNER_MARKER).write_text(json.dumps({"repository": repository_id(repo)}))
    locked = temp / f"promptloop-wt-{dead_pid}-locked"
    locked.mkdir()
    try:
        mark_owner(locked, repository_id(repo))  # held by this (live) process
        cleaned = fix_strays(repo, state)
        assert str(foreign) not in cleaned.folders and foreign.exists()
        assert (foreign / "worktree" / "work.txt").read_text() == "someone else's"
        assert str(unmarked) not in cleaned.folders and unmarked.exists()
        assert str(locked) not in cleaned.folders and locked.exists()
        assert str(mine) in cleaned.folders and not mine.exists()
    finally:
        release_owner(locked)
        for folder in (foreign, unmarked, mine, locked):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_candidate_folder_carries_its_owner_marker_and_lock(repo: Path) -> None:
    with GitOps(repo) as git, git.candidate("HEAD", BRANCH + "marked") as cand:
        folder = cand.path.parent
        assert folder_owner(folder) == repository_id(repo)
        assert owner_locked(folder)
    assert not folder.exists()
