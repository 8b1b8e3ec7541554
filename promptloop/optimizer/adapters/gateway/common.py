"""What both wire protocols of the model gateway share: the translated call, the request error
that names a field, and the checks of numbers and JSON kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptloop.agents.llm.types import Message, ModelSettings, ToolSpec


class RequestError(ValueError):
    """A malformed model request: answered 400, the message names the field."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class ChatCall:
    """One model request of either protocol, translated to a ModelClient call."""

    messages: list[Message]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings
    model: str | None = None
    stream: bool = False
    include_usage: bool = False


def kind(value: Any) -> str:
    """The JSON kind of `value`, for error messages."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def objects(raw: Any, where: str, *, non_empty: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """(path, object) of each item of the JSON array `raw` found at `where` (None: none);
    a RequestError naming the path when `raw` is not an array (or is empty when `non_empty`)
    or an item is not an object."""
    if raw is None and not non_empty:
        return []
    if not isinstance(raw, list) or (non_empty and not raw):
        got = "an empty array" if raw == [] else kind(raw)
        raise RequestError(where, f"must be a {'non-empty ' if non_empty else ''}array of "
                                  f"objects, got {got}")
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise RequestError(at, f"must be an object, got {kind(item)}")
        out.append((at, item))
    return out


def number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            low <= value <= high):
        raise RequestError(key, f"must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def integer(body: Mapping[str, Any], key: str, low: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None
                                                                 and value < low):
        bound = f" of at least {low}" if low is not None else ""
        raise RequestError(key, f"must be an integer{bound}, got {value!r}")
    return value



def stream_flag(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise RequestError("stream", f"must be a boolean, got {kind(stream)}")
    return stream


__all__ = ["ChatCall", "RequestError", "integer", "kind", "number", "stream_flag"]


EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The parameters of a tool declared without any."""


def tool_spec(where: str, name: Any, description: Any, schema: Any,
              schema_key: str) -> ToolSpec:
    """One declared tool, checked the same way on every wire protocol (`where` names the
    object's path in the request: `tools[0].function` or `tools[0]`)."""
    if not isinstance(name, str) or not name:
        raise RequestError(f"{where}.name", "must be a non-empty string")
    description = description or ""
    if not isinstance(description, str):
        raise RequestError(f"{where}.description", "must be a string")
    schema = EMPTY_SCHEMA if schema is None else schema
    if not isinstance(schema, dict):
        raise RequestError(f"{where}.{schema_key}", "must be a JSON schema object")
    return ToolSpec(name=name, description=description, parameters=schema)


def unique_tools(specs: list[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools, refused when two share a name."""
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RequestError("tools", f"duplicate tool name(s): {', '.join(dupes)}")
    return tuple(specs)
