"""Anthropic Messages API provider (`anthropic:<model>`).

The system prompt is sent as one text block marked `cache_control: ephemeral`, so the
tools + system prefix is cached across the many calls of an eval run. Tool results of one
turn travel together in a single user message of `tool_result` blocks.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from promptloop.agents.llm.errors import CredentialsError, ModelConfigError
from promptloop.agents.llm.options import ModelOptions
from promptloop.agents.llm.providers.common import (
    SDKProvider,
    env_value,
    json_schema_format,
)
from promptloop.agents.llm.types import (
    Message,
    ModelResponse,
    ModelSettings,
    StopReason,
    ToolCall,
    ToolSpec,
    Usage,
)
from promptloop.agents.tools import parse_arguments

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"
_LABEL = "Anthropic API"
_EMPTY = "(empty)"  # the API rejects empty text blocks

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
}


def to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Split off the system text and convert the rest to Messages API turns.

    Consecutive messages that land on the same role (tool results followed by a user
    reminder, say) are merged, since the API expects alternating turns.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
        elif message.role == "user":
            add("user", [{"type": "text", "text": message.content or _EMPTY}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in message.tool_calls
            )
            add("assistant", blocks or [{"type": "text", "text": _EMPTY}])
        else:
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id or "",
                        "content": message.content or _EMPTY,
                        "is_error": message.is_error,
                    }
                ],
            )
    return "\n\n".join(system), turns


def tools_to_anthropic(tools: list[ToolSpec] | tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def from_anthropic(message: Any, *, retries: int, fallback_model: str) -> ModelResponse:
    """Map an SDK `Message` to our ModelResponse."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            raw = block.input if isinstance(block.input, dict | str) else json.dumps(block.input)
            arguments, error = parse_arguments(raw)
            calls.append(
                ToolCall(
                    id=block.id,
                    name=block.name,
                    arguments=arguments,
                    raw_arguments=raw if error and isinstance(raw, str) else None,
                    parse_error=error,
                )
            )
    usage = message.usage
    return ModelResponse(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        ),
        stop_reason=_STOP_REASONS.get(message.stop_reason or "", "other"),
        model=getattr(message, "model", None) or fallback_model,
        retries=retries,
    )


class AnthropicProvider(SDKProvider["AsyncAnthropic"]):
    """ModelClient over the Anthropic Messages API.

    The key comes from ANTHROPIC_API_KEY only, and the SDK client is built on first use, so a
    missing key fails in `preflight()`/`complete()` before any request. Tests inject `client`.
    `settings.temperature` is not sent: this SDK's Messages API has no temperature parameter.
    `settings.seed` is not sent either: the Messages API has no seed parameter, so trials paired
    by task and trial index are paired unseeded here (`registry.accepts_seed` says so).
    """

    PROVIDER = "anthropic"
    KEY_VAR = KEY_VAR
    BASE_URL_VAR = BASE_URL_VAR
    LABEL = _LABEL

    def _sdk(self) -> AsyncAnthropic:
        if self._client is None:
            key = env_value(KEY_VAR)
            if key is None:
                raise CredentialsError(KEY_VAR, "no Anthropic API key is set", missing=True)
            try:
                from anthropic import AsyncAnthropic
            except ImportError as err:  # pragma: no cover - a declared dependency
                raise ModelConfigError("the 'anthropic' package is not installed") from err
            self._client = AsyncAnthropic(
                api_key=key,
                base_url=self._base_url(),
                max_retries=self._options.max_retries,
                timeout=self._options.timeout_s,
            )
        return self._client

    def request_params(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The Messages API parameters of one call (also one request of a message batch)."""
        system, turns = to_anthropic(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": (settings or ModelSettings()).max_tokens,
            "messages": turns,
        }
        if system:
            kwargs["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        if tools:
            kwargs["tools"] = tools_to_anthropic(tools)
            if settings is not None and settings.tool_choice == "required":
                kwargs["tool_choice"] = {"type": "any"}
        if settings is not None and settings.response_format:
            _, schema, _ = json_schema_format(settings.response_format)
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return kwargs

    def _create(self, sdk: AsyncAnthropic) -> Callable[..., Awaitable[Any]]:
        return sdk.messages.with_raw_response.create

    def _api_error(self) -> type[Exception]:
        import anthropic

        return anthropic.APIError

    def _response(self, raw: Any, retries: int) -> ModelResponse:
        return from_anthropic(raw, retries=retries, fallback_model=self.model)

    def _ping(self) -> dict[str, Any]:
        return {"model": self.model, "max_tokens": 1,
                "messages": [{"role": "user", "content": "ping"}]}


def create(model: str, options: ModelOptions) -> AnthropicProvider:
    """Registry factory for `anthropic:<model>`."""
    return AnthropicProvider(model, options=options)
