"""The transcript of one trial: messages, tool calls, events and metrics.

It is filled in place while the agent runs, so a trial that is cancelled (timeout) or hits an
infrastructure error still leaves everything recorded up to that point. An agent outside
promptloop's loop is recorded from its model calls (`ConversationRecorder`, which the model
gateway drives): the messages it sent, each reply, each tool call and the result it sent back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from promptloop.agents.llm.types import Message, ToolCall, Usage


def utcnow() -> datetime:
    return datetime.now(UTC)


class ToolCallRecord(BaseModel):
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    result: str
    is_error: bool
    started_at: datetime
    ended_at: datetime


class Event(BaseModel):
    kind: str
    """retry | exception | reminder | max_turns | stop | infra_error | ..."""
    at: datetime = Field(default_factory=utcnow)
    detail: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Metrics(BaseModel):
    n_turns: int = 0
    n_tool_calls: int = 0
    n_model_calls: int = 0
    n_retries: int = 0
    n_runs: int = 0
    usage: Usage = Usage()
    model_seconds: float = 0.0
    tool_seconds: float = 0.0

    @property
    def n_total_tokens(self) -> int:
        return self.usage.total_tokens


class Transcript(BaseModel):
    messages: list[Message] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    metrics: Metrics = Field(default_factory=Metrics)
    completed: bool = False
    missing_requirements: list[str] = Field(default_factory=list)

    def event(self, kind: str, detail: str = "", **data: Any) -> None:
        self.events.append(Event(kind=kind, detail=detail, data=data))

    def successful_calls(self, *names: str) -> list[ToolCallRecord]:
        return [
            c for c in self.tool_calls if not c.is_error and (not names or c.tool_name in names)
        ]

    def summary(self) -> str:
        m = self.metrics
        return (
            f"runs={m.n_runs} turns={m.n_turns} tool_calls={m.n_tool_calls} "
            f"(errors={sum(c.is_error for c in self.tool_calls)}) model_calls={m.n_model_calls} "
            f"retries={m.n_retries} tokens={m.usage.total_tokens} "
            f"(in={m.usage.input_tokens} out={m.usage.output_tokens}) "
            f"completed={self.completed}"
        )


# --- a conversation seen from outside the agent loop -----------------------------------------


def message_key(m: Message) -> tuple[Any, ...]:
    """What makes two records of one message the same message: an assistant message with tool
    calls is its calls (agents often resend it without its text), a tool result its call id and
    text, any other message its role and text (surrounding whitespace aside)."""
    if m.role == "assistant":
        calls = tuple((c.name, json.dumps(c.arguments, sort_keys=True, default=str))
                      for c in m.tool_calls)
        return ("assistant", "" if calls else m.content.strip(), calls)
    if m.role == "tool":
        return ("tool", m.tool_call_id or "", m.content.strip())
    return (m.role, m.content.strip())


def tool_record(call: ToolCall, result: Message | None, started: datetime,
                ended: datetime) -> ToolCallRecord:
    """A tool call and the result the agent reported for it (None: no result reported)."""
    return ToolCallRecord(
        call_id=call.id, tool_name=call.name, arguments=call.arguments,
        raw_arguments=call.raw_arguments if call.parse_error else None,
        result=result.content if result is not None else NO_RESULT,
        is_error=result.is_error if result is not None else False,
        started_at=started, ended_at=ended)


NO_RESULT = "(no result reported)"
"""The result of a tool call whose result the agent never sent back nor returned."""


class ConversationRecorder:
    """Records the model calls of one trial as the gateway sees them, into its transcript.

    Each call's messages are compared with the conversation recorded so far: what extends it
    (the new user messages, the tool results of the last reply's calls) is appended, then the
    reply. A call that does not extend it starts a new conversation (an event says so) and is
    recorded whole. A tool result the agent sends back becomes a `ToolCallRecord`, timed from
    the reply that asked for it to the call that brought it back.
    """

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self._start = len(transcript.messages)
        self._asked: dict[str, tuple[ToolCall, datetime]] = {}

    def call(self, sent: Sequence[Message], reply: Message, at: datetime | None = None) -> None:
        """One answered model call: `sent` as the agent sent it, `reply` as it got it."""
        at = at or utcnow()
        t = self.transcript
        thread = [message_key(m) for m in t.messages[self._start:]]
        keys = [message_key(m) for m in sent]
        if thread and keys[:len(thread)] != thread:
            self._start = len(t.messages)
            t.event("conversation", f"the agent started a new conversation "
                                    f"({len(sent)} message(s) sent)")
            new = list(sent)
        else:
            new = list(sent[len(thread):])
        for m in new:
            t.messages.append(m)
            asked = self._asked.pop(m.tool_call_id or "", None) if m.role == "tool" else None
            if asked is not None:
                t.tool_calls.append(tool_record(asked[0], m, asked[1], at))
                t.metrics.n_tool_calls += 1
        t.messages.append(reply)
        t.metrics.n_turns += 1
        done = utcnow()
        for c in reply.tool_calls:
            self._asked[c.id] = (c, done)
