"""Marker regions: the lines between a begin and an end marker line, in any file; inside a
string literal of code, new text is checked against that literal too. Pure: no I/O."""

from __future__ import annotations

import re

from promptloop.optimizer.core.regions.lexer import Lexed
from promptloop.optimizer.core.regions.model import (
    CODE_LANGUAGES,
    YAML_SUFFIXES,
    Language,
    Region,
    RegionError,
    RegionSpec,
    common_indent,
)


def _marker_lines(text: str, marker: str) -> list[int]:
    """0-based indexes of the lines holding `marker` (not followed by more of a name)."""
    pattern = re.compile(re.escape(marker) + r"(?![\w-])")
    return [i for i, line in enumerate(text.split("\n")) if pattern.search(line)]


def locate_markers(spec: RegionSpec, text: str, lang: Language) -> Region:
    """The lines strictly between the begin and the end marker lines; RegionError when a
    marker is missing, found twice, or the end comes first."""
    assert spec.begin is not None and spec.end is not None
    where = f"{spec.path}: markers {spec.begin!r} ... {spec.end!r}"
    begins, ends = _marker_lines(text, spec.begin), _marker_lines(text, spec.end)
    for what, marker, hits in (("begin", spec.begin, begins), ("end", spec.end, ends)):
        if not hits:
            raise RegionError(f"{where}: the {what} marker {marker!r} is not found")
        if len(hits) > 1:
            raise RegionError(f"{where}: the {what} marker {marker!r} is found twice, at lines "
                              f"{', '.join(str(h + 1) for h in hits)}")
    b, e = begins[0], ends[0]
    if e <= b:
        raise RegionError(f"{where}: the end marker (line {e + 1}) does not come after the "
                          f"begin marker (line {b + 1})")
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    start, end = offsets[b + 1], offsets[e]
    enclosing = None
    if lang in CODE_LANGUAGES:
        lit = Lexed(text, lang).literal_around(start, end)
        if lit is not None:
            enclosing = (lit.quote, lit.quote, lit.raw, lit.fstring)
    content = text[start:end]
    indent = common_indent(content) if spec.path.lower().endswith(YAML_SUFFIXES) else ""
    return Region(spec, start, end, b + 2, e, content, "", "", lang, enclosing=enclosing,
                  indent=indent)
