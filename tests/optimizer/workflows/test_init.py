"""`init_project`: the template lands in a git repository, is refused over existing files
(unless forced) and outside a repository, and what it writes is a valid project."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from promptloop.optimizer.workflows.init import (
    TEMPLATE_DIR,
    InitError,
    InitResult,
    init_project,
    template_files,
)

EXPECTED = {
    "promptloop.toml",
    "example_agent/agent.py",
    "example_agent/prompt.md",
    "evals/example/suite.json",
}


def git_repo(path: Path, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    return path


def test_init_writes_the_template_and_names_the_next_commands(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    result = init_project(repo)
    assert isinstance(result, InitResult)
    written = {p.as_posix() for p in result.files}
    assert EXPECTED <= written
    assert "__init__.py" not in written and not any("__pycache__" in w for w in written)
    tasks = [w for w in written if w.endswith("/task.json")]
    assert len(tasks) == 6
    assert len({Path(t).parts[-3] for t in tasks}) == 2  # two buckets
    for rel in result.files:
        assert (repo / rel).read_bytes() == (TEMPLATE_DIR / rel).read_bytes()
    assert os.access(repo / "example_agent" / "agent.py", os.X_OK)
    assert result.overwritten == ()
    assert result.next_commands == (
        "promptloop eval --agent example",
        "promptloop optimize --agent example --bucket urgency",
        "promptloop review --agent example --base main",
    )
    assert not list(repo.rglob("*.tmp"))


def test_the_optimize_command_names_a_bucket_of_the_suite(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    result = init_project(repo)
    bucket = result.next_commands[1].rsplit(" ", 1)[1]
    buckets = {json.loads(p.read_text())["metadata"]["failure_bucket"]
               for p in (repo / "evals").rglob("task.json")}
    assert bucket in buckets


def test_review_names_the_checked_out_branch(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", branch="trunk")
    assert init_project(repo).next_commands[2].endswith("--base trunk")


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "promptloop.toml").write_text("# mine\n")
    with pytest.raises(InitError, match=r"would overwrite promptloop\.toml.*--force"):
        init_project(repo)
    assert (repo / "promptloop.toml").read_text() == "# mine\n"
    assert not (repo / "example_agent").exists() and not (repo / "evals").exists()

    forced = init_project(repo, force=True)
    assert forced.overwritten == (Path("promptloop.toml"),)
    template = (TEMPLATE_DIR / "promptloop.toml").read_bytes()
    assert (repo / "promptloop.toml").read_bytes() == template


def test_a_folder_in_the_way_is_refused_even_with_force(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "promptloop.toml").mkdir()
    with pytest.raises(InitError, match="not a regular file"):
        init_project(repo, force=True)
    assert not (repo / "example_agent").exists()


def test_init_outside_a_git_repository_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(InitError, match="not inside a git repository"):
        init_project(plain)
    assert list(plain.iterdir()) == []


def test_init_in_a_subfolder_of_a_repository_is_refused(tmp_path: Path) -> None:
    """A team's monorepo: init in services/notes-bot wrote a project whose paths no command
    agreed on (eval failed, optimize fell back to the bundled agents, review passed a broken
    prompt as "nothing to review"). promptloop.toml lives at the root: init says so."""
    from promptloop.optimizer.core.config import ConfigError
    from promptloop.optimizer.workflows.context import open_project

    repo = git_repo(tmp_path / "repo")
    sub = repo / "tools" / "agent"
    sub.mkdir(parents=True)
    with pytest.raises(InitError, match=r"belongs at the repository root .* not in "
                       r"tools/agent/ .*nothing written"):
        init_project(sub)
    assert list(sub.iterdir()) == [] and not (repo / "promptloop.toml").exists()
    # a hand-written file there is refused by every command alike, naming where it belongs
    (sub / "promptloop.toml").write_text('[agents.x]\nprompt = "p.md"\n')
    with pytest.raises(ConfigError, match=r"must be at the repository root .* not in "
                       r"tools/agent/"):
        open_project(sub / "promptloop.toml")


def test_the_written_project_file_declares_the_example_agent(tmp_path: Path) -> None:
    from promptloop.optimizer.core.project import load_project

    repo = git_repo(tmp_path / "repo")
    init_project(repo)
    agent = load_project(repo / "promptloop.toml").agent("example")
    assert agent.config.adapter == "command"
    assert agent.config.spec.command == ["python3", "example_agent/agent.py"]
    assert agent.prompt_path == "example_agent/prompt.md"
    assert (repo / agent.prompt_path).is_file()
    for suite in agent.config.suites:
        assert (repo / suite / "suite.json").is_file()
    text = (repo / "promptloop.toml").read_text()
    for key in ("prompt", "suites", "adapter", "command", "timeout", "model"):
        # every key is explained by the comment line(s) just above it
        assert re.search(rf"#[^\n]*\n{key} = ", text), key


def test_the_written_suite_loads(tmp_path: Path) -> None:
    from promptloop.optimizer.core.suite_files import SuiteError
    from promptloop.optimizer.core.suites import load_suite

    repo = git_repo(tmp_path / "repo")
    init_project(repo)
    try:
        suite = load_suite(repo / "evals" / "example")
    except SuiteError as err:
        missing = re.search(r"unknown grader '(json_path|json_schema)'", str(err))
        if missing:
            pytest.skip(f"the general graders are not registered yet: {missing.group(0)}")
        raise
    assert suite.agent_name == "example" and len(suite.tasks) == 6
    assert sorted(suite.buckets) == ["category", "urgency"]


def test_template_files_match_the_package_data() -> None:
    files = {p.as_posix() for p in template_files()}
    assert EXPECTED <= files
    assert all(not p.endswith((".pyc", ".tmp")) for p in files)


def test_the_printed_review_step_says_when_it_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team ran the suggested review right after the suggested commit: "nothing to review"
    (HEAD is the base). The printed step says it is for a branch with a prompt change."""
    from typer.testing import CliRunner

    from promptloop.optimizer.cli.app import app

    repo = git_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["init"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert ("promptloop review --agent example --base main (on a branch where you changed the "
            "prompt, committed)") in said, said
