"""Building blocks for promptloop's static HTML pages: escaping, the page shell, bar charts.

Everything here produces one self-contained document: inline CSS, inline SVG, no fonts,
images or scripts from the network, so a report opens the same offline, from a CI artifact or
an email attachment. All text goes through `esc`, because transcripts hold user text and
`<system-reminder>` tags that must show as text, never as markup.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TRUNCATION_MARKER = "… [truncated: {n} more characters]"


def esc(value: Any) -> str:
    """`value` as escaped HTML text (quotes too, so it is also safe inside attributes)."""
    return html.escape(str(value), quote=True)


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + "\n" + TRUNCATION_MARKER.format(n=len(text) - limit)


def short(value: Any, limit: int = 160) -> str:
    """A one-line preview of a value (JSON for non-strings)."""
    text = value if isinstance(value, str) else json_text(value, indent=None)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_text(value: Any, *, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str, sort_keys=False)


def script_json(value: Any) -> str:
    """JSON safe to embed in `<script type="application/json">`: no `<`, `>` or `&` survive.

    Escaping `<` as `\\u003c` rules out `</script>` and `<!--` inside the block; the JSON still
    parses to the same value.
    """
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def delta_pp(base: float | None, cand: float | None) -> str:
    """Change in percentage points, e.g. `+12.5 pp`; empty when either side is unknown."""
    if base is None or cand is None:
        return ""
    return f"{(cand - base) * 100:+.1f} pp"


def delta_class(base: float | None, cand: float | None) -> str:
    if base is None or cand is None or abs(cand - base) < 1e-9:
        return "same"
    return "up" if cand > base else "down"


# --- page shell ------------------------------------------------------------------------

CSS = """
:root{color-scheme:light dark;--bg:#f7f7f5;--fg:#1d1f23;--muted:#646a73;--card:#fff;--line:#dfe1e5;
--pass:#1f8a4c;--fail:#c23b31;--warn:#b7791f;--err:#8e2bb0;--accent:#2f62c9;--base:#9aa1ab;
--code:#f1f2f4;--add:#e3f5e8;--del:#fbe7e5}
@media (prefers-color-scheme:dark){:root{--bg:#16181c;--fg:#e6e7ea;--muted:#9aa1ab;
--card:#1f2227;--line:#33373e;--code:#262a30;--add:#193826;--del:#42201d;--accent:#6f9cf0;
--base:#6b727c}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:20px 24px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}
h3{font-size:14px;margin:14px 0 6px}
a{color:var(--accent)}
.muted{color:var(--muted)}.small{font-size:12px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{background:var(--code);padding:8px 10px;border-radius:6px;margin:4px 0;
white-space:pre-wrap;word-break:break-word;max-height:520px;overflow:auto}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(160px,1fr));gap:10px;
margin:14px 0}
.stat .label{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.stat .value{font-size:24px;font-weight:650;margin:2px 0}
.stat.alert{border-color:var(--fail);background:color-mix(in srgb,var(--fail) 9%,var(--card))}
.stat.alert .value{color:var(--fail)}
.banner{border:2px solid var(--fail);color:var(--fail);border-radius:8px;padding:10px 14px;
margin:12px 0;font-weight:600;background:color-mix(in srgb,var(--fail) 7%,var(--card))}
.banner ul{margin:6px 0 0;font-weight:400}
.prov{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:13px;color:var(--muted)}
.prov b{color:var(--fg);font-weight:600}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:var(--card);white-space:nowrap}
.nowrap{white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:12px;font-weight:600;
color:#fff;background:var(--muted);white-space:nowrap}
.b-passed,.b-true{background:var(--pass)}.b-failed,.b-false{background:var(--fail)}
.b-timedOut{background:var(--warn)}.b-errored{background:var(--err)}.b-skipped,.b-none{background:var(--base)}
.b-warn{background:var(--warn)}
.up{color:var(--pass);font-weight:600}.down{color:var(--fail);font-weight:600}
.same{color:var(--muted)}
svg.chart{width:100%;height:auto;max-width:1000px;display:block}
svg.chart text{fill:var(--fg);font-size:12px;font-family:inherit}
svg.chart .tick{fill:var(--muted);font-size:11px}
svg.chart .grid{stroke:var(--line)}
svg.chart .bar-base{fill:var(--base)}svg.chart .bar-cand{fill:var(--accent)}
svg.chart .bar-good{fill:var(--pass)}svg.chart .bar-mid{fill:var(--warn)}
svg.chart .bar-bad{fill:var(--fail)}svg.chart .track{fill:var(--code)}
svg.chart .up{fill:var(--pass)}svg.chart .down{fill:var(--fail)}svg.chart .same{fill:var(--muted)}
details>summary{cursor:pointer}
"""


def page(title: str, body_html: str, *, extra_css: str = "", script: str = "") -> str:
    """A complete, self-contained HTML document. `body_html` must already be escaped markup.

    `script` is inline JavaScript placed at the end of the body (no external sources).
    """
    js = f"<script>\n{script}\n</script>\n" if script else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="promptloop">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}{extra_css}</style>\n</head>\n"
        f"<body>\n<main>\n{body_html}\n</main>\n{js}</body>\n</html>\n"
    )


# --- bar chart -------------------------------------------------------------------------


@dataclass(frozen=True)
class ChartRow:
    """One labelled bar in [0, 1]; `base` adds a comparison bar and a delta; `note` is shown
    on the right (e.g. `3/4 trials`)."""

    label: str
    value: float | None
    base: float | None = None
    note: str = ""


_LABEL_W, _BAR_X, _BAR_W, _WIDTH = 230, 240, 460, 900


def _bar(y: float, h: float, value: float | None, css: str, tip: str) -> str:
    track = f'<rect class="track" x="{_BAR_X}" y="{y:.1f}" width="{_BAR_W}" height="{h:.1f}"/>'
    if value is None:
        return track + (
            f'<text class="tick" x="{_BAR_X + 6}" y="{y + h - 2:.1f}">n/a<title>{esc(tip)}'
            "</title></text>"
        )
    w = max(0.0, min(1.0, value)) * _BAR_W
    return track + (
        f'<rect class="{css}" x="{_BAR_X}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}">'
        f"<title>{esc(tip)}</title></rect>"
    )


def _grade_class(value: float | None) -> str:
    if value is None:
        return "bar-base"
    return "bar-good" if value >= 0.8 else "bar-mid" if value >= 0.5 else "bar-bad"


def bucket_chart_svg(rows: Sequence[ChartRow], *, metric: str = "trial pass rate",
                     base_label: str = "base", cand_label: str = "candidate") -> str:
    """Inline SVG of horizontal bars, one row per `ChartRow`, values as fractions of 1.

    When any row has a `base`, each row shows base (grey) above candidate (blue) and the
    delta in percentage points; otherwise bars are coloured by level (green/amber/red).
    """
    compare = any(r.base is not None for r in rows)
    row_h = 38.0 if compare else 24.0
    top = 40.0 if compare else 24.0
    height = top + row_h * max(1, len(rows)) + 8
    parts = [
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {height:.0f}" role="img" '
        f'aria-label="{esc(metric)} per bucket">'
    ]
    for i in range(5):
        x = _BAR_X + _BAR_W * i / 4
        parts.append(
            f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6:.0f}" '
            f'y2="{height - 4:.0f}" stroke="#ddd"/>'
            f'<text class="tick" x="{x:.1f}" y="{top - 10:.0f}" text-anchor="middle">'
            f"{25 * i}%</text>"
        )
    if compare:
        parts.append(
            f'<rect class="bar-base" x="{_BAR_X}" y="4" width="12" height="10"/>'
            f'<text x="{_BAR_X + 16}" y="13">{esc(base_label)}</text>'
            f'<rect class="bar-cand" x="{_BAR_X + 110}" y="4" width="12" height="10"/>'
            f'<text x="{_BAR_X + 126}" y="13">{esc(cand_label)}</text>'
        )
    if not rows:
        parts.append(f'<text class="tick" x="{_BAR_X}" y="{top + 14:.0f}">no buckets</text>')
    for i, r in enumerate(rows):
        y = top + i * row_h
        label = r.label if len(r.label) <= 32 else r.label[:31] + "…"
        mid = y + row_h / 2 + 4
        parts.append(
            f'<text x="{_LABEL_W}" y="{mid:.1f}" text-anchor="end">{esc(label)}'
            f"<title>{esc(r.label)}</title></text>"
        )
        right = _BAR_X + _BAR_W + 10
        if compare:
            parts.append(_bar(y + 3, 14, r.base, "bar-base",
                              f"{r.label} · {base_label}: {pct(r.base)}"))
            parts.append(_bar(y + 19, 14, r.value, "bar-cand",
                              f"{r.label} · {cand_label}: {pct(r.value)}"))
            d = delta_pp(r.base, r.value) or "n/a"
            parts.append(
                f'<text x="{right}" y="{mid:.1f}"><tspan class="{delta_class(r.base, r.value)}">'
                f"{esc(d)}</tspan><tspan class=\"tick\" dx=\"8\">{esc(pct(r.base))} → "
                f"{esc(pct(r.value))}</tspan></text>"
            )
        else:
            parts.append(_bar(y + 4, row_h - 8, r.value, _grade_class(r.value),
                              f"{r.label}: {pct(r.value)}"))
            parts.append(
                f'<text x="{right}" y="{mid:.1f}">{esc(pct(r.value))}'
                f'<tspan class="tick" dx="8">{esc(r.note)}</tspan></text>'
            )
    parts.append("</svg>")
    return "".join(parts)
