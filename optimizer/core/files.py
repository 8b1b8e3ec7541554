"""Writing state files whole or not at all (a kill never leaves half a file behind)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from optimizer.core.redact import redact


def atomic_write_text(path: Path, text: str) -> Path:
    """Write `text`, redacted of every known secret (core/redact.py), to a temporary file
    beside `path`, then rename it over `path`."""
    text = redact(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


__all__ = ["atomic_write_text"]
