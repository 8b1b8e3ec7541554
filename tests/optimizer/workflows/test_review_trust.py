"""review's trust rule when the base has no promptloop.toml (the PR that adds promptloop): the
head's agents are not declared at the base, so their commands never run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from promptloop.optimizer.git import GitOps
from promptloop.optimizer.workflows.review_trust import review_projects

HEAD_TOML = """[agents.mine]
prompt = "prompt.md"
suites = ["evals"]
adapter = "command"
command = ["sh", "-c", "echo HEAD-CODE"]
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def test_a_head_that_adds_promptloop_toml_has_its_commands_ignored(tmp_path: Path,
                                                                    monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "d@x")
    _git(repo, "config", "user.name", "d")
    (repo / "prompt.md").write_text("base\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    (repo / "promptloop.toml").write_text(HEAD_TOML)
    (repo / "prompt.md").write_text("head\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "head")
    monkeypatch.chdir(repo)  # a CI checkout of the head: its promptloop.toml is on disk
    with GitOps(repo) as git:
        got = review_projects(git, ("main", git.resolve("main")), ("pr", git.resolve("pr")))
    assert "mine" not in got.base.agents and "mine" not in got.head.agents
    assert any("'mine' is not declared at the base" in note for note in got.ignored)
