"""Building blocks of promptloop's HTML pages: the template environment, the inlined static
assets, JSON for script blocks, and the bucket bar chart's view-model.

Pages are jinja2 templates (templates/*.html.j2) with autoescaping on, so every value shown
is text unless it is our own markup: transcripts hold user text and `<system-reminder>` tags
that must never become markup. CSS and JavaScript are package files (static/) inlined into
the page, so a report is one self-contained document that opens offline, from a CI artifact
or an email attachment; importlib.resources finds them in an installed wheel too.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

import jinja2
from markupsafe import Markup

from promptloop.optimizer.report import fmt
from promptloop.optimizer.report.html.trials import template_globals

_PACKAGE = "promptloop.optimizer.report.html"


def asset(name: str) -> Markup:
    """A file of static/ (CSS or JavaScript we ship), trusted as markup to inline."""
    text = resources.files(_PACKAGE).joinpath("static", name).read_text(encoding="utf-8")
    return Markup(text)


def script_json(value: Any) -> Markup:
    """JSON safe to embed in `<script type="application/json">`: no `<`, `>` or `&` survive.

    Escaping `<` as `\\u003c` rules out `</script>` and `<!--` inside the block; the JSON still
    parses to the same value.
    """
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return Markup(
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _badge_key(status: Any) -> str:
    """CSS suffix of a status badge: `b-passed`, `b-true`, `b-none`, ..."""
    if status is None:
        return "none"
    return str(status).lower() if isinstance(status, bool) else str(status)


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(_PACKAGE, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        pct=fmt.pct, num=fmt.num, signed=fmt.signed, delta_pp=fmt.delta_pp, trend=fmt.trend,
        usd=fmt.usd, tokens=fmt.tokens, seconds=fmt.seconds, short=fmt.short, cut=fmt.truncate,
        json_text=fmt.json_text, script_json=script_json, badge_key=_badge_key,
    )
    env.globals.update(asset=asset, **template_globals())
    return env


def render(template: str, **context: Any) -> str:
    """Render a page template of templates/ with `context`."""
    return environment().get_template(template).render(**context)


def macro(template: str, name: str) -> Any:
    """A macro of a template, callable from Python (returns markup)."""
    return getattr(environment().get_template(template).module, name)


# --- bar chart -------------------------------------------------------------------------


@dataclass(frozen=True)
class ChartRow:
    """One labelled bar in [0, 1]; `base` adds a comparison bar and a delta; `note` is shown
    on the right (e.g. `3/4 trials`)."""

    label: str
    value: float | None
    base: float | None = None
    note: str = ""

    @property
    def short_label(self) -> str:
        return self.label if len(self.label) <= 32 else self.label[:31] + "…"

    @property
    def grade(self) -> str:
        """Bar colour by level when not comparing: good / mid / bad."""
        if self.value is None:
            return "bar-base"
        return "bar-good" if self.value >= 0.8 else "bar-mid" if self.value >= 0.5 else "bar-bad"


@dataclass(frozen=True)
class Chart:
    """Geometry of the inline SVG bar chart (macro `chart` in macros.html.j2).

    When any row has a `base`, each row shows base (grey) above candidate (blue) and the
    delta in percentage points; otherwise bars are coloured by level (green/amber/red).
    """

    rows: tuple[ChartRow, ...]
    metric: str = "trial pass rate"
    base_label: str = "base"
    cand_label: str = "candidate"

    LABEL_W: ClassVar[int] = 230
    BAR_X: ClassVar[int] = 240
    BAR_W: ClassVar[int] = 460
    WIDTH: ClassVar[int] = 900

    @property
    def compare(self) -> bool:
        return any(r.base is not None for r in self.rows)

    @property
    def row_h(self) -> float:
        return 38.0 if self.compare else 24.0

    @property
    def top(self) -> float:
        return 40.0 if self.compare else 24.0

    @property
    def height(self) -> float:
        return self.top + self.row_h * max(1, len(self.rows)) + 8

    @property
    def grid(self) -> list[tuple[float, int]]:
        """(x, percent) of the five vertical grid lines."""
        return [(self.BAR_X + self.BAR_W * i / 4, 25 * i) for i in range(5)]

    def y(self, index: int) -> float:
        return self.top + index * self.row_h

    def bar(self, value: float) -> float:
        return max(0.0, min(1.0, value)) * self.BAR_W


def bucket_chart_svg(rows: Sequence[ChartRow], **options: str) -> str:
    """The chart of `rows` as an inline SVG string (`options`: metric, base/cand labels)."""
    return str(macro("macros.html.j2", "chart")(Chart(tuple(rows), **options))).strip()
