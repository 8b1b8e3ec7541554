"""Shared pieces of the end-to-end tests: a team's repository made in a temporary folder (git
init, one commit on main), the promptloop CLI run in it, and the check that a branch changed
only the lines of a prompt region."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from promptloop.optimizer.core import project as project_module
from promptloop.optimizer.core.regions import RegionSpec, locate
from tests.cli_json import cli_result

runner = CliRunner()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def commit_all(repo: Path, message: str = "base", branch: str = "main") -> Path:
    """`git init` `repo` (if needed) and commit everything in it."""
    if not (repo / ".git").exists():
        git(repo, "init", "-q", "-b", branch)
        git(repo, "config", "user.email", "dev@example.com")
        git(repo, "config", "user.name", "Dev")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return repo


def commit_branch(repo: Path, branch: str, files: dict[str, str]) -> None:
    """A colleague commits `files` (path -> new content) on a new `branch` off main."""
    git(repo, "checkout", "-q", "-b", branch, "main")
    for rel, text in files.items():
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"change on {branch}")
    git(repo, "checkout", "-q", "main")


def enter(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work from `repo` with no project active yet (the commands find its promptloop.toml);
    the active project is restored after the test."""
    monkeypatch.chdir(repo)
    monkeypatch.setattr(project_module, "_ACTIVE", [])
    assert Path(git(repo, "rev-parse", "--show-toplevel").strip()).resolve() == repo.resolve()


def cli(*args: str) -> Result:
    """`promptloop ARGS` in the current folder; an exception other than exit is re-raised."""
    result = runner.invoke(project_app(), list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def cli_json(*args: str) -> dict[str, Any]:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = cli_result(result.stdout)
    return data


def project_app() -> Any:
    from promptloop.optimizer.cli.app import app

    return app


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def changed_old_lines(diff: str) -> list[tuple[int, int]]:
    """(first old line, old line count) of every hunk of a `-U0` diff."""
    return [(int(m.group(1)), int(m.group(2) or "1")) for m in HUNK.finditer(diff)]


def assert_only_region_changed(repo: Path, base: str, branch: str, spec: RegionSpec) -> str:
    """The branch differs from `base` in `spec.path` only, and only inside the region: every
    line before and after the region's content is the base's, every hunk lies within the
    region's line span. Returns the region's new text."""
    files = git(repo, "diff", "--name-only", base, branch).split()
    assert files == [spec.path], files
    old = git(repo, "show", f"{base}:{spec.path}")
    new = git(repo, "show", f"{branch}:{spec.path}")
    before, after = locate(spec, old), locate(spec, new)
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    # everything up to the opener and from the closer on is byte for byte the base's
    assert old[: before.start] == new[: after.start]
    assert old[before.end:] == new[after.end:]
    assert new_lines[: after.start_line - 1] == old_lines[: before.start_line - 1]
    tail = len(old_lines) - before.end_line
    assert new_lines[len(new_lines) - tail:] == old_lines[len(old_lines) - tail:]
    hunks = changed_old_lines(git(repo, "diff", "-U0", base, branch, "--", spec.path))
    assert hunks
    for first, count in hunks:
        # a change covers old lines first..first+count-1; an insertion (count 0) goes between
        # old lines first and first+1, which must both be lines of the region
        last = first + count - 1 if count else first + 1
        assert before.start_line <= first and last <= before.end_line, (
            f"hunk at old lines {first},{count} is outside {before.describe()}")
    return after.text
