"""The GitHub Actions workflows in docs/ call promptloop with options that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
import yaml

from promptloop.optimizer.cli.app import app

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize(("name", "command"), [("github-actions-review.yml", "review"),
                                               ("github-actions-nightly.yml", "nightly")])
def test_workflow_uses_existing_options(name: str, command: str) -> None:
    flow = yaml.safe_load((DOCS / name).read_text(encoding="utf-8"))
    runs = [s["run"] for job in flow["jobs"].values() for s in job["steps"]
            if f"promptloop {command}" in s.get("run", "")]
    assert len(runs) == 1
    params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
    known = {o for p in params for o in (*p.opts, *p.secondary_opts)}
    used = set(re.findall(r"(?<!\S)--[a-z][a-z-]*", runs[0]))
    assert used and used <= known, used - known


def test_review_workflow_runs_on_prompt_changes_and_fails_on_regression() -> None:
    flow = yaml.safe_load((DOCS / "github-actions-review.yml").read_text(encoding="utf-8"))
    on = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads `on` as true
    assert on["pull_request"]["paths"] == ["prompts/**", "promptloop.toml"]
    run = next(s["run"] for s in flow["jobs"]["review"]["steps"]
               if "promptloop" in s.get("run", ""))
    assert "--fail-on-regression" in run and "--post" in run
    assert flow["permissions"]["pull-requests"] == "write"
