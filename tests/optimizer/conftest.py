"""Fixtures shared by the optimizer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optimizer.workflows.test_optimize import PROMPT, TASKS, _git, _write_suite


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A temporary git repo with a small PKM prompt, a capability and a regression suite."""
    return pkm_repo(tmp_path / "repo")


def pkm_repo(repo: Path) -> Path:
    """The `repo` fixture's repository, made at `repo`."""
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "pkm_agent.md").write_text(PROMPT)
    _write_suite(repo / "tasks" / "pkm_agent" / "capability", "capability", TASKS)
    _write_suite(
        repo / "tasks" / "pkm_agent" / "regression",
        "regression",
        {
            "plain": [
                ("plain-a", "Booked the car service for Tuesday morning", "persist"),
                ("plain-b", "Ran 5 km along the river in 27 minutes", "persist"),
            ]
        },
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "config", "user.name", "Dev")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    return repo
