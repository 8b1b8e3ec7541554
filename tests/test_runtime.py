"""The agent loop: turns, parallel tools, errors, stop flag, max turns, re-prompts, transcript."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from promptloop.agents.llm.errors import ProviderError
from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse, ToolCall
from promptloop.agents.runtime import LOOP_DETECTED, RuntimeConfig, run_agent
from promptloop.agents.tools import Tool, ToolArgs, ToolError, ToolResult


class EchoArgs(ToolArgs):
    text: str


class DoneArgs(ToolArgs):
    pass


@dataclass
class Session:
    """A minimal session: `echo` records, `slow` sleeps, `done` ends the run and completes."""

    name: str = "test_agent"
    system_prompt: str = "You are a test."
    done: bool = False
    echoed: list[str] = field(default_factory=list)

    @property
    def tools(self) -> Sequence[Tool]:
        async def echo(a: EchoArgs) -> ToolResult:
            if a.text == "boom":
                raise ToolError("echo refuses 'boom'")
            if a.text == "crash":
                raise RuntimeError("bug in tool")
            self.echoed.append(a.text)
            return ToolResult(content=f"echo:{a.text}")

        async def slow(a: EchoArgs) -> ToolResult:
            await asyncio.sleep(0.2)
            return ToolResult(content=a.text)

        def done(_a: BaseModel) -> ToolResult:
            self.done = True
            return ToolResult(content="saved", stop=True)

        return [
            Tool("echo", "Echo text.", EchoArgs, echo),
            Tool("slow", "Sleep then echo.", EchoArgs, slow),
            Tool("done", "Finish.", DoneArgs, done),
        ]

    def first_message(self) -> str:
        return "Do the thing."

    def missing_requirements(self) -> list[str]:
        return [] if self.done else ["done_called"]

    def reminder(self, missing: list[str]) -> str:
        return f"<system-reminder>Missing: {', '.join(missing)}</system-reminder>"


async def test_success_records_everything() -> None:
    model = ScriptedModel([reply("", call("echo", text="hi")), reply("", call("done"))])
    s = Session()
    t = await run_agent(model, s)
    assert t.completed and s.echoed == ["hi"]
    assert [c.tool_name for c in t.tool_calls] == ["echo", "done"]
    assert t.tool_calls[0].result == "echo:hi" and not t.tool_calls[0].is_error
    assert t.tool_calls[0].ended_at >= t.tool_calls[0].started_at
    assert t.metrics.n_turns == 2 and t.metrics.n_tool_calls == 2
    assert t.metrics.usage.total_tokens == 30
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert any(e.kind == "stop" for e in t.events)
    # the stop flag ended the run: the model was not asked again
    assert len(model.calls) == 2


async def test_parallel_tool_calls_run_concurrently() -> None:
    calls = [call("slow", text=str(i)) for i in range(5)]
    model = ScriptedModel([reply("", *calls), reply("", call("done"))])
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    t = await run_agent(model, Session())
    assert loop.time() - t0 < 0.6  # five 0.2 s tools in parallel, not 1.0 s in series
    # results come back in call order
    assert [m.content for m in t.messages if m.role == "tool"][:5] == ["0", "1", "2", "3", "4"]


async def test_tool_errors_are_results_not_crashes() -> None:
    bad_json = ToolCall(id="x1", name="echo", raw_arguments="{oops", parse_error="not JSON")
    model = ScriptedModel(
        [
            reply(
                "",
                call("echo", text="boom"),
                call("echo", text="crash"),
                call("nope"),
                call("echo", text=5),
                call("echo"),
                bad_json,
            ),
            reply("", call("done")),
        ]
    )
    t = await run_agent(model, Session())
    errors = [c for c in t.tool_calls if c.is_error]
    assert len(errors) == 6
    texts = [c.result for c in errors]
    assert "echo refuses 'boom'" in texts[0]
    assert "RuntimeError" in texts[1]
    assert "Unknown tool 'nope'" in texts[2] and "echo" in texts[2]
    assert "text" in texts[3] and "Invalid arguments" in texts[3]
    assert "Field required" in texts[4]
    assert "not JSON" in texts[5] and errors[5].raw_arguments == "{oops"
    assert t.completed
    tool_msgs = [m for m in t.messages if m.role == "tool"]
    assert all(m.is_error for m in tool_msgs[:6])


async def test_reprompt_until_complete_then_stop() -> None:
    model = ScriptedModel([reply("I think I'm done."), reply("", call("done"))])
    t = await run_agent(model, Session())
    assert t.completed and t.metrics.n_runs == 2
    reminder = [e for e in t.events if e.kind == "reminder"]
    assert len(reminder) == 1 and reminder[0].data["missing"] == ["done_called"]
    assert "Missing: done_called" in model.calls[1].messages[-1].content


async def test_at_most_max_runs() -> None:
    model = ScriptedModel(lambda _r: reply("no"))
    t = await run_agent(model, Session(), RuntimeConfig(max_runs=4))
    assert not t.completed and t.metrics.n_runs == 4 and len(model.calls) == 4
    assert t.missing_requirements == ["done_called"]
    assert sum(e.kind == "reminder" for e in t.events) == 3


async def test_max_turns_is_a_loop_detection_error() -> None:
    # docs/compat.md: reaching max turns is a loop-detection error that ends the agent: no
    # re-prompt (before: every run was re-prompted, 6 turns over 2 runs)
    model = ScriptedModel(lambda _r: reply("", call("echo", text="again")))
    t = await run_agent(model, Session(), RuntimeConfig(max_turns=3, max_runs=2))
    assert t.metrics.n_turns == 3 and t.metrics.n_runs == 1
    assert [e.kind for e in t.events] == ["max_turns", LOOP_DETECTED]
    assert "loop detected" in t.events[-1].detail
    assert not t.completed and t.missing_requirements == ["done_called"]


async def test_max_turns_reprompt_is_an_option() -> None:
    model = ScriptedModel(lambda _r: reply("", call("echo", text="again")))
    config = RuntimeConfig(max_turns=3, max_runs=2, on_max_turns="reprompt")
    t = await run_agent(model, Session(), config)
    assert t.metrics.n_turns == 6
    assert sum(e.kind == "max_turns" for e in t.events) == 2
    assert not any(e.kind == LOOP_DETECTED for e in t.events)


@dataclass
class EchoCompletes(Session):
    """Complete as soon as anything was echoed (no stop flag)."""

    def missing_requirements(self) -> list[str]:
        return [] if self.echoed else ["echo_called"]


async def test_loop_detection_does_not_undo_completion() -> None:
    model = ScriptedModel(lambda _r: reply("", call("echo", text="x")))
    t = await run_agent(model, EchoCompletes(), RuntimeConfig(max_turns=2))
    assert t.metrics.n_turns == 2 and t.events[-1].kind == LOOP_DETECTED
    assert t.completed and t.missing_requirements == []


def test_defaults_are_the_originals() -> None:
    # docs/compat.md: 20 turns, loop-detection error, no forced first tool call
    config = RuntimeConfig()
    assert config.max_turns == 20 and config.max_runs == 4
    assert config.on_max_turns == "error" and config.require_tool_first_turn is False


async def test_first_tool_call_is_forced_only_on_request() -> None:
    model = ScriptedModel([reply("", call("done"))])
    await run_agent(model, Session())
    assert model.calls[0].settings.tool_choice == "auto"
    forced = ScriptedModel([reply("", call("done"))])
    await run_agent(forced, Session(), RuntimeConfig(require_tool_first_turn=True))
    assert forced.calls[0].settings.tool_choice == "required"


async def test_model_error_propagates_with_event() -> None:
    def fail(_r: Request) -> ModelResponse:
        raise ProviderError("HTTP 503 after 4 retries", retries=4)

    from promptloop.agents.transcript import Transcript

    transcript = Transcript()
    with pytest.raises(ProviderError):
        await run_agent(ScriptedModel(fail), Session(), transcript=transcript)
    assert transcript.events[-1].kind == "infra_error"
    assert transcript.messages[0].role == "system"


async def test_retries_counted() -> None:
    r = reply("", call("done")).model_copy(update={"retries": 2})
    t = await run_agent(ScriptedModel([r]), Session())
    assert t.metrics.n_retries == 2 and any(e.kind == "retry" for e in t.events)
