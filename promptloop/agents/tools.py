"""Tool definitions: a pydantic argument model, a handler, and safe invocation.

Malformed arguments from a model (wrong types, missing fields, unparseable JSON) never crash
a run: `Tool.invoke` turns them into an error result the model can read and correct.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from promptloop.agents.llm.types import ToolCall, ToolSpec


class ToolResult(BaseModel):
    """What a tool hands back: text for the model, an error flag, and whether the run ends."""

    model_config = ConfigDict(frozen=True)

    content: str
    is_error: bool = False
    stop: bool = False


class ToolError(Exception):
    """Raised by a handler for an expected failure; its message goes to the model."""


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown keys are ignored, values are coerced leniently."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


Handler = Callable[[Any], Awaitable[ToolResult] | ToolResult]


def inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve local `$ref`s so the schema is self-contained (some servers reject `$defs`)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.split("/")[-1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(schema)
    out.pop("title", None)
    return out


@functools.cache
def _arguments_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    # Generating a JSON schema costs ~1 ms per model; every trial asks for every tool's.
    return inline_schema(args_model.model_json_schema())


def format_validation_error(tool: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(arguments)"
        parts.append(f"{loc}: {e['msg']}")
    return f"Invalid arguments for {tool}: " + "; ".join(parts)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    handler: Handler

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=copy.deepcopy(_arguments_schema(self.args_model)),
        )

    async def invoke(self, call: ToolCall) -> ToolResult:
        if call.parse_error is not None:
            return ToolResult(
                content=f"Invalid arguments for {self.name}: {call.parse_error}. "
                "Send the arguments as one JSON object.",
                is_error=True,
            )
        try:
            args = self.args_model.model_validate(call.arguments)
        except ValidationError as err:
            return ToolResult(content=format_validation_error(self.name, err), is_error=True)
        try:
            result = self.handler(args)
            if inspect.isawaitable(result):
                result = await result
        except ToolError as err:
            return ToolResult(content=f"Error: {err}", is_error=True)
        assert isinstance(result, ToolResult)
        return result


def parse_arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """Parse provider-sent tool arguments into a dict, or return a parse error message."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        return {}, f"arguments are not valid JSON ({err.msg} at position {err.pos})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None
