"""File names of the lifecycle's records in the state folder."""

from __future__ import annotations

import re


def safe_stem(name: str) -> str:
    """A name usable as a file name (suite, grader or branch names)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "unnamed"
