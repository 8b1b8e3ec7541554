"""Writing state files whole or not at all (a kill never leaves half a file behind)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from promptloop.agents.files import write_atomic
from promptloop.optimizer.core.redact import redact


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text`, redacted of every known secret (core/redact.py), to a temporary file
    beside `path`, then rename it over `path`."""
    return write_atomic(path, redact(text))


def owned_dir(prefix: str, where: str | Path | None = None) -> Path:
    """A fresh private folder (mode 0700) named after this process (`<prefix><pid>-...`), so
    a sweep can tell a dead process's leftovers (`run.workspaces.stale_folders`)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))


__all__ = ["atomic_write_text", "owned_dir"]
