"""The agent loop shared by both agents.

One *run* is a sequence of turns: ask the model, execute every tool call it made (in
parallel), feed the results back, until the model stops calling tools, a tool raises the stop
flag, or `max_turns` is reached. After each run the session's completion evidence is checked;
if something is missing the model gets a reminder listing it, up to `max_runs` runs.

Defaults are the original harness's (docs/compat.md): 20 turns per run, reaching them is a
loop-detection error that ends the agent (no re-prompt), and no turn is forced to be a tool
call. `on_max_turns="reprompt"` and `require_tool_first_turn=True` are explicit opt-ins.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.types import (
    Message,
    ModelClient,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSpec,
)
from promptloop.agents.tools import Tool, ToolResult
from promptloop.agents.transcript import ToolCallRecord, Transcript, utcnow


class AgentSession(Protocol):
    """One agent working on one input in one workspace."""

    name: str
    system_prompt: str

    @property
    def tools(self) -> Sequence[Tool]: ...

    def first_message(self) -> str: ...

    def missing_requirements(self) -> list[str]:
        """Completion evidence: names of the checks that fail (empty = complete)."""
        ...

    def reminder(self, missing: list[str]) -> str:
        """The system reminder sent when a run ended incomplete."""
        ...


LOOP_DETECTED = "loop_detected"
"""Event kind recorded when a run reaches `max_turns` (the original's loop-detection error)."""


DEFAULT_MAX_TURNS = 20
"""Model turns per run in the original harness; every default in promptloop refers to this."""


@dataclass(frozen=True)
class RuntimeConfig:
    max_turns: int = DEFAULT_MAX_TURNS
    """Model turns per run (the original harness: 20)."""
    max_runs: int = 4
    """Runs per agent: the first, then one per re-prompt."""
    require_tool_first_turn: bool = False
    """Opt-in: force the first turn of each run to be a tool call, which keeps weak models from
    answering in prose and ending the run. The original harness forces nothing."""
    on_max_turns: Literal["error", "reprompt"] = "error"
    """What reaching `max_turns` does. "error" (original): a loop-detection error ends the
    agent, with no re-prompt. "reprompt" (opt-in): the run ends and the completion check may
    re-prompt, as after any other run."""
    settings: ModelSettings = field(default_factory=ModelSettings)


TOOL_EXCEPTION = "tool_exception"
"""Event kind recorded when a tool raised instead of returning a result: the exception was
caused by what the agent sent, so the trial fails (never errored) and names the tool."""


async def _run_tool(
    tools: dict[str, Tool], call: ToolCall
) -> tuple[ToolResult, float, float, str | None]:
    """The call's result, its start and end, and what the tool raised (None: it returned)."""
    started = time.time()
    tool = tools.get(call.name)
    raised = None
    if tool is None:
        result = ToolResult(
            content=f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(tools))}.",
            is_error=True,
        )
    else:
        try:
            result = await tool.invoke(call)
        except Exception as err:  # the model sees an error result; the trial will fail
            raised = f"tool {call.name} raised {type(err).__name__}: {err}"
            result = ToolResult(
                content=f"Tool {call.name} failed: {type(err).__name__}: {err}", is_error=True
            )
    return result, started, time.time(), raised


async def run_agent(
    client: ModelClient,
    session: AgentSession,
    config: RuntimeConfig | None = None,
    transcript: Transcript | None = None,
) -> Transcript:
    """Run `session` to completion (or exhaustion). Fills and returns `transcript`.

    Model errors (ModelError) propagate after being recorded as an `infra_error` event: they are
    infrastructure failures, not agent behaviour.
    """
    config = config or RuntimeConfig()
    transcript = transcript if transcript is not None else Transcript()
    tools = {t.name: t for t in session.tools}
    specs = [t.spec() for t in session.tools]
    messages = transcript.messages
    messages.append(Message.system(session.system_prompt))
    messages.append(Message.user(session.first_message()))
    metrics = transcript.metrics
    first_turn = (
        config.settings.model_copy(update={"tool_choice": "required"})
        if config.require_tool_first_turn
        else config.settings
    )

    for run_index in range(config.max_runs):
        metrics.n_runs = run_index + 1
        stopped = looped = False
        for turn in range(config.max_turns):
            metrics.n_turns += 1
            settings = first_turn if turn == 0 else config.settings
            response = await _model_turn(client, transcript, specs, settings)
            if not response.tool_calls:
                break
            stopped = await _tool_turn(tools, transcript, response.tool_calls) or stopped
            if stopped:
                transcript.event("stop", "a tool ended the run")
                break
        else:
            transcript.event("max_turns", f"run {run_index + 1} reached {config.max_turns} turns")
            if config.on_max_turns == "error":
                looped = True
                transcript.event(
                    LOOP_DETECTED,
                    f"loop detected: run {run_index + 1} reached {config.max_turns} turns "
                    "without finishing; the agent is stopped",
                )

        missing = session.missing_requirements()
        transcript.missing_requirements = missing
        if not missing:
            transcript.completed = True
            return transcript
        if looped:
            return transcript
        if run_index + 1 < config.max_runs:
            reminder = session.reminder(missing)
            transcript.event("reminder", reminder, missing=missing)
            messages.append(Message.user(reminder))
    return transcript


async def _model_turn(
    client: ModelClient, transcript: Transcript, specs: list[ToolSpec], settings: ModelSettings
) -> ModelResponse:
    """One model call, metered into the transcript; a ModelError is recorded and re-raised."""
    metrics = transcript.metrics
    t0 = time.perf_counter()
    try:
        response = await client.complete(transcript.messages, tools=specs, settings=settings)
    except ModelError as err:
        transcript.event("infra_error", f"{type(err).__name__}: {err}")
        raise
    finally:
        metrics.model_seconds += time.perf_counter() - t0
    metrics.n_model_calls += 1
    metrics.usage = metrics.usage + response.usage
    if response.retries:
        metrics.n_retries += response.retries
        transcript.event("retry", f"{response.retries} retried attempt(s)")
    transcript.messages.append(Message.assistant(response.text, response.tool_calls))
    return response


async def _tool_turn(
    tools: dict[str, Tool], transcript: Transcript, calls: Sequence[ToolCall]
) -> bool:
    """Run one turn's tool calls in parallel and record them; True when a tool stopped the run."""
    metrics = transcript.metrics
    t1 = time.perf_counter()
    results = await asyncio.gather(*(_run_tool(tools, c) for c in calls))
    metrics.tool_seconds += time.perf_counter() - t1
    stopped = False
    for call, (result, started, ended, raised) in zip(calls, results, strict=True):
        metrics.n_tool_calls += 1
        if raised is not None:
            transcript.event(TOOL_EXCEPTION, raised, tool=call.name)
        transcript.tool_calls.append(
            ToolCallRecord(
                call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                raw_arguments=call.raw_arguments if call.parse_error else None,
                result=result.content,
                is_error=result.is_error,
                started_at=_dt(started),
                ended_at=_dt(ended),
            )
        )
        transcript.messages.append(Message.tool(call, result.content, is_error=result.is_error))
        stopped = stopped or result.stop
    return stopped


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


__all__ = [
    "LOOP_DETECTED", "TOOL_EXCEPTION", "AgentSession", "RuntimeConfig", "run_agent", "utcnow",
]
