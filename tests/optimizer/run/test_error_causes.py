"""Errors split by cause (issue 19): an exception raised by a tool or by outcome capture because
of what the agent did FAILS the trial, naming the tool and the exception; only infrastructure
and bugs in promptloop itself (named "promptloop bug: ...") make a trial errored. Each case
failed before the split: the agent could turn its own failure into an excluded trial."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from promptloop.agents.card.agent import CardAgentSession
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse, ToolCall
from promptloop.agents.tools import Tool, ToolResult
from promptloop.agents.trees import remove_tree
from promptloop.optimizer.adapters.kinds import session as session_kind
from promptloop.optimizer.core.results import RunResult
from promptloop.optimizer.core.suites import load_suite
from promptloop.optimizer.report.markdown import render_markdown
from promptloop.optimizer.report.summary import summarize
from promptloop.optimizer.run.runner import RunOptions, run_suite
from tests import policies
from tests.optimizer import suite_builder as sb

PKM_GRADERS = [{"name": "pkm_completion"}]


def _run(root: Path, state: Path, agent: str, tasks: list[dict[str, Any]],
         model: ScriptedModel | None = None) -> RunResult:
    suite = load_suite(sb.suite(root, tasks, agent=agent, kind="regression"))
    if model is None:
        model = policies.card_model() if agent == "card_agent" else policies.pkm_model()
    opts = RunOptions(agent_model=f"scripted:{agent.split('_')[0]}", state_dir=state,
                      prompt_text="prompt", reuse=False)
    return asyncio.run(run_suite(suite, opts, model))


def _raising_tool(monkeypatch: pytest.MonkeyPatch, name: str, err: Exception) -> None:
    original = Tool.invoke

    async def invoke(self: Tool, call: ToolCall) -> ToolResult:
        if self.name == name:
            raise err
        return await original(self, call)

    monkeypatch.setattr(Tool, "invoke", invoke)


def _card(tmp_path: Path, state: Path) -> RunResult:
    return _run(tmp_path / "s", state, "card_agent",
                [sb.task("coffee", "Coffee at Bean Bar $4.20", 1, trials=1)])


def test_a_raising_tool_fails_the_trial_and_names_tool_and_exception(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _raising_tool(monkeypatch, "save_timeline_card", RecursionError("maximum recursion depth"))
    [t] = _card(tmp_path, state).trials
    assert t.status == "failed" and t.infra_error is None
    assert t.agent_error == t.failure_reason == (
        "tool save_timeline_card raised RecursionError: maximum recursion depth")
    assert t.score == 0.0 and t.counts
    # the model was told, as before, and the transcript names the exception
    assert any(c.is_error and "RecursionError" in c.result for c in t.transcript.tool_calls)
    assert [e.kind for e in t.transcript.events].count("tool_exception") >= 1


def test_a_raising_tool_fails_a_trial_whose_grades_would_pass(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _raising_tool(monkeypatch, "Glob", RecursionError("maximum recursion depth exceeded"))

    def policy(req: Request) -> ModelResponse:
        if not any(m.role == "tool" for m in req.messages):
            return reply("", call("Glob", pattern="**/*.md"))
        return policies.pkm_policy(req)

    [t] = _run(tmp_path / "s", state, "pkm_agent", [sb.task(
        "sleep", "Slept badly again, maybe 5 hours after coffee at 4pm.", 1, trials=1,
        graders=PKM_GRADERS)], ScriptedModel(policy)).trials
    assert [s.passed for s in t.scores] == [True]  # the agent finished its work ...
    assert t.status == "failed"  # ... but a tool raised on what it sent
    assert t.failure_reason == "tool Glob raised RecursionError: maximum recursion depth exceeded"


def test_outcome_capture_that_raises_fails_the_trial(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: CardAgentSession, transcript: object) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(CardAgentSession, "outcome", boom)
    [t] = _card(tmp_path, state).trials
    assert (t.status, t.infra_error) == ("failed", None)
    assert t.agent_error == "outcome capture raised RecursionError: maximum recursion depth " \
        "exceeded"
    assert t.failure_reason == t.agent_error and not t.scores


def test_a_bug_in_promptloop_errors_the_trial_loudly(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> object:
        raise KeyError("workspace")

    monkeypatch.setattr(session_kind, "open_session", broken)
    [t] = _card(tmp_path, state).trials
    assert t.status == "errored" and t.agent_error is None
    assert t.infra_error == "promptloop bug: KeyError: 'workspace'"


def test_the_report_counts_failed_and_errored_apart(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _raising_tool(monkeypatch, "save_timeline_card", ValueError("bad"))
    result = _card(tmp_path, state)
    s = summarize(result)
    assert (s.failed_trials, s.agent_error_trials, s.errored_trials) == (1, 1, 0)
    md = render_markdown(result, s)
    assert ("1 failed (1 by an agent error: the agent reported one, or a tool or outcome capture "
            "raised)") in md
    assert "0 errored" in md
    assert "tool save_timeline_card raised ValueError: bad" in md


def _deep_fixture(root: Path, levels: int) -> None:
    pkm = root / "fx" / "PKM"
    pkm.mkdir(parents=True)
    fd = os.open(pkm, os.O_RDONLY | os.O_DIRECTORY)
    for name in ["deep"] + ["d"] * (levels - 1):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open("bottom.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)


def test_a_1100_level_tree_neither_errors_nor_crashes_the_trial(
    tmp_path: Path, state: Path
) -> None:
    root = tmp_path / "s"
    _deep_fixture(root, 1100)
    try:
        result = _run(root, state, "pkm_agent", [sb.task(
            "sleep", "Slept badly again, maybe 5 hours after coffee at 4pm.", 1, trials=1,
            graders=PKM_GRADERS, input={"fixture_dir": "fx"})])
    finally:
        remove_tree(root)  # pytest's own cleanup (shutil.rmtree) recurses per level
    [t] = result.trials
    assert t.status == "passed", (t.status, t.failure_reason)
    assert any(k.endswith("bottom.md") for k in t.outcome["file_contents"])
