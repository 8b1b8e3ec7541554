"""Fault tests: real suites against a loopback provider that fails a fraction of its calls.

A scripted Card/PKM agent behind an OpenAI-compatible loopback server answers most calls well
and every third one with a 429, a 500, a hang past the client timeout, malformed tool
arguments or a truncated JSON body; one input's calls always fail (provider exhausted). The run
must complete, count retries, report exhausted trials as errored (not failed), turn malformed
arguments into tool error results, and leave the user's checkout untouched.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from typer.testing import CliRunner

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.providers.openai_provider import OpenAIProvider
from promptloop.agents.llm.registry import SCRIPTED_MODELS
from promptloop.agents.llm.scripted import ScriptedModel, reply
from promptloop.agents.llm.types import Message, ModelSettings
from promptloop.agents.runtime import RuntimeConfig
from promptloop.optimizer.cli.app import app
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import REPO_ROOT
from promptloop.optimizer.report.store import load_report_file
from promptloop.optimizer.run.models import ModelIds
from promptloop.optimizer.run.runner import RunOptions
from promptloop.optimizer.workflows.evaluate import EvalRequest, evaluate
from tests.cli_json import cli_result
from tests.llm.agent_server import AgentServer, FaultPlan
from tests.llm.fake_api import FakeAPI, Reply, openai_completion
from tests.optimizer.conftest import pkm_repo
from tests.optimizer.workflows.test_optimize import GOOD

WATCHED = ("tasks", "prompts", "fixtures", ".promptloop")


def checkout_snapshot() -> tuple[str, frozenset[tuple[str, int, int]]]:
    """git status of the paths a run reads, plus every file's (path, size, mtime) under them."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", *WATCHED],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = frozenset(
        (str(p.relative_to(REPO_ROOT)), p.stat().st_size, p.stat().st_mtime_ns)
        for top in WATCHED
        for p in (REPO_ROOT / top).rglob("*")
        if p.is_file()
    )
    return status, files


def check_faulty_run(run: RunResult, api: AgentServer, poisoned_task: str) -> None:
    """What every faulty run must show, whatever trial the faults happened to land on."""
    statuses = {(t.task_id, t.trial_index): t.status for t in run.trials}
    errored = [t for t in run.trials if t.status == "errored"]
    # provider exhausted only for the poisoned input: errored, with the reason, never "failed"
    assert {t.task_id for t in errored} == {poisoned_task}, statuses
    assert all(t.infra_error and "HTTP 500 after 4 retries" in t.infra_error for t in errored)
    assert all(not t.scores for t in errored)
    assert all(t.status in ("passed", "failed") for t in run.trials if t.task_id != poisoned_task)
    assert api.poisoned_calls == 5 * len(errored)  # first attempt + 4 retries each
    # retried calls are counted in the transcripts
    retries = sum(t.transcript.metrics.n_retries for t in run.trials)
    assert retries >= sum(n for k, n in api.faults.items() if k != "malformed_args") > 0
    # malformed tool arguments became tool error results, and the agent recovered
    bad = [
        (t, c) for t in run.trials for c in t.transcript.tool_calls if c.raw_arguments is not None
    ]
    assert len(bad) == api.faults["malformed_args"] > 0
    for trial, record in bad:
        assert record.is_error and record.result.startswith("Invalid arguments for")
        assert trial.status != "errored"
        assert any(not c.is_error for c in trial.transcript.tool_calls)


def test_card_regression_through_eval_cli(state: Path) -> None:
    plan = FaultPlan(
        every=3, kinds=("429", "500", "malformed_args", "truncated"), poison=("Coffee at Bean Bar",)
    )
    before = checkout_snapshot()
    with AgentServer(plan) as api:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--suite",
                "card_agent",
                "--kind",
                "regression",
                "--agent-model",
                "openai:fake",
                "--base-url",
                f"{api.url}/v1",
                "--out",
                str(state),
                "--json",
                "--fresh",
            ],
        )
    assert result.exit_code == 0, result.output
    data = cli_result(result.stdout)
    summary = data["summary"]
    assert summary["errored_trials"] == 2 and summary["num_trials"] == 16
    assert summary["counted_trials"] == 14
    assert summary["passed_trials"] + summary["failed_trials"] == 14
    assert summary["usage"]["retries"] > 0
    assert any("HTTP 500" in message for message in summary["infra_errors"])
    assert set(api.faults) == {"429", "500", "malformed_args", "truncated"}, api.faults
    run = load_report_file(Path(data["report"]))
    check_faulty_run(run, api, "card-reg-plain-transaction-coffee")
    assert checkout_snapshot() == before


async def test_pkm_regression_with_hangs_through_evaluate(state: Path) -> None:
    plan = FaultPlan(every=3, hang_s=1.5, poison=("Test message, please ignore",))
    before = checkout_snapshot()
    with AgentServer(plan) as api:
        request = EvalRequest(
            suite="pkm_agent",
            kind="regression",
            models=ModelIds(agent="openai:fake", base_url=f"{api.url}/v1"),
            options=RunOptions(
                agent_model="openai:fake",
                reuse=False,
                runtime=RuntimeConfig(settings=ModelSettings(timeout_s=0.4)),
            ),
        )
        run, summary, path = await evaluate(request, state)
    assert path.is_file() and path.is_relative_to(state)
    assert api.faults["hang"] > 0 and set(api.faults) == set(plan.kinds), api.faults
    assert summary.errored_trials == 2 and summary.counted_trials == len(run.trials) - 2
    assert summary.usage.retries > 0
    assert not any(t.status == "timedOut" for t in run.trials)
    check_faulty_run(run, api, "pkm-reg-test-message")
    assert checkout_snapshot() == before


async def test_truncated_body_is_retried_then_reported(fake_api: FakeAPI) -> None:
    good = openai_completion("fine")
    cut = Reply(raw=json.dumps(good).encode()[:40])
    sdk = AsyncOpenAI(api_key="k", base_url=f"{fake_api.url}/v1", max_retries=4, timeout=5)
    client = OpenAIProvider("fake", client=sdk)
    fake_api.queue(cut, Reply(body=good))
    response = await client.complete([Message.user("hi")])
    assert response.text == "fine" and response.retries == 1
    fake_api.queue(*[cut] * 5)
    with pytest.raises(ProviderError, match="unparseable response body after 4 retries"):
        await client.complete([Message.user("hi")])
    await sdk.close()


# --- fault rates, the per-trial limit, a rejected key, the key in no artifact ---------------

CANARY = "sk-canary-Qm3Zr8Tn5Wx2Yb7Kd4Hf"


async def _card_regression(state: Path, plan: FaultPlan) -> tuple[RunResult, Any, AgentServer]:
    with AgentServer(plan) as api:
        request = EvalRequest(
            suite="card_agent",
            kind="regression",
            models=ModelIds(agent="openai:fake", base_url=f"{api.url}/v1"),
            options=RunOptions(agent_model="openai:fake", reuse=False, concurrency=1),
        )
        run, summary, _ = await evaluate(request, state)
    return run, summary, api


@pytest.mark.parametrize("rate", [0.3, 0.5])
async def test_429_and_500_at_a_rate_change_nothing_but_the_retries(
    rate: float, tmp_path: Path
) -> None:
    clean, clean_summary, _ = await _card_regression(tmp_path / "clean", FaultPlan(every=0))
    run, summary, api = await _card_regression(
        tmp_path / "faulty", FaultPlan(rate=rate, kinds=("429", "500"))
    )
    faults = api.faults["429"] + api.faults["500"]
    assert faults == int(api.agent_calls * rate) and api.faults["429"] and api.faults["500"]
    assert summary.errored_trials == 0 and summary.usage.retries == faults
    assert sum(t.transcript.metrics.n_retries for t in run.trials) == faults
    assert [(t.task_id, t.trial_index, t.status) for t in run.trials] == [
        (t.task_id, t.trial_index, t.status) for t in clean.trials
    ]
    assert summary.trial_pass_rate == clean_summary.trial_pass_rate


async def test_a_hang_past_the_per_trial_limit_times_the_trial_out(state: Path) -> None:
    """The provider hangs longer than the trial may last (but within the client timeout): the
    trial is cut at its limit as timedOut, not errored, and the run goes on."""
    plan = FaultPlan(every=5, kinds=("hang",), hang_s=4.0)
    with AgentServer(plan) as api:
        request = EvalRequest(
            suite="pkm_agent",
            kind="regression",
            models=ModelIds(agent="openai:fake", base_url=f"{api.url}/v1"),
            options=RunOptions(
                agent_model="openai:fake",
                reuse=False,
                timeout_s=2.0,  # a loaded machine's slow trial stays under it
                runtime=RuntimeConfig(settings=ModelSettings(timeout_s=10)),
            ),
        )
        run, summary, _ = await evaluate(request, state)
    timed_out = [t for t in run.trials if t.status == "timedOut"]
    assert api.faults["hang"] > 0 and len(timed_out) == api.faults["hang"]
    assert all(t.failure_reason == "trial exceeded 2s" for t in timed_out)
    assert summary.timed_out_trials == len(timed_out) and summary.errored_trials == 0
    assert all(t.status in ("passed", "failed") for t in run.trials if t not in timed_out)


def _optimize_args(url: str, state: Path) -> list[str]:
    return ["optimize", "--suite", "pkm_agent", "--bucket", "skip_trivial", "--iterations",
            "1", "--agent-model", "openai:fake", "--base-url", f"{url}/v1", "--proposer-model",
            "scripted:proposer", "--proposer-format", "diff", "--out", str(state)]


@pytest.mark.parametrize("command", ["eval", "optimize"])
def test_a_rejected_key_fails_before_any_trial(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.chdir(pkm_repo(tmp_path / "repo"))
    state = tmp_path / "state"
    with AgentServer(reject_key=True) as api:
        args = (
            ["eval", "--suite", "pkm_agent", "--kind", "regression", "--agent-model",
             "openai:fake", "--base-url", f"{api.url}/v1", "--out", str(state)]
            if command == "eval"
            else _optimize_args(api.url, state)
        )
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "OPENAI_API_KEY" in result.output and CANARY[:12] not in result.output
    assert api.requests and all(not r.body.get("tools") for r in api.requests)  # no trial
    assert not list(state.glob("runs/**/*.json"))


def test_the_key_appears_in_no_artifact_of_a_faulty_optimize_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An optimize run on a provider that fails 30% of its calls and quotes the key in its
    error messages: the key is in no file of the state folder (reports, transcripts, ledger,
    session folder, caches), the events log, the checkout or the output."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setitem(SCRIPTED_MODELS, "proposer", lambda: ScriptedModel([reply(GOOD)]))
    repo = pkm_repo(tmp_path / "repo")
    monkeypatch.chdir(repo)
    state, log = tmp_path / "state", tmp_path / "events.jsonl"
    plan = FaultPlan(rate=0.3, kinds=("429", "500"))
    with AgentServer(plan, echo_key=True) as api:
        result = CliRunner().invoke(app, [*_optimize_args(api.url, state), "--events", str(log),
                                          "--json"])
    assert result.exit_code == 0, result.output
    [iteration] = cli_result(result.stdout)["iterations"]
    assert iteration["outcome"] == "accepted"
    assert api.faults["429"] and api.faults["500"]
    assert all(r.headers["authorization"] == f"Bearer {CANARY}" for r in api.requests)
    files = [p for top in (state, repo) for p in top.rglob("*") if p.is_file()] + [log]
    assert {p.parent.name for p in state.rglob("*.jsonl")} >= {"state"}  # the ledger is there
    for path in files:
        data = path.read_bytes()
        assert CANARY.encode() not in data and CANARY[:12].encode() not in data, path
    for text in (result.output, _git_log(repo)):
        assert CANARY[:12] not in text


def _git_log(repo: Path) -> str:
    return subprocess.run(["git", "log", "--all", "--format=%B"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout
