"""The one set of value formatters every output uses (terminal, Markdown, HTML, PR, comment).

Each takes a raw value and returns display text; a missing value (None) shows as `NA`. Nothing
here escapes for a format: Markdown cells go through `report.markdown.cell`, HTML through the
template engine's autoescaping.
"""

from __future__ import annotations

import json
from typing import Any, Literal

NA = "n/a"
TRUNCATION_MARKER = "… [truncated: {n} more characters]"

Tone = Literal["", "up", "down", "same", "alert"]
"""How a value compares (better / worse / equal) or whether it needs attention."""


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.5 -> `50.0%` (`50%` with digits=0)."""
    return NA if value is None else f"{value * 100:.{digits}f}%"


def num(value: float | None, digits: int = 3) -> str:
    """A score with a fixed number of decimals: 0.5 -> `0.500`."""
    return NA if value is None else f"{value:.{digits}f}"


def signed(value: float | None, digits: int = 3) -> str:
    """A difference with its sign: 0.25 -> `+0.250`."""
    return NA if value is None else f"{value:+.{digits}f}"


def p_value(value: float | None) -> str:
    """A p-value with three significant digits."""
    return NA if value is None else f"{value:.3g}"


def interval(low: float | None, high: float | None, digits: int = 3) -> str:
    """A confidence interval of a difference: `[-0.100, +0.250]`."""
    if low is None or high is None:
        return NA
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def delta_pp(base: float | None, cand: float | None) -> str:
    """Change of a rate in percentage points, e.g. `+12.5 pp`; empty when a side is unknown."""
    if base is None or cand is None:
        return ""
    return f"{(cand - base) * 100:+.1f} pp"


def delta(base: float | None, cand: float | None, digits: int = 3) -> str:
    """Change of a score, e.g. `+0.195`; empty when a side is unknown."""
    return "" if base is None or cand is None else signed(cand - base, digits)


SAME_WITHIN = 0.0005
"""The one tone threshold: a change smaller than this is `same`. It is what the text cannot
show: under 0.05 percentage points (`+0.0 pp`, `+0.0 pp/run`) or 0.0005 of a score (`+0.000`)."""


def tone(change: float | None, low: float | None = None, high: float | None = None) -> Tone:
    """The one tone rule for a higher-is-better change (a delta, a slope per run).

    With an interval, the side of 0 the whole interval lies on (`same` when it holds 0, as the
    health trend's direction); without one, the sign of `change` beyond `SAME_WITHIN`; `` when
    the change is unknown."""
    if change is None:
        return ""
    if low is not None and high is not None:
        return "up" if low > 0 else "down" if high < 0 else "same"
    return "up" if change >= SAME_WITHIN else "down" if change <= -SAME_WITHIN else "same"


def trend(base: float | None, cand: float | None) -> Tone:
    """`tone` of the change from `base` to `cand`; `same` when a side is unknown."""
    return tone(None if base is None or cand is None else cand - base) or "same"


def slope(per_run: float | None, low: float | None = None, high: float | None = None) -> str:
    """A trend in percentage points per run with its interval: `+2.5 pp/run [-1.0, +6.0]`."""
    if per_run is None:
        return NA
    text = f"{per_run * 100:+.1f} pp/run"
    if low is not None and high is not None:
        text += f" [{low * 100:+.1f}, {high * 100:+.1f}]"
    return text


def usd(value: float | None) -> str:
    """Dollars with four decimals (model calls cost fractions of a cent)."""
    return NA if value is None else f"${value:.4f}"


def tokens(value: int) -> str:
    """A token count with thousands separators."""
    return f"{value:,}"


def seconds(value: float) -> str:
    return f"{value:.1f}s"


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """`value` as JSON text (non-JSON values via str), keys in their order."""
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str)


def short(value: Any, limit: int = 200) -> str:
    """A one-line preview: whitespace collapsed, cut at `limit` with an ellipsis (JSON for
    non-strings, as grader values and outcomes come from JSON)."""
    text = value if isinstance(value, str) else json_text(value, indent=None)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + "\n" + TRUNCATION_MARKER.format(n=len(text) - limit)


def shorten_title(text: str, limit: int = 60) -> str:
    """The first line of `text`, cut to `limit` characters with `...`."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."
