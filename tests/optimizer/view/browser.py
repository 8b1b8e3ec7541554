"""Finding the system Chromium for the browser tests and the screenshot script.

Playwright drives Debian's `chromium` package through `executable_path`; it never downloads a
browser of its own. `make test` installs the package when it runs as root.
"""

from __future__ import annotations

import shutil
from pathlib import Path

CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> Path | None:
    """The Chromium binary (the real one, not Debian's wrapper script, when present)."""
    for c in CANDIDATES:
        if Path(c).is_file():
            return Path(c)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None
