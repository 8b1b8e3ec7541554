"""Fixtures of the workflow tests: the nightly reference night (shared per test module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptloop.optimizer.workflows.nightly.engine import NightResult
from tests.optimizer.workflows.nightly_support import make_repo, night


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, NightResult]:
    """One uninterrupted night; the other tests compare against it."""
    base = tmp_path_factory.mktemp("reference")
    repo = make_repo(base / "repo")
    return repo, base / "state", night(repo, base / "state")
