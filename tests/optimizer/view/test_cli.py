"""`promptloop runs` and `promptloop view`, registered on a fresh typer app as app.py will."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from promptloop.optimizer.cli.command import PromptloopCommand, PromptloopGroup
from promptloop.optimizer.cli.runs import runs
from promptloop.optimizer.cli.view import view
from promptloop.optimizer.report.store import list_runs
from promptloop.optimizer.view.server import ViewServer
from tests.cli_json import cli_result
from tests.optimizer.view.builders import EVIL_SUITE, ViewState
from tests.optimizer.view.http import Reply, get

app = typer.Typer(cls=PromptloopGroup)  # the envelope of --json is the group's
app.command("runs", cls=PromptloopCommand)(runs)
app.command("view", cls=PromptloopCommand)(view)
cli = CliRunner()


def test_runs_lists_newest_first_without_splitting_names(view_state: ViewState) -> None:
    result = cli.invoke(app, ["runs", "--state-dir", str(view_state.root)],
                        env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "suite", "kind"]
    assert lines[1].startswith(view_state.cand)
    entries = list_runs(view_state.root / "runs")
    assert len(lines) == len(entries) + 1
    assert all(any(line.startswith(e.run_name + " ") for line in lines) for e in entries)

    narrow = cli.invoke(app, ["runs", "--state-dir", str(view_state.root)],
                        env={"COLUMNS": "80"})
    shown = narrow.stdout.splitlines()
    assert all(len(line) <= 80 for line in shown)
    header = " ".join(shown[:2]).split()
    assert "agent" not in header and "kind" not in header
    assert {"run", "model", "prompt", "commit"} <= set(header)
    assert all(e.run_name in shown or any(line.startswith(e.run_name + " ") for line in shown)
               for e in entries)


def test_runs_filters_by_suite_or_agent_and_prints_json(view_state: ViewState) -> None:
    state = str(view_state.root)
    result = cli.invoke(app, ["runs", "--suite", EVIL_SUITE, "--json", "--state-dir", state])
    assert result.exit_code == 0, result.output
    data = cli_result(result.stdout)
    assert [d["suite_name"] for d in data] == [EVIL_SUITE, EVIL_SUITE]
    assert {"run_name", "agent_model", "prompt_hash", "git_commit",
            "trial_pass_rate"} <= data[0].keys()
    agent = cli_result(cli.invoke(app, ["runs", "--suite", "card_agent", "--json",
                                        "--state-dir", state]).stdout)
    assert agent and all(d["agent_name"] == "card_agent" for d in agent)
    limited = cli_result(cli.invoke(app, ["runs", "--limit", "3", "--json",
                                          "--state-dir", state]).stdout)
    assert limited[0]["run_name"] == view_state.cand and len(limited) == 3
    typo = cli.invoke(app, ["runs", "--suite", "pkm_agnt", "--state-dir", state])
    assert typo.exit_code == 1
    assert "Error:" in typo.output and "Did you mean 'pkm_agent'?" in typo.output


def test_runs_on_an_empty_state_folder(tmp_path: Path) -> None:
    result = cli.invoke(app, ["runs", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0 and "No saved runs" in result.output
    assert cli_result(cli.invoke(app, ["runs", "--json", "--state-dir", str(tmp_path)]
                                 ).stdout) == []


def test_view_serves_the_state_folder_and_opens_a_browser(
    view_state: ViewState, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fetched: list[Reply] = []
    opened: list[str] = []
    original = ViewServer.serve_forever

    def one_request(self: ViewServer, poll_interval: float = 0.5) -> None:
        thread = threading.Thread(target=original, args=(self, 0.05))
        thread.start()
        try:
            fetched.append(get(self, "/"))
        finally:
            self.shutdown()
            thread.join()

    monkeypatch.setattr(ViewServer, "serve_forever", one_request)
    monkeypatch.setattr("webbrowser.open", opened.append)
    result = cli.invoke(app, ["view", "--port", "0", "--open", "--state-dir",
                              str(view_state.root)])
    assert result.exit_code == 0, result.output
    [reply] = fetched
    assert reply.status == 200 and view_state.cand in reply.text
    [url] = opened
    # the line is wrapped at the terminal's width, at spaces
    assert url.startswith("http://127.0.0.1:") and f"serving {view_state.root} at {url}" in \
        " ".join(result.output.split())


def test_view_stops_cleanly_on_ctrl_c(view_state: ViewState,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: ViewServer, poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ViewServer, "serve_forever", interrupted)
    result = cli.invoke(app, ["view", "--port", "0", "--state-dir", str(view_state.root)])
    assert result.exit_code == 130 and "stopped" in result.output  # Ctrl-C: 130, as everywhere


def test_view_usage_errors_exit_1(tmp_path: Path) -> None:
    missing = cli.invoke(app, ["view", "--state-dir", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "no such folder" in missing.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = cli.invoke(app, ["view", "--port", str(port), "--state-dir", str(tmp_path)])
    assert taken.exit_code == 1 and "cannot listen on 127.0.0.1" in taken.output
