"""Finding the system Chromium for the browser tests and the screenshot script.

Playwright drives Debian's `chromium` package through `executable_path`; it never downloads a
browser of its own. `make test` installs the package when it runs as root. PROMPTLOOP_CHROMIUM
names another binary (a path that does not exist means: no browser, skip).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> Path | None:
    """The Chromium binary (the real one, not Debian's wrapper script, when present)."""
    chosen = os.environ.get("PROMPTLOOP_CHROMIUM")
    if chosen is not None:
        return Path(chosen) if Path(chosen).is_file() else None
    for c in CANDIDATES:
        if Path(c).is_file():
            return Path(c)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None
