"""JSON Schemas of the original harness's stored shapes (docs/compat.md): the report, one trace
line and one index line. Shipped as package data; tests validate our output against them.

The schemas refer to each other by `$id` (`urn:promptloop:original:<name>`); a validator needs
them all in its registry (see `load_schemas`). Where SPEC leaves a type open (the arguments of
an assistant's function call, a tool result's timestamp) the schema accepts both readings.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

SCHEMA_NAMES = ("report", "trace_line", "index_entry")


def load_schema(name: str) -> dict[str, Any]:
    """The schema called `name` (one of SCHEMA_NAMES)."""
    if name not in SCHEMA_NAMES:
        raise ValueError(f"unknown schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    text = files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def load_schemas() -> dict[str, dict[str, Any]]:
    """Every schema by its `$id`, for a validator's reference registry."""
    schemas = [load_schema(n) for n in SCHEMA_NAMES]
    return {str(s["$id"]): s for s in schemas}
