"""Reading a command's `--json` output in tests: one envelope, `{"command", "ok", "exit_code",
"result" | "error"}` (docs/json-envelope.schema.json)."""

from __future__ import annotations

import json
from typing import Any


def cli_result(stdout: str) -> Any:
    """The `result` of the envelope a command printed with --json."""
    doc = json.loads(stdout)
    assert {"command", "ok", "exit_code"} <= set(doc), doc
    return doc["result"]


def cli_envelope(stdout: str) -> dict[str, Any]:
    """The whole envelope."""
    doc: dict[str, Any] = json.loads(stdout)
    return doc
