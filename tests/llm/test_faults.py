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

import pytest
from openai import AsyncOpenAI
from typer.testing import CliRunner

from agents.llm.errors import ProviderError
from agents.llm.providers.openai_provider import OpenAIProvider
from agents.llm.types import Message, ModelSettings
from agents.runtime import RuntimeConfig
from optimizer.cli.app import app
from optimizer.core.results import RunResult
from optimizer.core.suites import REPO_ROOT
from optimizer.report.store import load_report_file
from optimizer.run.models import ModelIds
from optimizer.run.runner import RunOptions
from optimizer.workflows.evaluate import EvalRequest, evaluate
from tests.llm.agent_server import AgentServer, FaultPlan
from tests.llm.fake_api import FakeAPI, Reply, openai_completion

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
    data = json.loads(result.stdout)
    summary = data["summary"]
    assert summary["erroredTrials"] == 2 and summary["numTrials"] == 16
    assert summary["countedTrials"] == 14
    assert summary["passedTrials"] + summary["failedTrials"] == 14
    assert summary["usage"]["retries"] > 0
    assert any("HTTP 500" in message for message in summary["infraErrors"])
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
