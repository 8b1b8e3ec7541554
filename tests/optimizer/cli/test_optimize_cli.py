"""`promptloop optimize` through the CLI on the scripted setup: the `--events` log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.events import (
    BaselineReady,
    GateStage,
    IterationFinished,
    IterationStarted,
    Phase,
    RunStarted,
    TrialFinished,
    VerdictReached,
    parse_event,
)
from tests.cli_json import cli_result
from tests.optimizer.workflows.test_optimize import GOOD

TRIAL_EVENTS = {"trial_start", "trial_end"}


def test_events_log_of_an_optimize_run(
    repo: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    monkeypatch.chdir(repo)
    log = tmp_path / "events.jsonl"
    log.write_text("")  # the log is appended to, never truncated
    args = ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
            "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
            "--proposer-format", "diff", "--out", str(state), "--events", str(log), "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    result = cli_result(out.stdout)
    [it] = result["iterations"]
    assert it["outcome"] == "accepted"

    lines = log.read_text().splitlines()
    raw = [json.loads(line) for line in lines]
    assert all({"event", "at"} <= set(r) for r in raw)
    events = [parse_event(line) for line in lines]
    assert [e.at for e in events] == sorted(e.at for e in events)
    phases = [e.message for e in events if isinstance(e, Phase)]
    said = sorted(p.rsplit(" ", 1)[0] for p in phases[:3])
    assert said == ["prompt: prompts/pkm_agent.md @ HEAD",
                    "tasks: tasks/pkm_agent/capability @ HEAD",
                    "tasks: tasks/pkm_agent/regression @ HEAD"]
    assert [e.stage for e in events if isinstance(e, GateStage)] == [
        "screen", "target", "harm", "harm", "harm"]
    assert [e.event for e in events if e.event not in TRIAL_EVENTS] == [
        "trials_estimate",  # how many trials, how long, before any starts
        "phase", "phase", "phase",  # where the prompt and the two suites were read
        "phase",
        "run_start", "run_end",  # baseline: capability
        "run_start", "run_end",  # baseline: regression
        "baseline",
        "iteration_start",
        "proposal",
        "proposer_reply",  # each reply of the proposer model, as it arrives
        "evaluating",
        # the sequential gate: the candidate on the target bucket first ...
        "gate_stage", "run_start", "run_end",
        # ... one more look with more trials on both sides (a thin record: no history; at 4
        # trials per task the Pocock-spent look decides) ...
        "gate_stage", "run_start", "run_end", "run_start", "run_end",
        # ... then harm detection on every other task once the target improved: one trial
        # per task and round until each task's Bayes factor rules the drop out
        "gate_stage", "run_start", "run_end", "run_start", "run_end",
        "gate_stage", "run_start", "run_end", "run_start", "run_end",
        "gate_stage", "run_start", "run_end", "run_start", "run_end",
        "verdict",
        "iteration_end",
    ]
    runs = [e for e in events if isinstance(e, RunStarted)]
    assert [r.label for r in runs] == [
        "baseline pkm_agent_capability", "baseline pkm_agent_regression",
        "candidate (screen) pkm_agent_capability",
        "gate base pkm_agent_capability", "candidate (target) pkm_agent_capability",
        *["candidate (harm) pkm_agent_capability", "candidate (harm) pkm_agent_regression"] * 3]
    for r in runs:  # every trial of a run is reported once, under its run
        ends = [e for e in events if isinstance(e, TrialFinished) and e.run == r.run]
        assert len(ends) == r.total == len({(e.task, e.trial) for e in ends})
    by_name = {e.event: e for e in events}
    assert isinstance(by_name["baseline"], BaselineReady) and by_name["baseline"].total == 16
    start, verdict, end = by_name["iteration_start"], by_name["verdict"], by_name["iteration_end"]
    assert isinstance(start, IterationStarted) and start.branch == it["branch"]
    assert isinstance(verdict, VerdictReached) and verdict.decision == "accept"
    assert isinstance(end, IterationFinished) and end.outcome == "accepted"
    assert end.branch == it["branch"] and end.tokens == it["tokens"] > 0


def test_markup_in_engine_text_is_printed_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warnings, reasons and hypotheses carry user and model text: `[/x]` must print as is."""
    from io import StringIO

    from rich.console import Console

    from promptloop.optimizer.cli import ui
    from promptloop.optimizer.core.events import ProposalRefused, ProposerReplied, RunWarning

    buf = StringIO()
    monkeypatch.setattr(ui, "err", Console(file=buf, width=120))
    display = ui.LoopDisplay(enabled=True)
    display.on_event(RunWarning(message="task.json: unknown key '[/x]' ignored"))
    display.on_event(ProposalRefused(iteration=1, reasons=["quotes [bold]input[/bold]"]))
    display.on_event(ProposerReplied(iteration=1, attempt=1, seconds=1, input_tokens=1,
                                     output_tokens=1, problem="quotes [bold]input[/bold]"))
    text = buf.getvalue()
    assert "unknown key '[/x]' ignored" in text and "quotes [bold]input[/bold]" in text


def test_git_location_variables_never_turn_optimize_onto_the_checkout(
    repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team ran optimize with GIT_DIR set (as a git hook sets it): the accepted candidate
    was committed onto the checked-out branch and its prompt written into the checkout; with
    GIT_INDEX_FILE, staged in the user's index. promptloop unsets them for itself."""
    from tests.optimizer.workflows.test_optimize import _git, checkout_state

    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    monkeypatch.chdir(repo)
    before, main = checkout_state(repo), _git(repo, "rev-parse", "main").strip()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    args = ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations", "1",
            "--agent-model", "scripted:pkm", "--proposer-model", "scripted:proposer",
            "--proposer-format", "diff", "--out", str(state), "--json"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert cli_result(out.stdout)["iterations"][0]["outcome"] == "accepted"
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_INDEX_FILE", raising=False)
    assert _git(repo, "rev-parse", "main").strip() == main
    assert checkout_state(repo) == before
    assert "GIT_DIR, GIT_INDEX_FILE unset for promptloop" in out.stderr
