"""After optimize and review: the comparison command they print, and `report --base`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agents.llm.registry import SCRIPTED_MODELS
from agents.llm.scripted import ScriptedModel, reply
from optimizer.cli.app import app
from tests.optimizer.workflows.test_optimize import GOOD

runner = CliRunner()


def test_optimize_prints_the_report_command_of_its_comparison(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    monkeypatch.chdir(repo)
    out = runner.invoke(app, [
        "optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
        "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
        "--proposer-format", "diff", "--state-dir", str(state)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    print(out.stdout)
    [line] = [x for x in out.stdout.splitlines() if x.startswith("  compare: ")]
    args = shlex.split(line.removeprefix("  compare: "))
    assert args[:2] == ["promptloop", "report"] and "--base" in args
    shown = runner.invoke(app, args[1:], env={"COLUMNS": "80"})
    print(shown.stdout)
    assert shown.exit_code == 0, shown.output
    as_json = runner.invoke(app, [*args[1:], "--format", "json"])
    print(as_json.stdout)
    assert False
