"""The transcript of one trial: messages, tool calls, events and metrics.

It is filled in place while the agent runs, so a trial that is cancelled (timeout) or hits an
infrastructure error still leaves everything recorded up to that point.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from agents.llm.types import Message, Usage


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
