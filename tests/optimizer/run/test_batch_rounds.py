"""`--batch` agent turns: the turns of concurrent trials go out as one provider batch per round
(agents/llm/rounds.py), against the loopback OpenAI Batch fake with the real SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import promptloop.agents.llm.batch as batch_module
from promptloop.agents.llm.scripted import Request
from promptloop.optimizer.cli.app import app
from tests import policies
from tests.cli_json import cli_result
from tests.llm.agent_server import from_openai_messages, to_completion
from tests.llm.batch_server import BatchServer

TASKS = ("pkm-cap-zh-parents-blood-pressure", "pkm-cap-ferreira-null-model",
         "pkm-cap-haddad-sedum-visits")
POISONED = "pkm-cap-ferreira-null-model"
runner = CliRunner()


class Agent:
    """The scripted PKM Agent policy over the Chat Completions wire format: a Write tool call
    on the first turn, the closing insight tool call on the second (which ends
    the run).
    Requests of a poisoned input error."""

    def __init__(self) -> None:
        self.poison: str | None = None

    def __call__(self, body: dict[str, Any]) -> dict[str, Any] | None:
        messages = from_openai_messages(body["messages"])
        first_user = next((m.content for m in messages if m.role == "user"), "")
        if self.poison and self.poison in first_user:
            return None
        return to_completion(policies.pkm_policy(Request(messages, [], None)))


@pytest.fixture
def agent() -> Agent:
    return Agent()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, agent: Agent) -> Iterator[BatchServer]:
    monkeypatch.setattr(batch_module, "POLL_START_S", 0.01)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with BatchServer(lambda _prompt: "ok", agent=agent) as s:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield s


def _eval(state: Path, server: BatchServer, *extra: str) -> dict[str, Any]:
    args = ["eval", "--state-dir", str(state), "--json", "--suite", "pkm_agent",
            "--agent-model", "openai:gpt-fake", "--base-url", f"{server.url}/v1",
            "--trials", "2"]
    for task in TASKS:
        args += ["--task", task]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = cli_result(result.stdout)
    out = runner.invoke(app, ["report", data["run"], "--format", "json", "--state-dir",
                              str(state)])
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def _agent_batches(server: BatchServer) -> list[dict[str, Any]]:
    """The batches of agent turns (the judge's batch is another model)."""
    return [c for c in server.creates if c["lines"][0]["body"]["model"] == "gpt-fake"]


def _trials(report: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (t["trial"]["taskId"], t["trial"]["trialIndex"]): (
            t["trial"]["status"],
            t["trial"].get("failureReason"),
            json.dumps(t["trial"].get("outcome"), sort_keys=True),
            sorted((s["graderName"], s["value"]) for s in t["scores"]),
        )
        for t in report["trials"]
    }


def test_one_batch_per_round_and_results_match_a_direct_run(
    server: BatchServer, tmp_path: Path
) -> None:
    batched = _eval(tmp_path / "batch", server, "--batch")
    # 6 trials x 2 turns each (Write, then the closing insight): 2 rounds, each ONE batch
    # holding every trial's turn, not 12 submissions
    assert [len(c["lines"]) for c in _agent_batches(server)] == [6, 6]
    # the tool specs travel in the batched request bodies
    assert all(line["body"].get("tools") for c in _agent_batches(server) for line in c["lines"])
    assert server.agent_direct == 0
    saved = sorted((tmp_path / "batch" / "batches").glob("*.json"))
    assert len(saved) == len(server.creates)
    assert all(json.loads(p.read_text())["state"] == "ended" for p in saved)

    # the run says its agent turns were batched; its report prices them at the batch rate
    from promptloop.optimizer.report.store import default_store_dir, list_runs, load_run

    [entry] = list_runs(default_store_dir(tmp_path / "batch"))
    assert load_run(default_store_dir(tmp_path / "batch"), entry.run_name).provenance.agent_batched
    md = runner.invoke(app, ["report", entry.run_name, "--state-dir",
                             str(tmp_path / "batch")]).stdout
    assert "agent turns went through provider batches: priced at 50% of the list price" in md

    direct = _eval(tmp_path / "direct", server)
    assert len(_agent_batches(server)) == 2 and server.agent_direct == 12
    got, want = _trials(batched), _trials(direct)
    assert len(got) == 6 and got == want
    assert all(v[0] in ("passed", "failed") for v in got.values()), got


def test_an_errored_request_errors_only_its_trial(
    server: BatchServer, agent: Agent, tmp_path: Path
) -> None:
    agent.poison = "r00 null model"  # that input only (fixture names mention Ferreira)
    report = _eval(tmp_path, server, "--batch")
    status = {k: v[0] for k, v in _trials(report).items()}
    assert len(status) == 6
    for (task, index), value in status.items():
        if task == POISONED:
            assert value == "errored", (task, index)
        else:
            assert value != "errored", (task, index)
    # the errored trials dropped out after round 1; the others went on
    assert [len(c["lines"]) for c in _agent_batches(server)] == [6, 4]
    reasons = [t["trial"].get("failureReason") or "" for t in report["trials"]
               if t["trial"]["taskId"] == POISONED]
    assert all("agent fell over" in r for r in reasons), reasons


def test_an_agent_behind_the_gateway_calls_its_model_directly_in_batch_mode(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command agent's turns were batched with no trial identity in their keys: trials of
    one run, of other runs and of other agents shared replies, a rerun served days-old ones,
    and every call was a batch of one (a team's CI). Such an agent keeps its own time limit, so
    its calls go direct, said once; the judge's stay batched."""
    import subprocess

    from tests.e2e.support import enter

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    enter(repo, monkeypatch)
    assert runner.invoke(app, ["init"]).exit_code == 0
    for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
                                 "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    result = runner.invoke(app, ["eval", "--agent", "example", "--agent-model",
                                 "openai:gpt-fake", "--base-url", f"{server.url}/v1",
                                 "--trials", "2", "--batch", "--state-dir",
                                 str(tmp_path / "state")])
    assert "--batch: example's model calls go direct" in result.output, result.output
    assert _agent_batches(server) == []
    assert server.direct == 1 + 6 * 2, server.direct  # the key check, then each trial's call
