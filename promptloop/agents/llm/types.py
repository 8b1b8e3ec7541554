"""Provider-neutral message, tool and response types shared by every model client.

These are pydantic models (frozen) so transcripts, record/replay caches and reports can
serialise them without custom code.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "error", "other"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """One tool invocation requested by the model.

    `arguments` is the parsed JSON object. When the provider sent something that is not a
    JSON object, `arguments` is empty and `parse_error` explains why; the runtime then
    returns an error result to the model instead of running the tool.
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    parse_error: str | None = None


class Message(_Frozen):
    """One chat message. `tool` messages carry the result of exactly one tool call."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        return cls(
            role="tool",
            content=content,
            tool_call_id=call.id,
            tool_name=call.name,
            is_error=is_error,
        )


class ToolSpec(_Frozen):
    """What the model sees of a tool: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class Usage(_Frozen):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class ModelResponse(_Frozen):
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: StopReason = "end_turn"
    model: str = ""
    retries: int = 0
    """How many failed attempts preceded this response (429/5xx/timeouts)."""


class ModelSettings(_Frozen):
    """Per-call generation settings. `None` means the provider default."""

    temperature: float | None = None
    max_tokens: int = 2048
    timeout_s: float = 120.0
    max_retries: int = 4
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    """A JSON schema the reply text must follow (OpenAI-style `json_schema` format)."""
    tool_choice: Literal["auto", "required"] = "auto"
    """`required`: the model must call a tool this turn (ignored when no tools are given)."""


@runtime_checkable
class ModelClient(Protocol):
    """The single call every provider implements."""

    model_id: str

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse: ...

    async def preflight(self) -> None:
        """Check credentials/reachability with one cheap call; raise a ModelError if not."""
        ...

    async def aclose(self) -> None: ...
