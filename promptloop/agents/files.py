"""Writing a file whole or not at all: the one atomic write (a temporary file beside the
target, renamed over it; a kill never leaves half a file). Agents, the batch state and the
optimizer's state files (`promptloop.optimizer.core.files`, which redacts first) all use it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, *, durable: bool = False) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it over `path`.
    `durable` also fsyncs before the rename (crash durability, not only atomicity)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
