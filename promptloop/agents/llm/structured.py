"""Structured tool mode: tool calling for models whose chat template has no tool support.

Instead of native tools the model gets a short instruction in the system message and a
JSON-schema response format with one branch per tool plus a `final_answer` branch; a
grammar-constrained server (llama.cpp) then always emits a well-formed step. Prior tool calls
and results are replayed as plain text, and the reply is parsed back into a ToolCall.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from promptloop.agents.llm.errors import ModelConfigError
from promptloop.agents.llm.types import (
    Message,
    ModelClient,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSpec,
)
from promptloop.agents.llm.wrapper import WrappedClient
from promptloop.agents.tools import inline_schema, parse_arguments

FINAL_ANSWER = "final_answer"
_DROP_KEYS = frozenset(
    {
        "title",
        "default",
        "examples",
        "description",
        "$schema",
        "$id",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_NAMED_CHILDREN = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_CHILD = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
)
_SCHEMA_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_TOOL_NAME = re.compile(r'"(?:tool|name)"\s*:\s*"([^"\\]+)"')
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_DESCRIPTION_CHARS = 160
MAX_STRING_CHARS = 300
"""Longest string argument a structured step may hold (keeps steps inside the token cap)."""


def simplify_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop annotation keywords (title, default, ...) that grammar converters do not need.

    Property names are kept even when they collide with a keyword (a tool argument called
    `title` stays), because only schema positions are cleaned.
    """

    def walk(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP_KEYS:
                continue
            if key in _NAMED_CHILDREN and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key in _SCHEMA_CHILD and isinstance(value, dict):
                out[key] = walk(value)
            elif key in _SCHEMA_LIST and isinstance(value, list):
                out[key] = [walk(v) for v in value]
            else:
                out[key] = value
        if out.get("type") == "string" and "maxLength" not in out and "enum" not in out:
            # small models ramble inside strings until max_tokens cuts the JSON: bound them
            out["maxLength"] = MAX_STRING_CHARS
        return out

    result = walk(inline_schema(schema))
    assert isinstance(result, dict)
    return result


def step_schema(tools: Sequence[ToolSpec], *, allow_final: bool = True) -> dict[str, Any]:
    """The JSON schema of one step: `{"tool": <name>, "arguments": {...}}` or a final answer
    (left out when a tool call is required this turn)."""
    branches: list[dict[str, Any]] = []
    for tool in tools:
        arguments = simplify_schema(tool.parameters)
        arguments.setdefault("type", "object")
        if "properties" in arguments:
            arguments.setdefault("additionalProperties", False)
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    if allow_final:
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": FINAL_ANSWER}, "answer": {"type": "string"}},
                "required": ["tool", "answer"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": branches}


def instruction(tools: Sequence[ToolSpec]) -> str:
    """The system-message addendum that explains the step format (stable per tool set)."""
    lines = [
        "## How to act",
        "Answer every turn with exactly one JSON object and nothing else.",
        'To use a tool: {"tool": "<tool name>", "arguments": {<its arguments>}}',
        f'When you are finished: {{"tool": "{FINAL_ANSWER}", "answer": "<one short sentence>"}}',
        "The result of a tool arrives in the next user message.",
        "Tools:",
    ]
    for tool in tools:
        props = tool.parameters.get("properties", {}) or {}
        required = set(tool.parameters.get("required", []) or [])
        params = ", ".join(p if p in required else f"{p}?" for p in props)
        summary = " ".join(tool.description.split())
        if len(summary) > _DESCRIPTION_CHARS:
            summary = summary[: _DESCRIPTION_CHARS - 3].rstrip() + "..."
        lines.append(f"- {tool.name}({params}): {summary}")
    return "\n".join(lines)


def _step_text(call: ToolCall) -> str:
    if call.parse_error is not None and call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps({"tool": call.name, "arguments": call.arguments}, ensure_ascii=False)


def render_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Message]:
    """Replay a native-tool conversation as plain system/user/assistant text messages."""
    extra = instruction(tools) if tools else ""
    out: list[Message] = []
    placed = not extra
    for message in messages:
        if message.role == "system":
            content = message.content
            if not placed:
                content = f"{content}\n\n{extra}" if content else extra
                placed = True
            out.append(Message.system(content))
            continue
        if message.role == "assistant":
            parts: list[str] = []
            if message.content and (message.tool_calls or not tools):
                parts.append(message.content)
            parts.extend(_step_text(c) for c in message.tool_calls)
            if tools and not message.tool_calls:
                parts.append(json.dumps({"tool": FINAL_ANSWER, "answer": message.content}))
            out.append(Message.assistant("\n".join(parts)))
            continue
        if message.role == "tool":
            flag = " [error]" if message.is_error else ""
            text = (
                f"Result of {message.tool_name} ({message.tool_call_id}){flag}: {message.content}"
            )
        else:
            text = message.content
        if out and out[-1].role == "user":
            out[-1] = Message.user(f"{out[-1].content}\n\n{text}")
        else:
            out.append(Message.user(text))
    if not placed:
        out.insert(0, Message.system(extra))
    return out


def parse_step(text: str, tool_names: Sequence[str]) -> tuple[str, tuple[ToolCall, ...]]:
    """Parse a reply into (final text, tool calls). Never raises."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body)
    except json.JSONDecodeError as err:
        match = _TOOL_NAME.search(body)
        if match and match.group(1) in tool_names:
            call = ToolCall(
                id=_new_id(),
                name=match.group(1),
                raw_arguments=text,
                parse_error=f"the step was not valid JSON ({err.msg} at position {err.pos})",
            )
            return "", (call,)
        return text, ()
    if not isinstance(value, dict):
        return text, ()
    name = value.get("tool", value.get("name"))
    if name == FINAL_ANSWER:
        answer = value.get("answer", "")
        return (answer if isinstance(answer, str) else json.dumps(answer)), ()
    if not isinstance(name, str) or name not in tool_names:
        return text, ()
    raw = value.get("arguments", {})
    arguments, error = parse_arguments(raw if isinstance(raw, dict | str) else json.dumps(raw))
    call = ToolCall(
        id=_new_id(),
        name=name,
        arguments=arguments,
        raw_arguments=text if error else None,
        parse_error=error,
    )
    return "", (call,)


def _new_id() -> str:
    return f"step_{uuid.uuid4().hex[:10]}"


class StructuredToolClient(WrappedClient):
    """Wraps a client that cannot emit native tool calls; speaks JSON steps to it instead."""

    inner: ModelClient

    def __init__(self, inner: ModelClient, *, model_id: str | None = None) -> None:
        super().__init__(inner, model_id=model_id or inner.model_id)

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        specs = list(tools)
        names = [t.name for t in specs]
        if FINAL_ANSWER in names:
            raise ModelConfigError(f"structured tool mode reserves the tool name '{FINAL_ANSWER}'")
        rendered = render_messages(messages, specs)
        if not specs:
            return await self.inner.complete(rendered, settings=settings)
        base = settings or ModelSettings()
        schema = step_schema(specs, allow_final=base.tool_choice != "required")
        fmt = {"type": "json_schema", "json_schema": {"name": "step", "schema": schema,
                                                       "strict": True}}
        chosen = base.model_copy(update={"response_format": fmt, "tool_choice": "auto"})
        response = await self.inner.complete(rendered, settings=chosen)
        text, calls = parse_step(response.text, names)
        stop = response.stop_reason
        if calls and stop in ("end_turn", "stop_sequence"):
            stop = "tool_use"
        return response.model_copy(update={"text": text, "tool_calls": calls, "stop_reason": stop})


__all__ = [
    "FINAL_ANSWER",
    "StructuredToolClient",
    "instruction",
    "parse_step",
    "render_messages",
    "simplify_schema",
    "step_schema",
]
