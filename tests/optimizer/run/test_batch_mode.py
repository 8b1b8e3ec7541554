"""`promptloop eval --batch`: the judge calls of a run go out as one provider batch (loopback
fakes of the batch APIs, real SDKs), results land on the right trials, a killed run resumes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import promptloop.agents.llm.batch as batch_module
from promptloop.optimizer.cli.app import app
from tests.cli_json import cli_result
from tests.llm.batch_server import BatchServer

TASKS = ("pkm-cap-zh-parents-blood-pressure", "pkm-cap-ferreira-null-model",
         "pkm-cap-haddad-sedum-visits")
POISON = "ferreira"
"""Judge requests whose prompt names this task's input come back errored."""
runner = CliRunner()


def _answer(prompt: str) -> str | None:
    if "Ferreira" in prompt or "ferreira" in prompt:
        return None if _answer.poison else _reply(0.9)
    return _reply(0.9 if "血压" in prompt else 0.2)


def _reply(value: float) -> str:
    dims = ("groundedness", "non_redundancy", "expression_quality", "coherence", "voice",
            "formatting", "structure")
    return json.dumps(dict.fromkeys(dims, value) | {"rationale": f"scored {value}"})


_answer.poison = False  # type: ignore[attr-defined]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchServer]:
    monkeypatch.setattr(batch_module, "POLL_START_S", 0.01)
    monkeypatch.setattr(_answer, "poison", False)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with BatchServer(_answer) as s:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield s


def _eval(state: Path, judge: str, server: BatchServer, *extra: str) -> dict:
    args = ["eval", "--state-dir", str(state), "--json", "--suite", "pkm_agent",
            "--agent-model", "scripted:pkm", "--judge-model", judge, "--trials", "2"]
    if judge.startswith("openai:"):
        args += ["--base-url", f"{server.url}/v1"]
    for task in TASKS:
        args += ["--task", task]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    return cli_result(result.stdout)


def _report(state: Path, run: str) -> dict:
    out = runner.invoke(app, ["report", run, "--format", "json", "--state-dir", str(state)])
    return json.loads(out.stdout)


def _judge_scores(report: dict) -> dict[tuple[str, int], list[dict]]:
    return {
        (t["trial"]["taskId"], t["trial"]["trialIndex"]): [
            s for s in t["scores"] if s["graderName"].startswith("pkm_insight_quality")
        ]
        for t in report["trials"]
    }


@pytest.mark.parametrize("judge", ["anthropic:claude-fake", "openai:gpt-fake"])
def test_one_batch_for_the_run_and_results_on_the_right_trials(
    judge: str, server: BatchServer, tmp_path: Path
) -> None:
    data = _eval(tmp_path, judge, server, "--batch")
    assert len(server.creates) == 1  # every judge call of the run in one batch
    assert server.direct == 1  # the judge's preflight ping only
    assert max(server.polls.values()) > server.polls_before_end  # polled through in_progress
    scores = _judge_scores(_report(tmp_path, data["run"]))
    assert len(scores) == 6
    for (task, _), judged in scores.items():
        assert judged and all(s["value"] is not None for s in judged), task
        want = 0.9 if "zh-" in task or POISON in task else 0.2
        assert all(abs(s["value"] - want) < 1e-9 for s in judged), (task, judged)
    [state] = list((tmp_path / "batches").glob("*.json"))
    saved = json.loads(state.read_text())
    assert saved["format"] == "promptloop.batch/1" and saved["state"] == "ended"
    # the run says its judge calls were batched, and its cost says at which price
    from promptloop.optimizer.report.store import default_store_dir, load_run

    run = load_run(default_store_dir(tmp_path), data["run"])
    assert run.provenance.judge_batched
    md = runner.invoke(app, ["report", data["run"], "--state-dir", str(tmp_path)]).stdout
    assert "judge calls went through a provider batch: priced at 50% of the list price" in md

    # a rerun pays nothing: the trials come from the trial cache, no new batch
    again = _eval(tmp_path, judge, server, "--batch")
    assert again["summary"]["cached_trials"] == 6 and len(server.creates) == 1


def test_an_errored_batch_result_errors_only_that_trials_judge(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_answer, "poison", True)
    data = _eval(tmp_path, "anthropic:claude-fake", server, "--batch")
    report = _report(tmp_path, data["run"])
    status = {(t["trial"]["taskId"], t["trial"]["trialIndex"]): t["trial"]["status"]
              for t in report["trials"]}
    for (task, index), value in status.items():
        if POISON in task:
            assert value == "errored", (task, index)
        else:
            assert value != "errored", (task, index)
    infra = [t["trial"].get("failureReason") or "" for t in report["trials"]
             if POISON in t["trial"]["taskId"]]
    assert all("judge failed" in i and "judge fell over" in i for i in infra)


def test_without_batch_the_judge_is_called_directly(server: BatchServer, tmp_path: Path) -> None:
    _eval(tmp_path, "anthropic:claude-fake", server)
    assert not server.creates and server.direct > 1
    assert not (tmp_path / "batches").exists()


def test_a_rerun_resumes_the_batch_a_stopped_run_submitted(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first run stops waiting while the batch is still in progress (as a killed run would)
    server.polls_before_end = 1_000
    monkeypatch.setattr(batch_module, "TIMEOUT_S", 0.02)
    args = ["eval", "--state-dir", str(tmp_path), "--json", "--suite", "pkm_agent",
            "--agent-model", "scripted:pkm", "--judge-model", "anthropic:claude-fake",
            "--trials", "1", "--batch"]
    for task in TASKS:
        args += ["--task", task]
    first = runner.invoke(app, args)
    assert first.exit_code == 2, first.output  # every trial's judge: errored, not a 0 score
    [state] = list((tmp_path / "batches").glob("*.json"))
    saved = json.loads(state.read_text())
    assert saved["state"] == "submitted" and len(server.creates) == 1

    server.polls_before_end = 0
    monkeypatch.setattr(batch_module, "TIMEOUT_S", 60.0)
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(server.creates) == 1  # the same batch was polled, nothing new submitted
    assert json.loads(state.read_text())["state"] == "ended"
    summary = cli_result(again.stdout)["summary"]
    assert summary["errored_trials"] == 0 and summary["num_trials"] == 3


def test_each_trial_is_graded_once_and_each_judge_request_sent_once(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import promptloop.optimizer.run.trial as trial_module
    from promptloop.graders.base import GradeContext, Score

    calls: Counter[tuple[str, str]] = Counter()
    real = trial_module.run_grader

    async def counted(name: str, config: Any, ctx: GradeContext) -> Score:
        calls[(ctx.task_id, name)] += 1
        return await real(name, config, ctx)

    monkeypatch.setattr(trial_module, "run_grader", counted)
    data = _eval(tmp_path, "anthropic:claude-fake", server, "--batch")
    assert data["summary"]["num_trials"] == 6
    from promptloop.optimizer.core.suites import load_suite, resolve_suite_path

    suite = load_suite(resolve_suite_path("pkm_agent", "capability"))
    want = Counter({(t.id, g.name): 2 for t in suite.tasks if t.id in TASKS
                    for g in t.spec.graders})
    assert calls == want  # 2 trials per task, each grader once per trial
    [batch] = server.creates
    judge_calls = sum(n for (_, name), n in calls.items() if name.startswith("pkm_insight"))
    assert len(batch["requests"]) == judge_calls  # every judge grader asked once, one batch


def _trials(state: Path, run: str) -> list[Any]:
    from promptloop.optimizer.report.store import default_store_dir, load_run

    return load_run(default_store_dir(state), run).trials


def test_under_batch_a_raising_tool_still_fails_its_held_trial(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 19 (errors by cause) meets issue 21 (held trials graded once): the judge still
    # grades the held trial in the run's one batch, and the tool's exception fails it
    from promptloop.agents.llm.types import ToolCall
    from promptloop.agents.tools import Tool, ToolResult

    original = Tool.invoke
    raised: list[Tool] = []  # the first Write of each trial raises; the retry succeeds

    async def invoke(self: Tool, call: ToolCall) -> ToolResult:
        if self.name == "Write" and not any(t is self for t in raised):
            raised.append(self)
            raise RecursionError("maximum recursion depth exceeded")
        return await original(self, call)

    monkeypatch.setattr(Tool, "invoke", invoke)
    data = _eval(tmp_path, "anthropic:claude-fake", server, "--batch")
    assert len(server.creates) == 1  # the insight was judged, in the run's one batch
    trials = _trials(tmp_path, data["run"])
    assert len(trials) == 6
    for t in trials:
        assert (t.status, t.infra_error) == ("failed", None), t.task_id
        assert t.agent_error == t.failure_reason == (
            "tool Write raised RecursionError: maximum recursion depth exceeded")
        assert any(s.grader.startswith("pkm_insight") and s.value is not None
                   for s in t.scores), t.task_id


def test_under_batch_an_outcome_capture_that_raises_is_not_held(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from promptloop.agents.pkm.agent import PkmAgentSession

    def boom(self: PkmAgentSession, transcript: object) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(PkmAgentSession, "outcome", boom)
    data = _eval(tmp_path, "anthropic:claude-fake", server, "--batch")
    assert not server.creates  # nothing to judge: no trial waits for a batch
    for t in _trials(tmp_path, data["run"]):
        assert (t.status, t.infra_error, t.scores) == ("failed", None, [])
        assert t.agent_error == "outcome capture raised RecursionError: maximum recursion " \
            "depth exceeded"
