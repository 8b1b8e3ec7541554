"""Screenshots of every page of `promptloop view` for docs/ (rerun after changing a page).

    .venv/bin/python scripts/view_screenshots.py [--out docs] [--chromium PATH]

Builds a state folder from scripted runs (the same one the viewer's tests use: a scripted
night plus hand-made runs; no network, no real model) in a temporary folder, serves it on a
free loopback port and saves one full-page PNG per page as docs/view-<page>.png, driving the
system Chromium through Playwright (no browser download).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tests.conftest  # noqa: E402,F401  (registers the scripted models by name)
from promptloop.optimizer.view.server import running  # noqa: E402
from tests.optimizer.view.browser import chromium_path  # noqa: E402
from tests.optimizer.view.builders import build_state  # noqa: E402
from tests.optimizer.view.lifecycle_builders import (  # noqa: E402
    JUDGE,
    JUDGED_NEWEST,
    JUDGED_SUITE,
)


def pages(state: Path, base: str, cand: str) -> dict[str, str]:
    """Page name -> path of every kind of page."""
    night = sorted(p.name for p in (state / "nightly").iterdir())[-1]
    session = sorted(p.name for p in (state / "optimize").iterdir()
                     if "pkm_agent" in p.name)[-1]
    pair = {"base": base, "cand": cand}
    return {
        "runs": "/",
        "run": f"/run/{quote(cand, safe='')}",
        "compare": "/compare?" + urlencode(pair),
        "trial": "/compare/trial?" + urlencode({**pair, "task": "greet-hi", "index": 0}),
        "trend": "/trend?" + urlencode({"suite": "pkm_agent_capability"}),
        "ledger": "/ledger",
        "session": f"/session/{quote(session, safe='')}",
        "nightly": f"/nightly/{quote(night, safe='')}",
        "health": f"/health/{quote(JUDGED_SUITE, safe='')}",
        "graduations": "/graduations",
        "calibration": f"/calibration/{quote(JUDGE, safe='')}",
        "label": "/label?" + urlencode({"grader": JUDGE, "run": JUDGED_NEWEST}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    ap.add_argument("--chromium", type=Path, default=None)
    args = ap.parse_args()
    exe = args.chromium or chromium_path()
    if exe is None:
        sys.exit("no Chromium found: apt-get install chromium (or pass --chromium PATH)")
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="promptloop-view-"))
    try:
        view = build_state(tmp)
        with running(view.root) as server, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(exe), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            for name, path in pages(view.root, view.base, view.cand).items():
                page.goto(server.url.rstrip("/") + path)
                page.wait_for_load_state("load")
                out = args.out / f"view-{name}.png"
                page.screenshot(path=str(out), full_page=name not in ("run", "session", "label"))
                print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
            browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
