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


def trend(base: float | None, cand: float | None) -> Tone:
    """`up`, `down` or `same` for a higher-is-better value; `same` when a side is unknown."""
    if base is None or cand is None or abs(cand - base) < 1e-9:
        return "same"
    return "up" if cand > base else "down"


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
