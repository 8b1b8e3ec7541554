"""OpenAI Chat Completions provider (`openai:<model>`), also for any compatible server.

The base URL comes from `ModelOptions.base_url` or OPENAI_BASE_URL, so vLLM, Ollama,
llama.cpp and LM Studio work. Local servers need no key: when the base URL is on this machine
(localhost / loopback) and OPENAI_API_KEY is unset, a placeholder key is sent instead.
Tool-call arguments that are not a JSON object never raise; they become `ToolCall.parse_error`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from promptloop.agents.llm.errors import CredentialsError, ModelConfigError, ProviderError
from promptloop.agents.llm.options import ModelOptions
from promptloop.agents.llm.providers.common import (
    SDKProvider,
    env_value,
    is_local_url,
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
    from openai import AsyncOpenAI

KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
LOCAL_PLACEHOLDER_KEY = "local-server-needs-no-key"
"""Sent to local OpenAI-compatible servers when no key is set (they ignore it)."""
_LABEL = "OpenAI-compatible API"

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def to_openai(messages: list[Message]) -> list[dict[str, Any]]:
    """Convert our messages to Chat Completions messages (arguments as JSON strings)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role in ("system", "user"):
            out.append({"role": message.role, "content": message.content})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments_text(c)},
                    }
                    for c in message.tool_calls
                ]
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        else:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id or "",
                    "content": message.content,
                }
            )
    return out


def _arguments_text(call: ToolCall) -> str:
    """What the model sent: its raw text when it did not parse, else the JSON object."""
    if call.parse_error is not None and call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def tools_to_openai(tools: list[ToolSpec] | tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def from_openai(completion: Any, *, retries: int, fallback_model: str) -> ModelResponse:
    """Map an SDK `ChatCompletion` to our ModelResponse.

    `Usage.input_tokens` excludes cached prompt tokens (reported as `cache_read_tokens`), the
    same split Anthropic reports, so cost estimates treat both providers alike.
    """
    if not completion.choices:
        raise ProviderError(f"{_LABEL} returned no choices", retries=retries)
    choice = completion.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for item in message.tool_calls or ():
        function = getattr(item, "function", None)
        if function is None:  # a non-function ("custom") tool call: we define none
            continue
        raw = function.arguments
        arguments, error = parse_arguments(raw)
        calls.append(
            ToolCall(
                id=item.id or f"call_{len(calls)}",
                name=function.name,
                arguments=arguments,
                raw_arguments=raw if error else None,
                parse_error=error,
            )
        )
    usage = completion.usage
    cached = 0
    prompt = completion_tokens = 0
    if usage is not None:
        prompt = usage.prompt_tokens or 0
        completion_tokens = usage.completion_tokens or 0
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details else 0
    stop = _STOP_REASONS.get(choice.finish_reason or "", "other")
    if calls and stop == "end_turn":
        stop = "tool_use"  # some local servers say "stop" after a tool call
    return ModelResponse(
        text=message.content or "",
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=max(prompt - cached, 0),
            output_tokens=completion_tokens,
            cache_read_tokens=cached,
        ),
        stop_reason=stop,
        model=completion.model or fallback_model,
        retries=retries,
    )


class OpenAIProvider(SDKProvider["AsyncOpenAI"]):
    """ModelClient over Chat Completions. Tests (and the local provider) inject `client`."""

    PROVIDER = "openai"
    KEY_VAR = KEY_VAR
    BASE_URL_VAR = BASE_URL_VAR
    LABEL = _LABEL

    def _sdk(self) -> AsyncOpenAI:
        if self._client is None:
            base_url = self._base_url()
            key = env_value(KEY_VAR)
            if key is None:
                if not is_local_url(base_url):
                    where = f" for {base_url}" if base_url else ""
                    raise CredentialsError(KEY_VAR, f"no OpenAI API key is set{where}",
                                           missing=True)
                key = LOCAL_PLACEHOLDER_KEY
            try:
                from openai import AsyncOpenAI
            except ImportError as err:  # pragma: no cover - a declared dependency
                raise ModelConfigError("the 'openai' package is not installed") from err
            self._client = AsyncOpenAI(
                api_key=key,
                base_url=base_url,
                max_retries=self._options.max_retries,
                timeout=self._options.timeout_s,
            )
        return self._client

    def _official(self) -> bool:
        return self._base_url() is None or "api.openai.com" in (self._base_url() or "")

    def request_params(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | tuple[ToolSpec, ...] = (),
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The Chat Completions body of one call (also one line of a batch input file)."""
        chosen = settings or ModelSettings()
        # OpenAI's newer models only take max_completion_tokens; every compatible server
        # understands the older max_tokens.
        limit_key = "max_completion_tokens" if self._official() else "max_tokens"
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai(messages),
            limit_key: chosen.max_tokens,
        }
        if tools:
            kwargs["tools"] = tools_to_openai(tools)
            if settings is not None and settings.tool_choice == "required":
                kwargs["tool_choice"] = "required"
        if chosen.temperature is not None:
            kwargs["temperature"] = chosen.temperature
        if chosen.seed is not None:
            kwargs["seed"] = chosen.seed
        if chosen.response_format:
            name, schema, strict = json_schema_format(chosen.response_format)
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": strict},
            }
        return kwargs

    def _create(self, sdk: AsyncOpenAI) -> Callable[..., Awaitable[Any]]:
        return sdk.chat.completions.with_raw_response.create

    def _api_error(self) -> type[Exception]:
        import openai

        return openai.APIError

    def _response(self, raw: Any, retries: int) -> ModelResponse:
        return from_openai(raw, retries=retries, fallback_model=self.model)

    def _ping(self) -> dict[str, Any]:
        limit_key = "max_completion_tokens" if self._official() else "max_tokens"
        return {"model": self.model, "messages": [{"role": "user", "content": "ping"}],
                limit_key: 1}

    def _unknown_model(self) -> str:
        return (f"{_LABEL} at {self._base_url() or 'api.openai.com'} does not know the "
                f"model '{self.model}'")


def create(model: str, options: ModelOptions) -> OpenAIProvider:
    """Registry factory for `openai:<model>`."""
    return OpenAIProvider(model, options=options)
