"""Progress: bars on a terminal, plain lines in order in a CI log (no escape codes)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from promptloop.optimizer.cli.ui import LoopDisplay
from promptloop.optimizer.core.events import Phase, RunFinished, RunStarted, TrialFinished

runner = CliRunner()


def test_ci_log_has_one_line_per_run_start_and_end(state: Path) -> None:
    out = runner.invoke(app, ["eval", "--suite", "card_agent", "--kind", "regression",
                              "--agent-model", "scripted:card", "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    log = out.stderr
    assert "\x1b" not in log and "\x1b" not in out.stdout
    lines = log.splitlines()
    starts = [line for line in lines if line.startswith("run started: ")]
    ends = [line for line in lines if line.startswith("run finished: ")]
    assert starts == ["run started: eval card_agent (16 trials)"]
    assert len(ends) == 1 and ends[0].startswith("run finished: eval card_agent: ")
    assert " passed" in ends[0]
    assert lines.index(starts[0]) < lines.index(ends[0])
    assert not any(c in log for c in "━█")  # no bar drawn


def events() -> list[object]:
    return [Phase(message="baseline of pkm_agent"),
            RunStarted(run="r1", label="baseline cap", suite="cap", total=2),
            TrialFinished(run="r1", task="t", trial=0, bucket="b", status="passed",
                          cached=True),
            TrialFinished(run="r1", task="t", trial=1, bucket="b", status="failed",
                          cached=False),
            RunFinished(run="r1", suite="cap"),
            RunStarted(run="r2", label="baseline reg", suite="reg", total=1),
            TrialFinished(run="r2", task="u", trial=0, bucket="b", status="passed",
                          cached=False),
            RunFinished(run="r2", suite="reg")]


def test_plain_lines_follow_the_events_in_order() -> None:
    sink = io.StringIO()
    with LoopDisplay(console=Console(file=sink, width=80)) as display:
        for e in events():
            display.on_event(e)  # type: ignore[arg-type]
    assert sink.getvalue().splitlines() == [
        "» baseline of pkm_agent",
        "run started: baseline cap (2 trials)",
        "run finished: baseline cap: 1 failed, 1 passed (1 from cache)",
        "run started: baseline reg (1 trial)",
        "run finished: baseline reg: 1 passed",
    ]


def test_a_terminal_gets_progress_bars_instead() -> None:
    sink = io.StringIO()
    console = Console(file=sink, width=100, force_terminal=True)
    with LoopDisplay(console=console) as display:
        assert display.live
        for e in events():
            display.on_event(e)  # type: ignore[arg-type]
    text = sink.getvalue()
    assert "run started" not in text and "baseline reg" in text and "\x1b" in text
