"""`{{name}}` templates filled in one strict pass: the judges' rubrics (graders/judge.py) and
the proposer's instructions (optimizer/propose/proposer.py).

str.format does not fit these templates: their values are user notes, JSON and prompts, full
of braces. A chain of `str.replace` would re-substitute a marker that appears inside an
earlier value; one regex pass never does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


def render(template: str, values: Mapping[str, str], what: str = "rubric") -> str:
    """Fill `{{name}}` markers in one pass, so text inside a value is never re-substituted.
    A marker without a value, or a value without a marker, is a bug in the `what` template
    and raises ValueError."""
    found = set(PLACEHOLDER.findall(template))
    unknown = found - set(values)
    unused = set(values) - found
    if unknown or unused:
        raise ValueError(
            f"{what} placeholders do not match: unknown {sorted(unknown)}, unused {sorted(unused)}"
        )
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


__all__ = ["PLACEHOLDER", "render"]
