"""The viewer's templates: an overlay of the HTML report's jinja2 environment.

The overlay shares the report's filters, globals, autoescaping and strict undefined values,
and looks up templates in optimizer/view/templates before the report's own, so a viewer page
can extend `report.html.j2` or `nightly.html.j2` (the run and night pages are the report's
pages with the viewer's navigation) and call the report's macros (tables, charts, a trial's
detail). Scripts are served as files (`/static/...`) so the viewer's Content-Security-Policy
can forbid inline script; styles are inlined as in the report.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup

from promptloop.optimizer.report.html.kit import environment as report_environment
from promptloop.optimizer.view.saved import STATE_LABELS

_PACKAGE = "promptloop.optimizer.view"
STATIC = {
    "report.js": ("promptloop.optimizer.report.html", "report.js"),
    "view.js": (_PACKAGE, "view.js"),
}
"""The only files under /static/: name -> (package, file in its static/ folder)."""
NAV = (("/", "Runs"), ("/health", "Health"), ("/graduations", "Graduations"),
       ("/calibration", "Judges"), ("/ledger", "Ledger"), ("/sessions", "Optimize sessions"),
       ("/nightly", "Nightly"))


def static_file(name: str) -> bytes | None:
    """A shipped static file by its public name; None for any other name."""
    where = STATIC.get(name)
    if where is None:
        return None
    return resources.files(where[0]).joinpath("static", where[1]).read_bytes()


def view_asset(name: str) -> Markup:
    """A stylesheet of optimizer/view/static, trusted as markup to inline."""
    text = resources.files(_PACKAGE).joinpath("static", name).read_text(encoding="utf-8")
    return Markup(text)


def href(path: str, **query: Any) -> str:
    """A link inside the viewer: path segments are quoted, query values url-encoded."""
    items = [(k, v) for k, v in query.items() if v is not None and v != ""]
    return path + ("?" + urlencode(items) if items else "")


def seg(value: str) -> str:
    """One path segment (a run name or an id), percent-encoded."""
    return quote(value, safe="")


@functools.cache
def environment() -> jinja2.Environment:
    base = report_environment()
    env = base.overlay(loader=jinja2.ChoiceLoader([
        jinja2.PackageLoader(_PACKAGE, "templates"), base.loader or jinja2.DictLoader({}),
    ]))
    # the overlay shares the report's dicts: copy them before adding the viewer's helpers
    env.globals = {**base.globals, "view_asset": view_asset, "href": href, "seg": seg,
                   "nav_links": NAV, "cal_labels": STATE_LABELS}
    env.filters = {**base.filters, "seg": seg}
    return env


def render(template: str, *, active: str = "", state: str = "", **context: Any) -> str:
    """Render a viewer page; `active` marks the navigation link of the page's section."""
    return environment().get_template(template).render(active=active, state=state, **context)
