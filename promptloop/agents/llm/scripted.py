"""A scripted model: a first-class provider for tests and offline demos.

Give it a list of responses (consumed in order) or a function of the request. It records every
call it receives, and raises ScriptExhaustedError when it runs out.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from promptloop.agents.llm.errors import ScriptExhaustedError
from promptloop.agents.llm.types import (
    Message,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSpec,
    Usage,
)

_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """Shorthand for a tool call in a script."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


def reply(text: str = "", *calls: ToolCall, tokens: tuple[int, int] = (10, 5)) -> ModelResponse:
    """Shorthand for a scripted response."""
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]),
        stop_reason="tool_use" if calls else "end_turn",
        model="scripted",
    )


@dataclass(frozen=True)
class Request:
    messages: list[Message]
    tools: list[ToolSpec]
    settings: ModelSettings | None


ScriptFn = Callable[[Request], ModelResponse | Awaitable[ModelResponse]]


@dataclass
class ScriptedModel:
    """Answers from `script` (a list of responses or a function of the request)."""

    script: Sequence[ModelResponse] | ScriptFn
    model_id: str = "scripted"
    latency_s: float = 0.0
    calls: list[Request] = field(default_factory=list)
    _cursor: int = 0

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        request = Request(list(messages), list(tools), settings)
        self.calls.append(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if callable(self.script):
            result = self.script(request)
            if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
                result = await result
            assert isinstance(result, ModelResponse)
            return result
        if self._cursor >= len(self.script):
            raise ScriptExhaustedError(
                f"scripted model ran out of responses after {len(self.script)} call(s)"
            )
        response = self.script[self._cursor]
        self._cursor += 1
        return response

    async def preflight(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
