"""eval's summary counts trials that ran out of time as timed out, never as failed (issue 26,
point 7: "1 failed" was shown when 3 trials had timed out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.store import default_store_dir, load_run
from promptloop.optimizer.report.summary import summarize
from tests.cli_json import cli_result


def test_timed_out_trials_are_counted_as_timed_out(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = CliRunner().invoke(app, ["eval", "--suite", "card_agent", "--kind", "regression",
                                   "--agent-model", "scripted:card", "--trials", "1",
                                   "--json", "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    run = load_run(default_store_dir(state), cli_result(out.stdout)["run"])
    timed = [t.model_copy(update={"status": "timedOut"}) if i < 3 else t
             for i, t in enumerate(run.trials)]
    run = run.model_copy(update={"trials": timed})
    summary = summarize(run)
    assert summary.timed_out_trials == 3
    capsys.readouterr()
    ui.show_summary(summary)
    first = " ".join(capsys.readouterr().out.split())
    assert f"{summary.failed_trials} failed, 3 timed out" in first, first
    assert "timedOut" not in first
    md = render_markdown(run, summary)
    assert md.count("3 timed out") == 1
