"""Small helpers shared by the CLI and engine error messages."""

from __future__ import annotations

import difflib


def did_you_mean(value: str, options: list[str]) -> str:
    hint = difflib.get_close_matches(value, options, n=1)
    return f" Did you mean '{hint[0]}'?" if hint else ""
