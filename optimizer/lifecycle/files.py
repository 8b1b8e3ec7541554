"""Writing the lifecycle's files in the state folder: whole or not at all."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
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


def safe_stem(name: str) -> str:
    """A name usable as a file name (suite, grader or branch names)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "unnamed"
