"""Issue 32 item 6: what doctor, health, eval and graduate --help print fits 80 columns, and
nothing is split inside a value (a rate from its pair, a branch name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app

runner = CliRunner()
WIDE = {"COLUMNS": "80"}


def _fits(text: str) -> None:
    # a single word longer than the terminal (a path) keeps a line of its own, whole
    too_long = [line for line in text.splitlines() if len(line) > 80 and " " in line.strip()]
    assert not too_long, "\n".join(too_long)


def test_doctor_fits_80_columns(repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    out = runner.invoke(app, ["doctor", "--state-dir", str(state)], env=WIDE)
    _fits(out.stdout)
    assert "weights" in out.stdout


def test_eval_summary_and_health_fit_80_columns(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    ran = runner.invoke(app, ["eval", "--suite", "pkm_agent", "--agent-model", "scripted:pkm",
                              "--trials", "1", "--state-dir", str(state)], env=WIDE)
    assert ran.exit_code == 0, ran.output
    _fits(ran.stdout)
    head = " ".join(ran.stdout.split())
    assert "errored excluded: task " in head and ", trial " in head
    lines = ran.stdout.splitlines()
    assert not any(line.rstrip().endswith(("/", "%,", "task", "trial")) for line in lines)
    health = runner.invoke(app, ["health", "--agent", "pkm_agent", "--state-dir", str(state)],
                           env=WIDE)
    assert health.exit_code == 0, health.output
    _fits(health.stdout)


def test_graduate_help_keeps_the_branch_name_whole() -> None:
    text = runner.invoke(app, ["graduate", "--help"], env=WIDE).stdout
    _fits(text)
    assert "promptloop/graduate/<agent>-<bucket>/<id>" in text
