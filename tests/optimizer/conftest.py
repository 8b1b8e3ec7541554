"""Fixtures shared by the optimizer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optimizer.workflows.test_optimize import PROMPT, TASKS, _write_suite, commit_base


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
    return commit_base(repo)
