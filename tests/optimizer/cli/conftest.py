"""Every CLI invocation in these tests is scanned: no Python class name (`ValueError`,
`CancelledError`, `ReplayMissError`, `timedOut`...) and no instruction written for the proposer
model ("answer with ...", "combine them into one edit") may reach a user."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception|Interrupt)\b|\btimedOut\b"
                        r"|\bTraceback \(most recent call last\)")
"""A Python class name as a user would see it; plain words ("error", "Error:") pass."""

PROPOSER_DIRECTED = (
    "answer with", "answer again", "combine them into one edit", "copy context",
    "copying context lines", "copy one existing line", "copy a non-blank line",
    "merge overlapping hunks", "add more context lines", "choose a line that occurs",
    "prefix every unchanged", "send a unified diff", "fix it and answer",
)
"""Phrases of the retry messages the proposer model gets (propose/patch.py, apply.py,
edits.py, proposer.py): never shown to a user."""


def leaks(text: str) -> list[str]:
    """What in `text` a user must not see: class names and proposer-directed phrases."""
    found = [m.group(0) for m in CLASS_NAME.finditer(text)]
    low = text.lower()
    return found + [p for p in PROPOSER_DIRECTED if p in low]


@pytest.fixture(autouse=True)
def _scan_cli_output(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fails the test when any CliRunner invocation printed a class name or a message meant
    for the proposer (stdout and stderr)."""
    seen: list[str] = []
    invoke = CliRunner.invoke

    def scanned(self: CliRunner, *args: Any, **kwargs: Any) -> Any:
        result = invoke(self, *args, **kwargs)
        text = result.stdout + _stderr(result)
        for leak in leaks(text):
            seen.append(f"{leak!r} in the output of {args[1:2]}")
        return result

    monkeypatch.setattr(CliRunner, "invoke", scanned)
    yield seen
    if seen:
        pytest.fail("shown to a user:\n" + "\n".join(dict.fromkeys(seen)), pytrace=False)


def _stderr(result: Any) -> str:
    try:
        return str(result.stderr)
    except ValueError:  # stderr mixed into stdout
        return ""
