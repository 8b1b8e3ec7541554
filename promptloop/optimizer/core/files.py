"""Writing state files whole or not at all (a kill never leaves half a file behind)."""

from __future__ import annotations

from pathlib import Path

from promptloop.agents.files import write_atomic
from promptloop.optimizer.core.redact import redact


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text`, redacted of every known secret (core/redact.py), to a temporary file
    beside `path`, then rename it over `path`."""
    return write_atomic(path, redact(text))


__all__ = ["atomic_write_text"]
