"""GitOps in temporary repositories: the user's checkout, index and branch are never touched."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import git
import pytest
import unidiff

from promptloop.optimizer.git import GitOps, GitOpsError, sanitize_ref_component
from promptloop.optimizer.git_read import has_file
from promptloop.optimizer.git_sweep import Sweeper

PROMPT = "prompts/pkm_agent.md"
BASE_TEXT = "# PKM Agent\n\nKeep notes tidy.\n"


@pytest.fixture
def repo(tmp_path: Path) -> git.Repo:
    """A repo on branch main with a commit, then an unstaged edit, a staged edit and an
    untracked file: the state a user may well have when starting an optimize run."""
    root = tmp_path / "user-repo"
    r = git.Repo.init(root, initial_branch="main")
    with r.config_writer() as cw:
        cw.set_value("user", "name", "Test User")
        cw.set_value("user", "email", "test@example.com")
    (root / "prompts").mkdir()
    (root / PROMPT).write_text(BASE_TEXT)
    (root / "tasks").mkdir()
    (root / "tasks" / "t.json").write_text('{"id": "t"}\n')
    (root / "README.md").write_text("readme\n")
    r.index.add([PROMPT, "tasks/t.json", "README.md"])
    r.index.commit("initial")
    (root / PROMPT).write_text(BASE_TEXT + "An uncommitted edit by the user.\n")
    (root / "README.md").write_text("readme, staged change\n")
    r.index.add(["README.md"])
    (root / "scratch.txt").write_text("untracked\n")
    return r


def snapshot(r: git.Repo) -> dict[str, bytes]:
    """Every file of the working tree, the index, HEAD and the branch refs, byte for byte."""
    root = Path(r.working_tree_dir or "")
    git_dir = Path(r.git_dir)
    out = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
           if p.is_file() and ".git" not in p.relative_to(root).parts}
    out[".git/index"] = (git_dir / "index").read_bytes()
    out[".git/HEAD"] = (git_dir / "HEAD").read_bytes()
    out["refs/heads/main"] = r.git.rev_parse("refs/heads/main").encode()
    return out


def worktrees(r: git.Repo) -> list[str]:
    return [line.split(" ", 1)[1] for line in r.git.worktree("list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def test_candidate_commit_and_delete_leave_the_user_state_identical(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    before = snapshot(repo)
    name = ops.unique_branch_name("pkm_agent", "skip_trivial", "a1b2c3")
    assert name == "promptloop/pkm_agent/skip_trivial/a1b2c3"
    with ops.candidate("main", name) as cand:
        assert cand.path.is_dir() and cand.branch == name
        assert (cand.path / PROMPT).read_text() == BASE_TEXT  # the commit, not the user's edit
        (cand.path / PROMPT).write_text(BASE_TEXT + "- Skip greetings.\n")
        sha = ops.commit(cand, [PROMPT], "Skip greetings\n\nHypothesis: ...")
        assert len(worktrees(repo)) == 2
        assert snapshot(repo) == before
    assert snapshot(repo) == before
    assert worktrees(repo) == [str(Path(repo.working_tree_dir or "").resolve())]
    assert not cand.path.exists() and not cand.path.parent.exists()
    assert ops.list_branches() == [name]
    assert ops.resolve(name) == sha
    assert repo.active_branch.name == "main"
    assert ops.read_file(name, PROMPT) == BASE_TEXT + "- Skip greetings.\n"
    assert ops.read_file("main", PROMPT) == BASE_TEXT
    diff = ops.diff_files("main", name, [PROMPT])
    patch = unidiff.PatchSet(diff)
    assert [f.path for f in patch] == [PROMPT] and patch[0].added == 1
    assert ops.diff_files("main", name, ["tasks"]) == ""
    commit = repo.commit(sha)
    assert commit.author.name == "promptloop" and commit.committer.email == "promptloop@localhost"
    assert list(commit.stats.files) == [PROMPT]
    ops.delete_branch(name)
    assert not ops.branch_exists(name) and ops.list_branches() == []
    assert snapshot(repo) == before


def test_exception_inside_the_context_cleans_up(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    before = snapshot(repo)
    name = ops.unique_branch_name("s", "b", "x1")
    with pytest.raises(RuntimeError, match="boom"), ops.candidate("HEAD", name) as cand:
        (cand.path / PROMPT).write_text("changed\n")
        raise RuntimeError("boom")
    assert len(worktrees(repo)) == 1 and not cand.path.exists()
    assert ops.branch_exists(name)  # the branch survives until deleted
    assert snapshot(repo) == before


def test_keyboard_interrupt_inside_the_context_cleans_up(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    before = snapshot(repo)
    with pytest.raises(KeyboardInterrupt), ops.candidate("main", "promptloop/s/b/ki") as cand:
        raise KeyboardInterrupt
    assert len(worktrees(repo)) == 1 and not cand.path.exists()
    assert snapshot(repo) == before


async def test_task_cancellation_inside_the_context_cleans_up(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    entered = asyncio.Event()
    paths: list[Path] = []

    async def evaluate() -> None:
        with ops.candidate("main", "promptloop/s/b/cancel") as cand:
            paths.append(cand.path)
            entered.set()
            await asyncio.sleep(30)

    job = asyncio.create_task(evaluate())
    await entered.wait()
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert len(worktrees(repo)) == 1 and not paths[0].exists()


def _child(repo_dir: str, body: str) -> subprocess.Popen[str]:
    code = textwrap.dedent(f"""
        import sys, time
        from promptloop.optimizer.git import GitOps
        ops = GitOps({repo_dir!r})
    """) + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])


def test_sigterm_removes_live_worktrees(repo: git.Repo) -> None:
    proc = _child(str(repo.working_tree_dir), """
        with ops.candidate("main", "promptloop/s/b/term") as cand:
            print(cand.path, flush=True)
            time.sleep(30)
    """)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    assert path.is_dir(), proc.stderr.read() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=15) == 128 + signal.SIGTERM
    assert not path.exists() and len(worktrees(repo)) == 1


def test_atexit_removes_a_worktree_left_open(repo: git.Repo) -> None:
    proc = _child(str(repo.working_tree_dir), """
        cm = ops.candidate("main", "promptloop/s/b/atexit")
        cand = cm.__enter__()  # never exited: the process just ends
        print(cand.path, flush=True)
    """)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    path = Path(out.strip())
    assert path.name == "worktree" and not path.exists() and len(worktrees(repo)) == 1


def test_resolve_and_read_file_errors(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    with pytest.raises(GitOpsError, match="unknown git ref 'no-such-branch'"):
        ops.resolve("no-such-branch")
    with pytest.raises(GitOpsError, match=r"prompts/card_agent\.md does not exist at main"):
        ops.read_file("main", "prompts/card_agent.md")
    with pytest.raises(GitOpsError, match="is a tree"):
        ops.read_file("main", "prompts")
    with pytest.raises(GitOpsError, match="not a git repository"):
        GitOps(Path(repo.working_tree_dir or "") / "prompts")


def test_has_file_looks_the_path_up_without_reading_it(
    repo: git.Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(repo.working_tree_dir or "")
    (root / "tasks" / "suite.json").write_bytes(b'{"name": "caf\xe9"}\n')  # Latin-1, not UTF-8
    repo.index.add(["tasks/suite.json"])
    repo.index.commit("a suite file that is not UTF-8")
    ops = GitOps(root)

    def no_reads(*_a: object, **_k: object) -> None:
        raise AssertionError("has_file read a blob")

    monkeypatch.setattr(GitOps, "read_file", no_reads)
    monkeypatch.setattr(git.objects.blob.Blob, "data_stream", property(no_reads))
    assert has_file(ops, "main", "tasks/suite.json")  # present, whatever it holds
    assert has_file(ops, "main", "/tasks/t.json")
    assert not has_file(ops, "main", "tasks/missing.json")
    assert not has_file(ops, "main", "tasks")  # a folder is no file
    assert not has_file(ops, "no-such-branch", "tasks/t.json")


def test_head_info_reports_branch_dirty_and_detached(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    info = ops.head_info()
    assert info.branch == "main" and not info.detached and info.dirty
    assert info.commit == repo.head.commit.hexsha
    clean = git.Repo.init(Path(repo.working_tree_dir or "").parent / "clean")
    (Path(clean.working_tree_dir or "") / "a.txt").write_text("a\n")
    clean.index.add(["a.txt"])
    clean.index.commit("c", author=git.Actor("T", "t@example.com"),
                       committer=git.Actor("T", "t@example.com"))
    clean.git.checkout("--detach")
    info = GitOps(clean.working_tree_dir or "").head_info()
    assert info.detached and info.branch is None and not info.dirty


def test_commit_takes_only_the_given_paths(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    with ops.candidate("main", "promptloop/s/b/only") as cand:
        (cand.path / PROMPT).write_text("new prompt\n")
        (cand.path / "tasks" / "t.json").write_text('{"id": "changed"}\n')
        with pytest.raises(GitOpsError, match="nothing to commit"):
            ops.commit(cand, ["README.md"], "nothing")
        sha = ops.commit(cand, [str(cand.path / PROMPT)], "prompt only")
        with pytest.raises(GitOpsError, match="outside the candidate worktree"):
            ops.commit(cand, ["/etc/hostname"], "no")
    assert list(repo.commit(sha).stats.files) == [PROMPT]
    assert ops.read_file(sha, "tasks/t.json") == '{"id": "t"}\n'


def test_set_message_rewords_the_tip_without_a_checkout(repo: git.Repo) -> None:
    ops = Sweeper(repo.working_tree_dir or "")
    before = snapshot(repo)
    name = "promptloop/s/b/msg"
    with ops.candidate("main", name) as cand:
        (cand.path / PROMPT).write_text("v2\n")
        old = ops.commit(cand, [PROMPT], "hypothesis only")
    new = ops.set_message(name, "hypothesis\n\n| bucket | delta |\n| a | +0.2 |\n")
    assert new != old and ops.resolve(name) == new
    tip = repo.commit(new)
    assert "| a | +0.2 |" in str(tip.message)
    assert tip.tree == repo.commit(old).tree and tip.parents == repo.commit(old).parents
    assert snapshot(repo) == before
    with pytest.raises(GitOpsError, match="refusing"):
        ops.set_message("main", "x")


def test_delete_branch_refuses_foreign_and_unknown_branches(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    with pytest.raises(GitOpsError, match="refusing to delete 'main'"):
        ops.delete_branch("main")
    with pytest.raises(GitOpsError, match="no branch"):
        ops.delete_branch("promptloop/none")
    assert ops.branch_exists("main")


def test_branch_names_are_sanitised_valid_and_unique(repo: git.Repo) -> None:
    ops = GitOps(repo.working_tree_dir or "")
    name = ops.unique_branch_name("card agent/v2", "..skip~trivial^:*?[x].lock", "@{id}")
    assert name == "promptloop/card-agent-v2/skip-trivial-x/id"
    repo.git.check_ref_format("--branch", name)
    with ops.candidate("main", name):
        pass
    assert ops.unique_branch_name("card agent/v2", "..skip~trivial^:*?[x].lock", "@{id}") \
        == name + "-2"
    for raw in ["", "...", "a..b", "x.lock", "-lead", "with space", "ünïcode", "a//b"]:
        component = sanitize_ref_component(raw)
        repo.git.check_ref_format("--branch", f"promptloop/{component}/b/c")
    # a bucket in another script keeps its name (it was "x", the same for every such bucket)
    assert sanitize_ref_component("回声 bucket") == "回声-bucket"
    assert sanitize_ref_component("ünïcode") == "ünïcode"
    with pytest.raises(GitOpsError, match="already exists"), ops.candidate("main", name):
        pass


def test_an_unknown_base_in_a_ci_clone_says_what_to_fetch(tmp_path: Path) -> None:
    """actions/checkout clones the PR's branch alone, shallow: `review --base origin/main`
    said only "unknown git ref"; the error now gives the fetch that makes it known."""
    import subprocess

    src = tmp_path / "src"
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    (src / "p.md").write_text("one\n")
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(src), *ident, "commit", "-qm", "one"], check=True)
    subprocess.run(["git", "-C", str(src), "checkout", "-qb", "pr"], check=True)
    (src / "p.md").write_text("two\n")
    subprocess.run(["git", "-C", str(src), *ident, "commit", "-qam", "two"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "pr",
                    f"file://{src}", str(clone)], check=True)
    with GitOps(clone) as ops, pytest.raises(GitOpsError) as got:
        ops.resolve("origin/main")
    said = str(got.value)
    assert "git fetch origin +refs/heads/main:refs/remotes/origin/main" in said
    assert "shallow" in said


def test_a_folder_named_like_a_variable_is_that_folder(tmp_path: Path) -> None:
    """A team's repository at `dollar$HOME`: GitPython expanded the variable and every command
    said "not a git repository"."""
    root = tmp_path / "dollar$HOME"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    with GitOps(root) as ops:
        assert Path(ops.root).resolve() == root.resolve()


def test_a_repository_another_user_owns_names_gits_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CI container's checkout owned by another uid: git refuses it ("dubious ownership"),
    and every command said "not in a git repository" (doctor listed promptloop's own suites):
    the error now gives git's own fix."""
    from promptloop.optimizer.core.config import ConfigError
    from promptloop.optimizer.git import repo_root

    root = tmp_path / "theirs"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    try:
        os.chown(root, 4321, 4321)
        os.chown(root / ".git", 4321, 4321)
    except PermissionError:
        pytest.skip("changing a folder's owner needs root")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)  # no safe.directory of this machine
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with pytest.raises(ConfigError, match=r"safe\.directory"):
        repo_root(root)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "safe.directory")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "*")
    assert repo_root(root) is not None
