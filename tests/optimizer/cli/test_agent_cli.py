"""`promptloop agent`: one input through the production agent code path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptloop.optimizer.cli.app import app
from tests.cli_json import cli_result

runner = CliRunner()


def test_card_agent_prints_the_card(tmp_path: Path) -> None:
    result = runner.invoke(app, ["agent", "card_agent", "--model", "scripted:card",
                                 "--content", "Lunch at Nora's, $18.40", "--workspace",
                                 str(tmp_path), "--published", "2026-03-14 12:00:00"])
    assert result.exit_code == 0, result.output
    assert "status: completed" in result.stdout and "transaction" in result.stdout
    card = tmp_path / "Cards" / "2026" / "03" / "14_ts_1.yaml"
    assert card.is_file() and "$18.40" in card.read_text()


def test_pkm_agent_json_shows_diff_and_tool_calls(tmp_path: Path) -> None:
    result = runner.invoke(app, ["agent", "pkm_agent", "--model", "scripted:pkm", "--json",
                                 "--content", "Bought a standing desk for the home office",
                                 "--fact-id", "2026/03/14.md#ts_4"])
    assert result.exit_code == 0, result.output
    data = cli_result(result.stdout)
    assert data["outcome"]["is_complete"] is True
    assert "+++ b/PKM/Resources/" in data["pkm_diff"]
    assert "<!-- fact_id: 2026/03/14.md#ts_4 -->" in data["pkm_diff"]
    assert [c["tool_name"] for c in data["tool_calls"]] == ["Write",
                                                           "update_timeline_card_insight"]


def test_user_errors_exit_1() -> None:
    bad_agent = runner.invoke(app, ["agent", "nope_agent", "--content", "x",
                                    "--model", "scripted:card"])
    assert bad_agent.exit_code == 1 and "card_agent" in bad_agent.output
    bad_fact = runner.invoke(app, ["agent", "card_agent", "--content", "x", "--model",
                                   "scripted:card", "--fact-id", "yesterday"])
    assert bad_fact.exit_code == 1 and "--fact-id" in bad_fact.output


def _user_folder(root: Path) -> dict[str, bytes]:
    card = root / "Cards" / "2026" / "03" / "10_ts_1.yaml"
    card.parent.mkdir(parents=True)
    card.write_text('fact_id: "2026/03/10.md#ts_1"\nstatus: completed\ntitle: "Mine"\n')
    (root / "PKM" / "Areas").mkdir(parents=True)
    (root / "PKM" / "Areas" / "notes.md").write_text("# My notes\n")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


def test_workspace_runs_on_a_copy_unless_in_place(tmp_path: Path) -> None:
    """Issue 19: `--workspace DIR` never changes the user's folder unless --in-place; the
    command prints where it wrote."""
    import shutil

    mine = tmp_path / "mine"
    before = _user_folder(mine)
    args = ["agent", "card_agent", "--model", "scripted:card", "--content",
            "Lunch at Nora's, $18.40", "--published", "2026-03-14 12:00:00", "--workspace"]
    result = runner.invoke(app, [*args, str(mine)])
    assert result.exit_code == 0, result.output
    after = {p.relative_to(mine).as_posix(): p.read_bytes() for p in mine.rglob("*")
             if p.is_file()}
    assert after == before  # untouched
    line = next(x for x in result.stdout.splitlines() if x.startswith("wrote to workspace: "))
    assert f"(a copy of {mine}; --in-place writes to it)" in line
    copy = Path(line.removeprefix("wrote to workspace: ").split(" (a copy of")[0])
    try:
        assert (copy / "Cards" / "2026" / "03" / "14_ts_1.yaml").is_file()
        assert (copy / "PKM" / "Areas" / "notes.md").read_text() == "# My notes\n"
    finally:
        shutil.rmtree(copy)
    in_place = runner.invoke(app, [*args, str(mine), "--in-place"])
    assert in_place.exit_code == 0, in_place.output
    assert f"wrote to workspace: {mine}\n" in in_place.stdout
    assert (mine / "Cards" / "2026" / "03" / "14_ts_1.yaml").is_file()


def test_an_ungraded_trial_says_why_under_grades(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new-team trial's agent reported an error: `agent` printed an empty grades section."""
    import io

    from rich.console import Console

    from promptloop.optimizer.cli import agent as agent_cli
    from promptloop.optimizer.cli import ui

    sink = io.StringIO()
    monkeypatch.setattr(ui, "out", Console(file=sink, width=100))
    result = {"agent": "notes", "task_id": "t1", "suite": "notes", "status": "failed",
              "failure_reason": "agent error: reply is not a JSON object", "input": {},
              "outcome": {}, "scores": [], "messages": [], "events": [], "summary": "runs=0"}
    agent_cli._show_trial(result, as_json=False)
    text = sink.getvalue()
    assert "(not graded: agent error: reply is not a JSON object)" in text, text


def test_a_trial_that_errors_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A team's http agent was down: `agent NAME --task T` printed "status: errored: could not
    reach ..." and exited 0 ("ok": true in --json), where eval exits 2 for the same."""
    import socket

    from tests.cli_json import cli_envelope
    from tests.e2e.support import enter
    from tests.one_task_repo import one_task_repo

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = one_task_repo(tmp_path / "repo", "down", 'adapter = "http"\n'
                         f'url = "http://127.0.0.1:{port}/trial"\nmodel = "local:smollm2"\n')
    enter(repo, monkeypatch)
    result = runner.invoke(app, ["agent", "down", "--task", "t1", "--json"])
    envelope = cli_envelope(result.stdout)
    assert result.exit_code == 2 and envelope["exit_code"] == 2 and not envelope["ok"]
    assert envelope["result"]["status"] == "errored"
    assert "Error: the trial errored: " in " ".join(result.stderr.split())
