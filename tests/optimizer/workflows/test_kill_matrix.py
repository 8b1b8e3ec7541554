"""The kill matrix: SIGKILL at every phase of an iteration, then check nothing is lost or left.

Each case runs `promptloop optimize` (or review, or a night) in a child process that kills
itself with SIGKILL at one phase (`PROMPTLOOP_TEST_KILL_AT`, optimizer/core/killpoint.py), in a
checkout with an uncommitted edit, a staged change, an untracked file and a stash entry. After
the kill the checkout (files, index, HEAD, branch, stash) must be byte-identical; then the next
run must sweep what the killed one left (its worktree and branch, its open ledger record closed
as abandoned) and complete, leaving a ledger of whole JSON lines and only the branch it
accepted. A killed night resumed with `--resume` must not redo a finished step.

Every trial result comes from a trial cache filled once per module, so a case costs two short
runs; the phases still run in full.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.core.events import Event, IterationAbandoned
from promptloop.optimizer.core.killpoint import KILL_VAR
from promptloop.optimizer.core.killpoint import PHASES as KILL_POINTS
from promptloop.optimizer.core.ledger import Ledger, LedgerEntry, LedgerOpen
from promptloop.optimizer.git_sweep import Sweeper
from promptloop.optimizer.workflows.nightly.state import latest_unfinished
from promptloop.optimizer.workflows.optimize import OptimizeConfig, optimize
from promptloop.optimizer.workflows.review import ReviewConfig, review
from tests import policies
from tests.optimizer.conftest import pkm_repo
from tests.optimizer.workflows.crash_child import NIGHT
from tests.optimizer.workflows.nightly_support import night, proposer_model
from tests.optimizer.workflows.test_optimize import GOOD, PROMPT, _git

ROOT = Path(__file__).resolve().parents[3]
OPTIMIZE = ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
            "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
            "--proposer-format", "diff", "--json"]


def config(repo: Path, state: Path) -> OptimizeConfig:
    return OptimizeConfig(suite="pkm_agent", bucket="skip_trivial", iterations=1,
                          agent_model="scripted:pkm", proposer_model="scripted:proposer",
                          proposer_format="diff", repo=repo, state_dir=state)


def optimize_in_process(repo: Path, state: Path, events: list[Event]) -> Any:
    return asyncio.run(optimize(config(repo, state), agent=policies.pkm_model(),
                                proposer=ScriptedModel([reply(GOOD)]), on_event=events.append))


@pytest.fixture(scope="module")
def trial_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trial cache of one full optimize run (baseline and the good rule's candidate)."""
    base = tmp_path_factory.mktemp("cache")
    result = optimize_in_process(pkm_repo(base / "repo"), base / "state", [])
    assert result.iterations[0].outcome == "accepted"
    return base / "state" / "cache"


@pytest.fixture
def user_repo(repo: Path) -> Path:
    """The conftest repo, with the state a user may well have: a stash entry, an uncommitted
    edit of the prompt being optimized, a staged change and an untracked file."""
    (repo / "NOTES.md").write_text("stashed work\n")
    _git(repo, "add", "NOTES.md")
    _git(repo, "stash", "push", "-q", "-m", "work in progress")
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT + "\nAn uncommitted edit.\n")
    (repo / "staged.txt").write_text("staged\n")
    _git(repo, "add", "staged.txt")
    (repo / "scratch.txt").write_text("untracked\n")
    return repo


@pytest.fixture
def state(tmp_path: Path, trial_cache: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(trial_cache, state / "cache")
    return state


def user_state(repo: Path) -> dict[str, bytes]:
    """The checkout's files (untracked ones too), index, HEAD, branch and stash, byte for byte."""
    out = {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
           if p.is_file() and ".git" not in p.relative_to(repo).parts}
    out[".git/index"] = (repo / ".git" / "index").read_bytes()
    for args in (("ls-files", "-s"), ("diff", "--cached"), ("rev-parse", "HEAD", "refs/stash"),
                 ("symbolic-ref", "HEAD"), ("stash", "list"), ("branch", "--list", "main")):
        out["git " + " ".join(args)] = _git(repo, *args).encode()
    return out


def kill(phase: str, cwd: Path, *args: str) -> int:
    """Run crash_child with `args`, killed at `phase`; returns its pid."""
    env = os.environ | {"PYTHONPATH": str(ROOT), KILL_VAR: phase}
    proc = subprocess.Popen([sys.executable, "-m", "tests.optimizer.workflows.crash_child", *args],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -9, (out + err).decode()[-3000:]
    return proc.pid


def leftovers(repo: Path, pid: int) -> tuple[list[str], list[str], list[Path]]:
    """(promptloop branches, extra worktrees, temp folders of process `pid`)."""
    with Sweeper(repo) as git:
        branches, trees = git.list_branches(), [str(w.path) for w in git.worktrees()]
    folders = list(Path(tempfile.gettempdir()).glob(f"promptloop-wt-{pid}-*"))
    return branches, trees, folders


def check_ledger(state: Path) -> list[LedgerEntry | LedgerOpen]:
    """Whole JSON lines only, every open record closed."""
    raw = (state / "ledger.jsonl").read_text()
    assert raw.endswith("\n")
    assert all(isinstance(json.loads(line), dict) for line in raw.splitlines())
    ledger = Ledger(state / "ledger.jsonl")
    assert ledger.unclosed() == []
    return ledger.records()


# (phase, what the kill left: a branch, a worktree)
PHASES = [
    ("baseline", False, False),
    ("ledger_write@1", False, False),  # the open record, torn mid-line
    ("package", True, True),
    ("proposal", True, True),
    ("guards", True, True),
    ("worktree", True, True),
    ("candidate@2", True, True),  # the gate's second stage: candidate trials under way
    ("gate", True, True),
    ("branch_commit", True, True),  # committed with its accept verdict, ledger not closed
    ("ledger_write@2", True, False),  # the closing record, torn mid-line
]


def test_the_matrix_covers_every_kill_point() -> None:
    covered = {p.split("@")[0] for p, *_ in PHASES} | {"review", "checkpoint", "screen"}
    assert covered == set(KILL_POINTS)


@pytest.mark.parametrize(("phase", "branch_left", "worktree_left"), PHASES,
                         ids=[p[0] for p in PHASES])
def test_optimize_killed_at(phase: str, branch_left: bool, worktree_left: bool,
                            user_repo: Path, state: Path) -> None:
    before = user_state(user_repo)
    pid = kill(phase, user_repo, "cli", *OPTIMIZE, "--out", str(state))
    assert user_state(user_repo) == before
    branches, trees, folders = leftovers(user_repo, pid)
    assert bool(branches) == branch_left and bool(trees) == worktree_left == bool(folders)
    ledger = state / "ledger.jsonl"
    if phase.startswith("ledger_write"):
        assert not ledger.read_bytes().endswith(b"\n")  # a torn last line
    if phase in ("branch_commit", "ledger_write@2"):  # it looks accepted, but is not recorded
        with Sweeper(user_repo) as git:
            assert git.verdict_of(branches[0]) == "accept"

    events: list[Event] = []
    result = optimize_in_process(user_repo, state, events)
    [it] = result.iterations
    assert it.outcome == "accepted", it.reasons
    assert user_state(user_repo) == before
    assert leftovers(user_repo, pid) == ([it.branch], [], [])
    with Sweeper(user_repo) as git:
        assert git.verdict_of(it.branch or "") == "accept"
    swept = [e for e in events if isinstance(e, IterationAbandoned)]
    records = check_ledger(state)
    closes = [r for r in records if isinstance(r, LedgerEntry)]
    opened = phase not in ("baseline", "ledger_write@1")
    assert [c.outcome for c in closes] == ["abandoned"] * opened + ["accepted"]
    if opened:
        [gone] = swept
        assert gone.pid == pid and gone.id == closes[0].id
        assert (gone.branch_deleted, gone.worktree_removed) == (branch_left, worktree_left)
        assert closes[0].branch is None and "closed as abandoned" in closes[0].reasons[0]
    else:
        assert swept == []


def test_optimize_killed_during_screening(user_repo: Path, state: Path) -> None:
    """`--candidates 2`: killed after the first screening round, with both candidates'
    worktrees and branches on disk. The checkout is untouched, and the next run sweeps every
    candidate (the open record names them all) before it completes."""
    before = user_state(user_repo)
    pid = kill("screen", user_repo, "cli", *OPTIMIZE, "--candidates", "2", "--out", str(state))
    assert user_state(user_repo) == before
    branches, trees, folders = leftovers(user_repo, pid)
    assert len(branches) == len(trees) == len(folders) == 2
    [opened] = Ledger(state / "ledger.jsonl").unclosed()
    slots = [opened.branch, *(s.branch for s in opened.more)]
    assert set(branches) <= set(slots) and len(slots) == 3  # c1, c2 and the merge's

    events: list[Event] = []
    result = optimize_in_process(user_repo, state, events)
    [it] = result.iterations
    assert it.outcome == "accepted", it.reasons
    assert user_state(user_repo) == before
    assert leftovers(user_repo, pid) == ([it.branch], [], [])
    [gone] = [e for e in events if isinstance(e, IterationAbandoned)]
    assert gone.pid == pid and gone.branch_deleted and gone.worktree_removed
    assert gone.others_cleaned == 2  # the second candidate's worktree and branch
    assert "of its other candidates" in gone.describe()
    closes = [r for r in check_ledger(state) if isinstance(r, LedgerEntry)]
    assert [c.outcome for c in closes] == ["abandoned", "accepted"]


def branch_with_good_rule(repo: Path, branch: str) -> None:
    """A colleague's branch adding the good rule, made with plumbing (a private index), so the
    user's checkout and index stay as they are."""
    env = os.environ | {"GIT_INDEX_FILE": str(repo.parent / "colleague-index")}
    good = PROMPT.replace("## Skipping\n", "## Skipping\nIf the input is only a greeting, "
                          "filler or emoji, call skip_pkm_organization and write nothing.\n")

    def git(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, input=stdin, text=True,
                              capture_output=True, check=True).stdout.strip()

    git("read-tree", "HEAD")
    blob = git("hash-object", "-w", "--stdin", stdin=good)
    git("update-index", "--cacheinfo", f"100644,{blob},prompts/pkm_agent.md")
    commit = git("commit-tree", git("write-tree"), "-p", "HEAD", "-m", "skip greetings")
    git("branch", branch, commit)


def test_review_killed_mid_run(user_repo: Path, state: Path) -> None:
    """Review makes no branch or worktree: a kill between its two sides leaves the checkout
    as it was, and the next review completes."""
    branch_with_good_rule(user_repo, "human/greetings")
    before = user_state(user_repo)
    args = ["review", "--base", "main", "--head", "human/greetings", "--suite", "pkm_agent",
            "--agent-model", "scripted:pkm", "--out", str(state), "--json"]
    pid = kill("review", user_repo, "cli", *args)
    assert user_state(user_repo) == before
    assert leftovers(user_repo, pid) == ([], [], [])
    result = asyncio.run(review(
        ReviewConfig(base="main", head="human/greetings", agent_model="scripted:pkm",
                     repo=user_repo, state_dir=state), agent=policies.pkm_model()))
    assert result.status == "reviewed" and Path(result.comment_path or "").is_file()
    assert user_state(user_repo) == before


def test_nightly_killed_at_a_checkpoint_resumes_without_redoing_steps(
        user_repo: Path, state: Path) -> None:
    before = user_state(user_repo)
    # checkpoints: start, baseline pending, baseline, profile pending, profile, ranking,
    # iteration 1 pending, its branch, iteration 1 done, iteration 2 pending, its branch:
    # killed there, with its open record and no worktree yet
    pid = kill("checkpoint@11", ROOT, "nightly", str(user_repo), str(state))
    assert user_state(user_repo) == before
    crashed = latest_unfinished(state)
    assert crashed is not None and crashed.pending is not None
    done = [s.model_dump() for s in crashed.steps]
    assert [s["id"] for s in done] == [
        "baseline:pkm_agent", "profile:pkm_agent", "iterate:pkm_agent/skip_trivial/1"]
    [killed] = Ledger(state / "ledger.jsonl").unclosed()
    assert killed.pid == pid and killed.branch == crashed.pending.branch

    proposer = proposer_model()
    result = night(user_repo, state, resume=True, proposer=proposer, **NIGHT)
    assert len(proposer.calls) == 1  # only the killed iteration asked again
    cp = result.checkpoint
    assert cp.night_id == crashed.night_id and cp.status == "finished"
    assert [s.model_dump() for s in cp.steps[: len(done)]] == done  # nothing redone
    assert [s.id for s in cp.steps[len(done):]] == ["iterate:pkm_agent/skip_trivial/2"]
    records = check_ledger(state)
    assert [r.outcome for r in records if isinstance(r, LedgerEntry)] == [
        "rejected", "abandoned", "accepted"]
    assert user_state(user_repo) == before
    assert leftovers(user_repo, pid) == ([a.branch for a in result.summary.accepted], [], [])
