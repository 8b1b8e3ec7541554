"""The OpenAI chat-completions wire protocol of the model gateway (pure translation).

Served: model, messages (system / developer / user / assistant with tool_calls / tool), tools
(function tools), tool_choice ("auto", "required", "none" or one named function),
response_format (`json_schema` passed through, `json_object` as a schema of any object),
temperature, max_tokens (or max_completion_tokens), seed, n = 1, stream (the whole reply as one
server-sent-events body). Errors are `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from promptloop.agents.llm.types import (
    Message,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSpec,
    Usage,
)
from promptloop.optimizer.adapters.gateway.common import (
    ChatCall,
    RequestError,
    integer,
    kind,
    number,
    objects,
    tool_spec,
    unique_tools,
)

JSON_OBJECT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "json_object", "schema": {"type": "object"}, "strict": False},
}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "error": "stop",
    "other": "stop",
}


# --- request translation (pure) ------------------------------------------------------------


def _text(raw: Any, where: str) -> str:
    """A message's content as text: a string, null, or a list of text parts."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise RequestError(where, f"must be a string or an array of text parts, got "
                                  f"{kind(raw)}")
    parts = []
    for j, part in enumerate(raw):
        if isinstance(part, str):
            parts.append(part)
            continue
        if not isinstance(part, dict):
            raise RequestError(f"{where}[{j}]", f"must be an object, got {kind(part)}")
        ptype = part.get("type", "text")
        if ptype not in ("text", "refusal"):
            raise RequestError(f"{where}[{j}].type",
                               f"only text parts are supported, got {ptype!r}")
        value = part.get(ptype)
        if not isinstance(value, str):
            raise RequestError(f"{where}[{j}].{ptype}", "must be a string")
        parts.append(value)
    return "\n".join(parts)




def _tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    calls = []
    for at, item in objects(raw, where):
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise RequestError(f"{at}.id", "must be a non-empty string")
        if item.get("type", "function") != "function":
            raise RequestError(f"{at}.type", f"only 'function' is supported, got "
                                             f"{item.get('type')!r}")
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise RequestError(f"{at}.function", "must be an object with name and arguments")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{at}.function.name", "must be a non-empty string")
        calls.append(_call(call_id, name, fn.get("arguments"), f"{at}.function.arguments"))
    return tuple(calls)


def _call(call_id: str, name: str, raw: Any, where: str) -> ToolCall:
    """A tool call of the history; arguments that are not a JSON object are kept raw with
    their parse error, as providers record them."""
    if raw is None or raw == "":
        return ToolCall(id=call_id, name=name, raw_arguments=raw)
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, arguments=raw)
    if not isinstance(raw, str):
        raise RequestError(where, f"must be a JSON string, got {kind(raw)}")
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        parse_error=f"arguments are not JSON: {err}")
    if not isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        parse_error=f"arguments are a JSON {kind(parsed)}, not an object")
    return ToolCall(id=call_id, name=name, arguments=parsed, raw_arguments=raw)


def _messages(raw: Any) -> list[Message]:
    names: dict[str, str] = {}
    out = []
    for where, item in objects(raw, "messages", non_empty=True):
        role = item.get("role")
        content = _text(item.get("content"), f"{where}.content")
        if role in ("system", "developer"):
            out.append(Message.system(content))
        elif role == "user":
            out.append(Message.user(content))
        elif role == "assistant":
            calls = _tool_calls(item.get("tool_calls"), f"{where}.tool_calls")
            names.update((c.id, c.name) for c in calls)
            out.append(Message.assistant(content, calls))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(f"{where}.tool_call_id", "must be a non-empty string")
            name = names.get(call_id) or item.get("name")
            out.append(Message(role="tool", content=content, tool_call_id=call_id,
                               tool_name=name if isinstance(name, str) else None))
        else:
            raise RequestError(f"{where}.role", "must be one of system, developer, user, "
                                                f"assistant, tool; got {role!r}")
    return out


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    specs = []
    for where, item in objects(raw, "tools"):
        if item.get("type", "function") != "function":
            raise RequestError(f"{where}.type",
                               f"only 'function' tools are supported, got {item.get('type')!r}")
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise RequestError(f"{where}.function", "must be an object")
        specs.append(tool_spec(f"{where}.function", fn.get("name"), fn.get("description"),
                               fn.get("parameters"), "parameters"))
    return unique_tools(specs)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, tuple[ToolSpec, ...]]:
    """(ModelSettings.tool_choice, the tools to offer)."""
    if raw is None or raw == "auto":
        return "auto", tools
    if raw == "required":
        return "required", tools
    if raw == "none":
        return "auto", ()
    if isinstance(raw, dict) and raw.get("type") == "function":
        fn = raw.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        chosen = tuple(t for t in tools if t.name == name)
        if not chosen:
            raise RequestError("tool_choice.function.name",
                               f"names no tool of the request: {name!r}")
        return "required", chosen
    raise RequestError("tool_choice", "must be 'auto', 'required', 'none' or "
                                      f'{{"type": "function", ...}}, got {raw!r}')


def _response_format(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RequestError("response_format", f"must be an object, got {kind(raw)}")
    fmt = raw.get("type")
    if fmt == "text":
        return None
    if fmt == "json_object":
        return JSON_OBJECT_FORMAT
    if fmt == "json_schema":
        inner = raw.get("json_schema")
        if not isinstance(inner, dict):
            raise RequestError("response_format.json_schema", "must be an object")
        if not isinstance(inner.get("schema"), dict):
            raise RequestError("response_format.json_schema.schema",
                               "must be a JSON schema object")
        return {"type": "json_schema", "json_schema": inner}
    raise RequestError("response_format.type",
                       f"must be 'text', 'json_object' or 'json_schema', got {fmt!r}")



def parse_chat_request(body: Any) -> ChatCall:
    """Translate an OpenAI chat-completions body; a RequestError names the bad field."""
    if not isinstance(body, dict):
        raise RequestError("body", f"must be a JSON object, got {kind(body)}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("model", f"must be a string, got {kind(model)}")
    messages = _messages(body.get("messages"))
    choice, tools = _tool_choice(body.get("tool_choice"), _tools(body.get("tools")))
    temperature = number(body, "temperature", 0.0, 2.0)
    max_tokens = integer(body, "max_completion_tokens", 1) or integer(body, "max_tokens", 1)
    seed = integer(body, "seed")
    n = integer(body, "n", 1)
    if n not in (None, 1):
        raise RequestError("n", f"only 1 choice is supported, got {n}")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise RequestError("stream", f"must be a boolean, got {kind(stream)}")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestError("stream_options", f"must be an object, got {kind(options)}")
    settings = ModelSettings(
        temperature=temperature,
        max_tokens=max_tokens or ModelSettings().max_tokens,
        seed=seed,
        response_format=_response_format(body.get("response_format")),
        tool_choice="required" if choice == "required" else "auto",
    )
    return ChatCall(messages=messages, tools=tools, settings=settings, model=model,
                    stream=stream, include_usage=bool(options.get("include_usage")))


# --- response translation (pure) -----------------------------------------------------------


def _openai_tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = (call.raw_arguments if call.raw_arguments is not None
                 else json.dumps(call.arguments, ensure_ascii=False))
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}


def _finish(response: ModelResponse) -> str:
    return "tool_calls" if response.tool_calls else _FINISH.get(response.stop_reason, "stop")


def chat_response(response: ModelResponse, model: str) -> dict[str, Any]:
    """The OpenAI `chat.completion` object of one ModelResponse."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.text if response.text or not response.tool_calls else None,
        "refusal": None,
    }
    if response.tool_calls:
        message["tool_calls"] = [_openai_tool_call(c) for c in response.tool_calls]
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(response),
                     "logprobs": None}],
        "usage": _usage(response.usage),
    }


def chat_stream(response: ModelResponse, model: str, include_usage: bool) -> bytes:
    """The same reply as a complete server-sent-events body of `chat.completion.chunk`s."""
    base = {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    delta: dict[str, Any] = {"role": "assistant", "content": response.text or ""}
    if response.tool_calls:
        delta["tool_calls"] = [{"index": i, **_openai_tool_call(c)}
                               for i, c in enumerate(response.tool_calls)]
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": _finish(response)}]},
    ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(response.usage)})
    lines = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    return ("".join(lines) + "data: [DONE]\n\n").encode("utf-8")




def error_body(message: str, kind: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


__all__ = [
    "JSON_OBJECT_FORMAT",
    "chat_response",
    "chat_stream",
    "error_body",
    "parse_chat_request",
]
