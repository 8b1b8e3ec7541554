"""The Anthropic Messages API wire protocol of the model gateway (pure translation).

Served: `POST /v1/messages` with model, max_tokens, system (a string or text blocks), messages
(user / assistant, content a string or blocks: text, tool_use, tool_result with is_error),
tools (custom tools with input_schema), tool_choice (auto, any, tool with a name, none),
temperature, metadata and stop_sequences (read, not applied), stream (the whole reply as one
server-sent-events body of message_start ... message_stop). The reply is a `message` object
with text and tool_use blocks, stop_reason and usage (input_tokens, output_tokens). Errors are
`{"type": "error", "error": {"type", "message"}}`. An agent using the Anthropic SDK sets
`base_url` to the gateway's URL without `/v1` and `api_key` to its token (sent as
`x-api-key`).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from promptloop.agents.llm.types import Message, ModelResponse, ModelSettings, ToolCall, ToolSpec
from promptloop.optimizer.adapters.gateway.common import (
    ChatCall,
    RequestError,
    integer,
    kind,
    number,
    objects,
    stream_flag,
    tool_spec,
    unique_tools,
)

_STOP = {"end_turn": "end_turn", "stop_sequence": "stop_sequence", "tool_use": "tool_use",
         "max_tokens": "max_tokens", "error": "end_turn", "other": "end_turn"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               404: "not_found_error", 405: "invalid_request_error",
               413: "request_too_large", 500: "api_error", 502: "api_error"}


def _blocks(raw: Any, where: str) -> list[dict[str, Any]]:
    """A content as a list of blocks: a string is one text block."""
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}]
    if not isinstance(raw, list):
        raise RequestError(where, f"must be a string or an array of content blocks, got "
                                  f"{kind(raw)}")
    for j, block in enumerate(raw):
        if not isinstance(block, dict):
            raise RequestError(f"{where}[{j}]", f"must be an object, got {kind(block)}")
    return raw


def _block_text(block: dict[str, Any], where: str) -> str:
    value = block.get("text")
    if not isinstance(value, str):
        raise RequestError(f"{where}.text", "must be a string")
    return value


def _result_text(raw: Any, where: str) -> str:
    """A tool_result's content: a string or text blocks."""
    if raw is None:
        return ""
    parts = []
    for j, block in enumerate(_blocks(raw, where)):
        if block.get("type", "text") != "text":
            raise RequestError(f"{where}[{j}].type",
                               f"only text is supported in a tool result, got "
                               f"{block.get('type')!r}")
        parts.append(_block_text(block, f"{where}[{j}]"))
    return "\n".join(parts)


def _system(raw: Any) -> list[Message]:
    if raw is None:
        return []
    texts = []
    for j, block in enumerate(_blocks(raw, "system")):
        if block.get("type", "text") != "text":
            raise RequestError(f"system[{j}].type",
                               f"must be a text block, got {block.get('type')!r}")
        texts.append(_block_text(block, f"system[{j}]"))
    return [Message.system("\n".join(texts))]


def _user(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> list[Message]:
    """A user turn: its tool results (one tool message each), then its text."""
    out: list[Message] = []
    texts = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        btype = block.get("type")
        if btype == "text":
            texts.append(_block_text(block, at))
        elif btype == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(f"{at}.tool_use_id", "must be a non-empty string")
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RequestError(f"{at}.is_error", f"must be a boolean, got {kind(is_error)}")
            out.append(Message(role="tool", content=_result_text(block.get("content"),
                                                                  f"{at}.content"),
                               tool_call_id=call_id, tool_name=names.get(call_id),
                               is_error=is_error))
        else:
            raise RequestError(f"{at}.type", "a user turn may hold text and tool_result "
                                             f"blocks, got {btype!r}")
    if texts:
        out.append(Message.user("\n".join(texts)))
    return out


def _assistant(blocks: list[dict[str, Any]], where: str, names: dict[str, str]) -> Message:
    texts = []
    calls = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        btype = block.get("type")
        if btype == "text":
            texts.append(_block_text(block, at))
        elif btype == "tool_use":
            call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(f"{at}.id", "must be a non-empty string")
            if not isinstance(name, str) or not name:
                raise RequestError(f"{at}.name", "must be a non-empty string")
            if not isinstance(args, dict):
                raise RequestError(f"{at}.input", f"must be an object, got {kind(args)}")
            names[call_id] = name
            calls.append(ToolCall(id=call_id, name=name, arguments=args))
        elif btype in ("thinking", "redacted_thinking"):
            continue  # the model's own reasoning, not part of what promptloop's clients take
        else:
            raise RequestError(f"{at}.type", "an assistant turn may hold text and tool_use "
                                             f"blocks, got {btype!r}")
    return Message.assistant("".join(texts), tuple(calls))


def _messages(raw: Any) -> list[Message]:
    names: dict[str, str] = {}
    out: list[Message] = []
    for where, item in objects(raw, "messages", non_empty=True):
        role = item.get("role")
        blocks = _blocks(item.get("content"), f"{where}.content")
        if role == "user":
            out += _user(blocks, f"{where}.content", names)
        elif role == "assistant":
            out.append(_assistant(blocks, f"{where}.content", names))
        else:
            raise RequestError(f"{where}.role", f"must be 'user' or 'assistant', got {role!r}")
    return out


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    specs = []
    for where, item in objects(raw, "tools"):
        if item.get("type", "custom") != "custom":
            raise RequestError(f"{where}.type", "only custom tools (name, description, "
                                                f"input_schema) are supported, got "
                                                f"{item.get('type')!r}")
        specs.append(tool_spec(where, item.get("name"), item.get("description"),
                               item.get("input_schema"), "input_schema"))
    return unique_tools(specs)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, tuple[ToolSpec, ...]]:
    if raw is None:
        return "auto", tools
    if not isinstance(raw, dict):
        raise RequestError("tool_choice", f"must be an object, got {kind(raw)}")
    choice = raw.get("type")
    if choice == "auto":
        return "auto", tools
    if choice == "any":
        return "required", tools
    if choice == "none":
        return "auto", ()
    if choice == "tool":
        chosen = tuple(t for t in tools if t.name == raw.get("name"))
        if not chosen:
            raise RequestError("tool_choice.name",
                               f"names no tool of the request: {raw.get('name')!r}")
        return "required", chosen
    raise RequestError("tool_choice.type",
                       f"must be 'auto', 'any', 'tool' or 'none', got {choice!r}")


def parse_messages_request(body: Any) -> ChatCall:
    """Translate an Anthropic Messages body; a RequestError names the bad field."""
    if not isinstance(body, dict):
        raise RequestError("body", f"must be a JSON object, got {kind(body)}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("model", f"must be a string, got {kind(model)}")
    max_tokens = integer(body, "max_tokens", 1)
    if max_tokens is None:
        raise RequestError("max_tokens", "is required (an integer of at least 1)")
    messages = _system(body.get("system")) + _messages(body.get("messages"))
    choice, tools = _tool_choice(body.get("tool_choice"), _tools(body.get("tools")))
    settings = ModelSettings(
        temperature=number(body, "temperature", 0.0, 1.0),
        max_tokens=max_tokens,
        tool_choice="required" if choice == "required" and tools else "auto",
    )
    return ChatCall(messages=messages, tools=tools, settings=settings, model=model,
                    stream=stream_flag(body), include_usage=True)


# --- response translation (pure) -----------------------------------------------------------


def _content(response: ModelResponse) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if response.text or not response.tool_calls:
        blocks.append({"type": "text", "text": response.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
               for c in response.tool_calls]
    return blocks


def _stop(response: ModelResponse) -> str:
    return "tool_use" if response.tool_calls else _STOP.get(response.stop_reason, "end_turn")


def message_response(response: ModelResponse, model: str) -> dict[str, Any]:
    """The Anthropic `message` object of one ModelResponse."""
    return {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(response),
        "stop_reason": _stop(response),
        "stop_sequence": None,
        "usage": {"input_tokens": response.usage.input_tokens,
                  "output_tokens": response.usage.output_tokens},
    }


def message_stream(response: ModelResponse, model: str) -> bytes:
    """The same reply as a complete server-sent-events body (message_start, one start /
    delta / stop per content block, message_delta, message_stop)."""
    whole = message_response(response, model)
    start = {**whole, "content": [], "stop_reason": None,
             "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": 0}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start",
                                                 {"type": "message_start", "message": start})]
    for index, block in enumerate(whole["content"]):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta",
                     "partial_json": json.dumps(block["input"], ensure_ascii=False)}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": opened}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": response.usage.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
                   for name, data in events).encode("utf-8")


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"),
                                       "message": message}}


__all__ = ["error_body", "message_response", "message_stream", "parse_messages_request"]
