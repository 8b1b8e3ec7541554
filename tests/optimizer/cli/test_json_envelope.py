"""Issue 32 item 5: every command's `--json` is one envelope, `{"command", "ok", "exit_code",
"result" | "error"}`, on a failure and on a success alike, valid under the schema shipped in
docs/json-envelope.schema.json; keys are snake_case at every level."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer.main
from typer.testing import CliRunner

from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.view.server import ViewServer
from tests.optimizer.lifecycle.helpers import T0, judge_score, run, save_all, trial
from tests.optimizer.lifecycle.test_calibration import DIMS, GRADER, JUDGE, label, write_labels
from tests.optimizer.workflows.test_optimize import GOOD

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "docs" / "json-envelope.schema.json").read_text())
runner = CliRunner()
GROUP = typer.main.get_command(app)


def envelope(args: list[str]) -> tuple[int, dict[str, Any]]:
    """(exit code, the envelope) of one invocation; stdout is the envelope and nothing else."""
    result = runner.invoke(app, args)
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    assert data["exit_code"] == result.exit_code or data["command"] == "view"
    return result.exit_code, data


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("doc", [
    {"command": "eval", "ok": True, "exit_code": 1, "result": {}},
    {"command": "eval", "ok": False, "exit_code": 1, "result": {}},
    {"command": "eval", "ok": True, "exit_code": 0, "result": {"runName": "x"}},
    {"command": "eval", "ok": True, "exit_code": 0},
    {"command": "nope", "ok": True, "exit_code": 0, "result": None},
    {"command": "eval", "ok": False, "exit_code": 2, "error": {"kind": "user", "message": ""}},
])
def test_the_schema_rejects_what_is_not_an_envelope(doc: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


FAILING: dict[str, list[str]] = {
    "agent": ["agent", "--no-such-flag"],
    "suites": ["suites", "/no/such/folder"],
    "init": ["init", "{file}"],
    "eval": ["eval", "--suite", "pkm_agent", "--state-dir", "{file}/state"],
    "report": ["report", "no-such-run", "--state-dir", "{state}"],
    "optimize": ["optimize", "--suite", "pkm_agent", "--bucket", "x", "--state-dir",
                 "{file}/state"],
    "review": ["review", "--base", "no-such-ref", "--agent-model", "scripted:pkm"],
    "nightly": ["nightly", "--agent", "pkm_agent", "--state-dir", "{file}/state"],
    "health": ["health", "--agent", "pkm_agent", "--state-dir", "{file}/state"],
    "graduate": ["graduate", "--agent", "pkm_agent", "--bucket", "x", "--state-dir",
                 "{file}/state"],
    "calibrate": ["calibrate", "--state-dir", "{file}/state"],
    "runs": ["runs", "--limit", "many"],
    "doctor": ["doctor", "--agent-model", "antropic:x"],
    "profile": ["profile", "--agent", "pkm_agent", "--state-dir", "{file}/state"],
    "view": ["view", "--state-dir", "{file}/nowhere"],
    "help": ["help", "no-such-command"],
}
"""A failing invocation of every command."""


def test_every_command_takes_json_and_is_covered() -> None:
    commands = GROUP.commands  # type: ignore[attr-defined]
    takes_json = {name for name, cmd in commands.items()
                  if any("--json" in getattr(p, "opts", ()) for p in cmd.params)}
    assert takes_json == set(commands) == set(FAILING)
    assert set(commands) | {"promptloop"} == set(SCHEMA["properties"]["command"]["enum"])


@pytest.mark.parametrize("command", sorted(FAILING))
def test_a_failure_is_an_envelope_with_an_error(
    command: str, repo: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    args = [a.replace("{file}", str(tmp_path / "a-file")).replace("{state}", str(state))
            for a in FAILING[command]]
    monkeypatch.chdir(repo)
    code, data = envelope([*args, "--json"])
    assert code in (1, 2)
    assert data["command"] == command and data["ok"] is False
    assert data["error"]["kind"] == {1: "user", 2: "infrastructure"}[code]
    assert data["error"]["message"] and "Error:" not in data["error"]["message"]


def test_a_usage_error_before_any_command_is_an_envelope_too() -> None:
    code, data = envelope(["--config", "/no/such.toml", "suites", "--json"])
    assert code == 1 and data["command"] == "suites" and "no/such.toml" in data["error"]["message"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def evaluated(repo: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`repo` with one saved eval run of its pkm_agent suites in `state`."""
    monkeypatch.chdir(repo)
    code, data = envelope(["eval", "--suite", "pkm_agent", "--agent-model", "scripted:pkm",
                           "--trials", "1", "--state-dir", str(state), "--json"])
    assert code == 0, data
    return repo


def _judged_state(tmp_path: Path) -> Path:
    """A state folder with one run whose trials a judge scored, and labels of them in
    tmp_path/labels.jsonl."""
    state = tmp_path / "judged"
    trials = [trial(task, "insight", 0, sum(v) / 3 >= 0.6, T0,
                    scores=[judge_score(dict(zip(DIMS, v, strict=True)))])
              for task, v in JUDGE.items()]
    save_all(state, [run("pkm-1", {}, trials=trials, suite="pkm_agent_capability",
                         agent="pkm_agent")])
    write_labels(tmp_path / "labels.jsonl", [label(t, v) for t, v in JUDGE.items()])
    return state


def _serve_until_ctrl_c(self: ViewServer, *args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


SUCCEEDING: dict[str, list[str]] = {
    "agent": ["agent", "pkm_agent", "--agent-model", "scripted:pkm", "--content",
              "Bought a standing desk for the home office", "--fact-id", "2026/03/14.md#ts_4"],
    "suites": ["suites"],
    "init": ["init", "{tmp}/fresh"],
    "eval": ["eval", "--suite", "pkm_agent/regression", "--agent-model", "scripted:pkm",
             "--trials", "1", "--state-dir", "{state}"],
    "report": ["report", "latest", "--state-dir", "{state}"],
    "optimize": ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial",
                 "--iterations", "1", "--agent-model", "scripted:pkm", "--proposer-model",
                 "scripted:proposer", "--proposer-format", "diff", "--state-dir", "{state}"],
    "review": ["review", "--base", "HEAD", "--head", "HEAD", "--agent-model", "scripted:pkm",
               "--state-dir", "{state}"],
    "nightly": ["nightly", "--agent", "pkm_agent", "--agent-model", "scripted:pkm",
                "--max-tokens", "0", "--state-dir", "{state}"],
    "health": ["health", "--agent", "pkm_agent", "--state-dir", "{state}"],
    "graduate": ["graduate", "--agent", "pkm_agent", "--bucket", "skip_trivial", "--dry-run",
                 "--force", "--state-dir", "{state}"],
    "calibrate": ["calibrate", "--grader", GRADER, "--labels", "{tmp}/labels.jsonl",
                  "--state-dir", "{state}"],
    "runs": ["runs", "--state-dir", "{state}"],
    "doctor": ["doctor", "--agent-model", "scripted:pkm", "--state-dir", "{state}"],
    "profile": ["profile", "--agent", "pkm_agent", "--budget", "4", "--dry-run",
                "--agent-model", "scripted:pkm", "--state-dir", "{state}"],
    "view": ["view", "--port", "0", "--state-dir", "{state}"],
    "help": ["help", "optimize"],
}
"""A succeeding invocation of every command, in a repository with one saved eval run."""


@pytest.mark.parametrize("command", sorted(SUCCEEDING))
def test_a_success_is_an_envelope_with_a_result(
    command: str, evaluated: Path, state: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    monkeypatch.setattr(ViewServer, "serve_forever", _serve_until_ctrl_c)
    if command == "init":
        _git(tmp_path, "init", "-q", str(tmp_path / "fresh"))
    if command == "calibrate":
        state = _judged_state(tmp_path)
    args = [a.replace("{state}", str(state)).replace("{tmp}", str(tmp_path))
            for a in SUCCEEDING[command]]
    code, data = envelope([*args, "--json"])
    assert data["command"] == command
    assert data["ok"] is True and data["exit_code"] == 0, data
    assert data["result"] is not None
    if command == "view":
        assert code == 130  # Ctrl-C; the envelope was printed when the server listened
        assert data["result"]["url"].startswith("http://127.0.0.1:")
    else:
        assert code == 0


def test_an_error_listing_several_problems_gives_one_message_each() -> None:
    from promptloop.optimizer.cli.ui import envelope

    doc = envelope("eval", 1, [], ["3 problems in promptloop.toml:\n- [eval] key 'x': unknown"
                                   "\n- [eval] key 'y': unknown\n- [agents.a] key 'z': unknown"])
    assert doc["error"]["messages"] == ["3 problems in promptloop.toml:",
                                        "[eval] key 'x': unknown", "[eval] key 'y': unknown",
                                        "[agents.a] key 'z': unknown"]
    assert doc["error"]["message"].count("\n") == 3  # the message is the text as printed
