"""Prompt regions: a prompt that is a string literal, or the text between two marker lines,
inside a source file.

A `RegionSpec` names the file and either a variable (the string literal assigned to it) or a
begin and an end marker, or neither (the whole file). `locate` finds the region's content in
the file text; `value_of` decodes it into the string the agent receives at run time; `splice`
writes new content (in source form, as the proposer edits it) back into the file, after
`check_literal` has refused any text that would break the literal for the host language: its
closing delimiter, an escaping backslash at its end, a newline in a one-line string, a new
interpolation, an invalid escape, or one of the markers.

Supported literals: Dart triple-quoted and one-line strings, raw or not (`const`, `final`, `static
const`, typed `const String x = ...`); Python strings with any prefix (triple-quoted or not, `r`,
f-strings); JavaScript/TypeScript template literals (also `String.raw`) and quoted strings after
`const`/`let`/`var` (`export`, `: string` annotations). A trailing `.trim()` (`.strip()` in
Python) is understood. Comments and other strings are skipped, so a commented-out declaration or
one quoted inside a prompt never counts. Pure: no I/O.

The package, by language family: `model.py` (the spec, the located region, the errors, the
`Syntax` table a language fills in), `dart.py`, `python.py`, `js.py` (each language's syntax:
string openers, declarations, comments, escapes, interpolation), `lexer.py` (literals and
comments of a file, by that table), `literal.py` (a literal found by its variable, its value,
the literal check), `markers.py` (begin/end markers) and `edit.py` (`locate`,
`check_literal`, `splice`, `edited_region_text`). This module re-exports
the public names: import them from `promptloop.optimizer.core.regions`.
"""

from __future__ import annotations

from promptloop.optimizer.core.regions.edit import check_literal, edited_region_text, locate, splice
from promptloop.optimizer.core.regions.literal import value_of, writing_rules
from promptloop.optimizer.core.regions.model import (
    BreaksLiteralError,
    Language,
    Region,
    RegionError,
    RegionKind,
    RegionSpec,
    language_of,
)

__all__ = [
    "BreaksLiteralError",
    "Language",
    "Region",
    "RegionError",
    "RegionKind",
    "RegionSpec",
    "check_literal",
    "edited_region_text",
    "language_of",
    "locate",
    "splice",
    "value_of",
    "writing_rules",
]
